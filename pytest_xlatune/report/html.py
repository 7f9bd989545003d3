"""pytest-html hooks: xlatune columns per item, the log tail of a failed job as an extra, and per
cell an SVG chart and the leaderboard above the results table.

Registered by plugin.pytest_configure only when pytest-html is active. Everything is inline
HTML/SVG (no script, no external file), so `--self-contained-html` needs nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from html import escape
from typing import Any

import pytest
from pytest_html import extras

from ..engine.items import CellItem, RunFailed
from . import chart
from .build import report_data
from .data import ReportData
from ..results import JobResult
from ..engine.session import RUNTIME_KEY

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
    verdict, direction = props.get("xlatune_verdict"), props.get("xlatune_direction")
    return " ".join(str(v).replace("_", " ") for v in (verdict, direction) if v)


COLUMNS: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
    ("Profile", _fixed("{}", "xlatune_profile")),
    ("Wave", _fixed("{}", "xlatune_wave")),
    ("Config", _fixed("{}", "xlatune_config_tag")),
    ("TGS", _fixed("{:.1f}", "xlatune_tgs")),
    ("Δ% (95 % interval)", _delta),
    ("Step (s)", _fixed("{:.3f}", "xlatune_step_seconds")),
    ("Job", _fixed("{}", "xlatune_job_id")),
    ("Verdict", _verdict),
    ("Numerics", lambda props: f"changed: {props['xlatune_numerics']}" if props.get("xlatune_numerics") else ""),
)
STYLE = """<style>
.xlatune-cell{margin:1em 0 2em}
td.xlatune-col{white-space:nowrap}
table.xlatune-leaderboard{border-collapse:collapse;margin-top:.5em}
table.xlatune-leaderboard th,table.xlatune-leaderboard td{border:1px solid #ddd;padding:2px 8px;text-align:left}
table.xlatune-leaderboard td.num{text-align:right;font-variant-numeric:tabular-nums}
</style>"""


def pytest_html_results_table_header(cells: list[str]) -> None:
    for offset, (title, _) in enumerate(COLUMNS):
        cells.insert(FIRST_EXTRA_COLUMN + offset, f"<th>{escape(title)}</th>")


def pytest_html_results_table_row(report: pytest.TestReport, cells: list[str]) -> None:
    props = dict(report.user_properties)
    for offset, (_, text) in enumerate(COLUMNS):
        cells.insert(FIRST_EXTRA_COLUMN + offset,
                     f'<td class="xlatune-col">{escape(text(props))}</td>')


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Attach the log tail of a job that ended without a measurement (failed or OOM xfail)."""
    report = yield
    if (report.when == "call" and isinstance(item, CellItem) and (report.failed or report.skipped)
            and item.config.getoption("htmlpath", None)):
        result = _failed_result(item, call)
        if result is not None:
            report.extras = [*getattr(report, "extras", []), extras.text(
                _log_text(result), name=f"log tail (job {result.job_id})")]
            if hasattr(report, "wasxfail"):
                # pytest-html shows an xfail's longrepr: the traceback of pytest.xfail() itself.
                report.longrepr = f"{report.wasxfail}\nlog: {result.log_path}"
    return report


def _failed_result(item: CellItem, call: pytest.CallInfo[None]) -> JobResult | None:
    if call.excinfo is not None and isinstance(call.excinfo.value, RunFailed):
        return call.excinfo.value.result
    props = dict(item.user_properties)
    job_id, verdict = props.get("xlatune_job_id"), props.get("xlatune_verdict")
    if job_id is None or verdict in (None, "success", "soft_success"):
        return None  # a regression of a measured run: the failure text says it all
    sweep = item.config.stash[RUNTIME_KEY].sweeps.get(item.cell.path)
    return next((r for r in sweep.results() if r.job_id == job_id), None) if sweep else None


def _log_text(result: JobResult) -> str:
    header = f"job {result.job_id} ({result.verdict.value}): {result.reason}\nlog: {result.log_path}\n"
    return header + "\n" + (result.log_tail.rstrip() + "\n" if result.log_tail else "(no log tail)\n")


def pytest_html_results_summary(prefix: list[str], summary: list[str], postfix: list[str],
                                session: pytest.Session) -> None:
    runtime = session.config.stash.get(RUNTIME_KEY, None)
    if runtime is None:
        return
    if runtime.settings.gate:  # the gate's verdict, as <MODEL_TAG>-gate.md says it
        from ..engine.gate_outputs import gate_cells
        from .gate import render_html

        prefix.append(STYLE + render_html([c for cells in gate_cells(runtime).values() for c in cells]))
        return
    # The same ReportData the markdown report renders (evidence and the numerics mode included).
    parts = [cell_html(report_data(report, runtime.settings.numerics)) for report in runtime.report_inputs()]
    if parts:
        prefix.append(STYLE + "".join(parts))


def cell_html(data: ReportData) -> str:
    """A cell's heading, chart and leaderboard table."""
    title = f"{data.cell.model_tag} {data.cell.parallelism.text} leaderboard ({data.primary})"
    cost = f'<p class="xlatune-cost">Cost: {escape(data.spent.text())}</p>' if data.spent else ""
    cost += "".join(f'<p class="xlatune-adaptive">Adaptive sweep: {escape(line)}</p>' for line in data.adaptive)
    return (f'<div class="xlatune-cell"><h2 class="xlatune-leaderboard">{escape(title)}</h2>'
            f"{cost}{chart.render(data)}{leaderboard_html(data)}</div>")


def leaderboard_html(data: ReportData) -> str:
    def num(value: float | None, fmt: str) -> str:
        return "" if value is None else fmt.format(value)

    # ★ (U+2605) rather than the markdown's ⭐ emoji, which browsers without an emoji font draw as a box.
    rows = "".join(
        f"<tr><td>{escape(r.profile)}{' ★' if r.winner else ''}</td>"
        f"<td><code>{escape(r.flags)}</code></td>"
        f'<td class="num">{r.tgs:,.1f}</td><td class="num">{num(r.step_seconds, "{:.3f}")}</td>'
        f'<td class="num">{num(r.delta_pct, "{:+.2f} %")}</td>'
        f"<td>{'' if r.ci_low is None or r.ci_high is None else f'[{r.ci_low:+.2f}, {r.ci_high:+.2f}] %'}</td>"
        f'<td class="num">{num(r.detectable_pct, "≥ +{:.1f} %")}</td>'
        f"<td>{escape(r.direction.replace('_', ' '))}</td>"
        f"<td>{escape(('changed: ' + r.departed) if r.numerics == 'changed' else r.numerics)}</td>"
        f"<td>{escape(r.job_ids)}</td></tr>"
        for r in data.leaderboard
    )
    return ('<table class="xlatune-leaderboard"><tr><th>Profile</th><th>Flags</th><th>TGS</th>'
            "<th>Step (s)</th><th>Δ% vs baseline-deployed</th><th>95 % interval</th>"
            f"<th>Detectable</th><th>Verdict</th><th>Numerics</th><th>Job</th></tr>{rows}</table>")
