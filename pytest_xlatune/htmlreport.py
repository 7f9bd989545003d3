"""pytest-html hooks: xlatune columns per item and the leaderboard above the results table.

Registered by plugin.pytest_configure only when pytest-html is active.
"""

from __future__ import annotations

from html import escape
from typing import Any

import pytest

from .report.data import build
from .runtime import RUNTIME_KEY

COLUMNS = (
    ("Profile", "xlatune_profile", "{}"),
    ("Wave", "xlatune_wave", "{}"),
    ("Config", "xlatune_config_tag", "{}"),
    ("TGS", "xlatune_tgs", "{:.1f}"),
    ("Δ% vs baseline", "xlatune_delta_pct", "{:+.2f} %"),
    ("Step (s)", "xlatune_step_seconds", "{:.3f}"),
    ("Job", "xlatune_job_id", "{}"),
    ("Verdict", "xlatune_verdict", "{}"),
)
FIRST_EXTRA_COLUMN = 2  # after Result and Test


def pytest_html_results_table_header(cells: list[str]) -> None:
    for offset, (title, _, _) in enumerate(COLUMNS):
        cells.insert(FIRST_EXTRA_COLUMN + offset, f"<th>{escape(title)}</th>")


def pytest_html_results_table_row(report: pytest.TestReport, cells: list[str]) -> None:
    props = dict(report.user_properties)
    for offset, (_, key, fmt) in enumerate(COLUMNS):
        value = props.get(key)
        text = "" if value is None else fmt.format(value)
        cells.insert(FIRST_EXTRA_COLUMN + offset, f"<td>{escape(text)}</td>")


def pytest_html_results_summary(prefix: list[str], summary: list[str], postfix: list[str],
                                session: pytest.Session) -> None:
    runtime = session.config.stash.get(RUNTIME_KEY, None)
    if runtime is None:
        return
    for cell in runtime.cells.values():
        sweep = runtime.sweep_if_stored(cell)
        if sweep is None:
            continue
        data = build(cell, sweep.results(), sweep.nodelist, cell.backend.kind.value)
        prefix.append(leaderboard_html(data))


def leaderboard_html(data: Any) -> str:
    rows = "".join(
        f"<tr><td>{escape(r.profile)}{' ⭐' if r.winner else ''}</td><td><code>{escape(r.flags)}</code></td>"
        f"<td>{r.tgs:.1f}</td><td>{'' if r.delta_pct is None else f'{r.delta_pct:+.2f} %'}</td>"
        f"<td>{escape(r.job_ids)}</td></tr>"
        for r in data.leaderboard
    )
    title = f"{data.cell.model_tag} {data.cell.parallelism.text} leaderboard ({data.primary})"
    return (f'<h2 class="xlatune-leaderboard">{escape(title)}</h2>'
            f'<table class="xlatune-leaderboard"><tr><th>Profile</th><th>Flags</th><th>TGS</th>'
            f"<th>Δ% vs baseline-deployed</th><th>Job</th></tr>{rows}</table>")
