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
from .build import report_data
from .html_cell import STYLE, cell_html, leaderboard_html  # noqa: F401  (the blocks, engine-free)
from ..results import JobResult
from ..shareable import clean
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


def pytest_html_results_table_header(cells: list[str]) -> None:
    for offset, (title, _) in enumerate(COLUMNS):
        cells.insert(FIRST_EXTRA_COLUMN + offset, f"<th>{escape(title)}</th>")


# Columns that show the figure of the item's settings: rewritten with the final figure at the
# end of the session (report/final.py rewrite_html) when a later run of those settings joined it.
FIGURE_COLUMNS = {"TGS": "xlatune-fig-tgs", "Δ% (95 % interval)": "xlatune-fig-delta",
                  "Step (s)": "xlatune-fig-step", "Verdict": "xlatune-fig-verdict"}


def pytest_html_results_table_row(report: pytest.TestReport | pytest.CollectReport,
                                  cells: list[str]) -> None:
    """Our columns for every row: a collection error (a CollectReport, no user_properties) gets
    empty ones. pytest-html puts the test id into its cell unescaped: escape it here."""
    _escape_test_id(report, cells)
    props = dict(getattr(report, "user_properties", ()))
    for offset, (title, text) in enumerate(COLUMNS):
        extra = f" {FIGURE_COLUMNS[title]}" if title in FIGURE_COLUMNS else ""
        cells.insert(FIRST_EXTRA_COLUMN + offset,
                     f'<td class="xlatune-col{extra}">{escape(text(props))}</td>')


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
                _log_text(result), name=escape(f"log tail (job {result.job_id})"))]
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
        prefix.append(clean(STYLE + "".join(parts)))  # escaped below; secrets and escape codes out here
