"""The pytest-html hooks that read the session: a failed job's log tail as an extra, and the
cells' reports above the results table. The Session registers them when pytest-html is active;
the table's columns (stateless) are report/html.py's."""

from __future__ import annotations

from collections.abc import Generator
from html import escape
from typing import TYPE_CHECKING

import pytest
from pytest_html import extras

from ..report.build import report_data
from ..report.html_cell import STYLE, cell_html
from ..results import JobResult
from ..shareable import clean
from .items import CellItem
from .outcome import RunFailed

if TYPE_CHECKING:
    from .session import Session


class HtmlHooks:
    """pytest-html's view of the session (registered as `xlatune-html-session`)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Attach the log tail of a job that ended without a measurement (failed or OOM xfail)."""
        report = yield
        if (
            report.when == "call"
            and isinstance(item, CellItem)
            and (report.failed or report.skipped)
            and item.config.getoption("htmlpath", None)
        ):
            result = self._failed_result(item, call)
            if result is not None:
                report.extras = [  # type: ignore[attr-defined]
                    *getattr(report, "extras", []),
                    extras.text(_log_text(result), name=escape(f"log tail (job {result.job_id})")),
                ]
                if hasattr(report, "wasxfail"):
                    # pytest-html shows an xfail's longrepr: the traceback of pytest.xfail() itself.
                    report.longrepr = f"{report.wasxfail}\nlog: {result.log_path}"
        return report

    def _failed_result(self, item: CellItem, call: pytest.CallInfo[None]) -> JobResult | None:
        if call.excinfo is not None and isinstance(call.excinfo.value, RunFailed):
            return call.excinfo.value.result
        props = dict(item.user_properties)
        job_id, verdict = props.get("xlatune_job_id"), props.get("xlatune_verdict")
        if job_id is None or verdict in (None, "success", "soft_success"):
            return None  # a regression of a measured run: the failure text says it all
        sweep = self.session.sweeps.get(item.cell.path)
        return next((r for r in sweep.results() if r.job_id == job_id), None) if sweep else None

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
    ) -> None:
        if self.session.settings.gate:  # the gate's verdict, as <MODEL_TAG>-gate.md says it
            from ..report.gate import render_html
            from .gate_outputs import gate_cells

            cells = [c for found in gate_cells(self.session).values() for c in found]
            prefix.append(STYLE + render_html(cells))
            return
        # The same ReportData the markdown report renders (evidence and the numerics mode included).
        numerics = self.session.settings.numerics
        parts = [cell_html(report_data(report, numerics)) for report in self.session.report_inputs()]
        if parts:
            prefix.append(clean(STYLE + "".join(parts)))  # escaped below; secrets and escape codes out here


def _log_text(result: JobResult) -> str:
    header = f"job {result.job_id} ({result.verdict.value}): {result.reason}\nlog: {result.log_path}\n"
    return header + "\n" + (result.log_tail.rstrip() + "\n" if result.log_tail else "(no log tail)\n")
