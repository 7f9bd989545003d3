"""pytest-html hooks: xlatune columns per item (the hooks that read the session, a failed job's
log tail and per cell an SVG chart and the leaderboard above the table, are engine/html_hooks.py).

Registered by the Session only when pytest-html is active. Everything is inline
HTML/SVG (no script, no external file), so `--self-contained-html` needs nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

import pytest

from .final import judged
from .html_cell import STYLE, cell_html, leaderboard_html  # noqa: F401  (the blocks, engine-free)

FIRST_EXTRA_COLUMN = 2  # after Result and Test


def _fixed(fmt: str, key: str) -> Callable[[dict[str, Any]], str]:
    return lambda props: "" if props.get(key) is None else fmt.format(props[key])


def _delta(props: dict[str, Any]) -> str:
    delta, interval = props.get("xlatune_delta_pct"), props.get("xlatune_delta_ci")
    if delta is None:
        return ""
    text = f"{delta:+.2f} %"
    return text + (f" [{interval[0]:+.2f}, {interval[1]:+.2f}]" if interval else "")


def _verdict(props: dict[str, Any]) -> str:
    verdict = props.get("xlatune_verdict")
    text = " ".join(v for v in (str(verdict or "").replace("_", " "), judged(props)) if v)
    # An inert candidate, in the words of its terminal line and junit property.
    return text + (f" ({props['xlatune_inert']})" if props.get("xlatune_inert") else "")


def _job(props: dict[str, Any]) -> str:
    """The runs behind the TGS shown (`9503.9 = mean of …; jobs 1, 2, 7, 10`), as the leaderboard
    says them, else the item's own job."""
    runs = str(props.get("xlatune_runs") or "")
    return runs if " = mean of " in runs else _fixed("{}", "xlatune_job_id")(props)


COLUMNS: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
    ("Profile", _fixed("{}", "xlatune_profile")),
    ("Wave", _fixed("{}", "xlatune_wave")),
    ("Config", _fixed("{}", "xlatune_config_tag")),
    ("TGS", _fixed("{:.1f}", "xlatune_tgs")),
    ("Δ% (95 % interval)", _delta),
    ("Step (s)", _fixed("{:.3f}", "xlatune_step_seconds")),
    ("Job", _job),
    ("Verdict", _verdict),
    ("Numerics", lambda props: f"changed: {props['xlatune_numerics']}" if props.get("xlatune_numerics") else ""),
)


def pytest_html_results_table_header(cells: list[str]) -> None:
    for offset, (title, _) in enumerate(COLUMNS):
        cells.insert(FIRST_EXTRA_COLUMN + offset, f"<th>{escape(title)}</th>")


# Columns that show the figure of the item's settings: rewritten with the final figure at the
# end of the session (report/final.py rewrite_html) when a later run of those settings joined it.
FIGURE_COLUMNS = {
    "TGS": "xlatune-fig-tgs",
    "Δ% (95 % interval)": "xlatune-fig-delta",
    "Step (s)": "xlatune-fig-step",
    "Verdict": "xlatune-fig-verdict",
    "Job": "xlatune-fig-job",
}


def pytest_html_results_table_row(report: pytest.TestReport | pytest.CollectReport, cells: list[str]) -> None:
    """Our columns for every row: a collection error (a CollectReport, no user_properties) gets
    empty ones. pytest-html puts the test id into its cell unescaped: escape it here."""
    _escape_test_id(report, cells)
    props = dict(getattr(report, "user_properties", ()))
    for offset, (title, text) in enumerate(COLUMNS):
        extra = f" {FIGURE_COLUMNS[title]}" if title in FIGURE_COLUMNS else ""
        cells.insert(FIRST_EXTRA_COLUMN + offset, f'<td class="xlatune-col{extra}">{escape(text(props))}</td>')


def figure_cells(props: dict[str, Any], final: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(cell class, run-time text, final text) of the figure columns of an item's row."""
    texts = dict(COLUMNS)
    return [(marker, texts[title](props), texts[title](final)) for title, marker in FIGURE_COLUMNS.items()]


def pytest_html_results_table_html(report: pytest.TestReport | pytest.CollectReport, data: list[str]) -> None:
    """A skipped item's log is its reason: not pytest's (path, line, 'Skipped: …') tuple. Ours: a
    cell item (its properties name the cell) or the gate's lock-less cell (its place says `cell: `)."""
    longrepr = report.longrepr
    location = getattr(report, "location", None) or ("", 0, "")
    ours = dict(getattr(report, "user_properties", ())).get("xlatune_cell") or str(location[2]).startswith("cell: ")
    if not (report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3 and ours):
        return
    tuple_text = escape(report.longreprtext) + "\n"
    reason = escape(str(longrepr[2]).removeprefix("Skipped: ")) + "\n"
    data[:] = [reason if entry == tuple_text else entry for entry in data]


def _escape_test_id(report: pytest.TestReport | pytest.CollectReport, cells: list[str]) -> None:
    test_id = report.nodeid if report.when == "call" else f"{report.nodeid}::{report.when}"
    raw = f'<td class="col-testId">{test_id}</td>'
    for index, cell in enumerate(cells):
        if cell == raw:  # as pytest-html 4 builds it; left alone if a later version escapes it
            cells[index] = f'<td class="col-testId">{escape(test_id)}</td>'
