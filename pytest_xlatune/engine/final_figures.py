"""One figure per settings at the end of a session: the plugin object that remembers the figure
each item line printed and writes the final ones (report/final.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..report.final import Final, corrections, finals, rewrite_html, rewrite_junit
from ..shareable import clean

if TYPE_CHECKING:
    from .session import Session

Printed = tuple[str, dict[str, object]]  # an item's node id and the properties its line printed


class FinalFigures:
    """Remembers the figure each item line printed; at the end prints the final figure where a
    later run of the same settings changed it, and gives junit and HTML files the final figures.
    A part of the Session, registered beside it: its sessionfinish runs after junitxml's."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.printed: dict[tuple[str, str], Printed] = {}  # (cell, item) → ({}: no figure printed)
        self.final: dict[tuple[str, str], Final] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if report.when == "call" and props.get("xlatune_cell") and props.get("xlatune_tgs") is not None:
            key = (str(props["xlatune_cell"]), str(props["xlatune_item"]))
            self.printed[key] = (report.nodeid, props if report.passed else {})

    @pytest.hookimpl(trylast=True)  # after junitxml wrote its file
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.printed or hasattr(session.config, "workerinput"):
            return
        try:
            self.final = finals(self.session.report_inputs(self.session.cells_that_ran()), self.printed)
        except OSError:
            return
        xml = getattr(session.config.option, "xmlpath", None)
        if xml and self.final:
            rewrite_junit(Path(xml), self.final)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """After pytest-html wrote its file (its last hook): the item rows' final figures, and its
        Environment table below the cells' TL;DR, chart and results (a session with cells only)."""
        html = getattr(config.option, "htmlpath", None)
        if (
            not html
            or hasattr(config, "workerinput")
            or not self.session.cells
            or not config.pluginmanager.hasplugin("xlatune-html")
        ):
            return
        from ..report.html import figure_cells

        rewrite_html(
            Path(html),
            [
                (nodeid, *cell)
                for key, now in self.final.items()
                for nodeid, props in [self.printed[key]]
                for cell in figure_cells(props, {**props, **now.props()})
            ],
        )

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        option = terminalreporter.config.option
        for path in (getattr(option, "xmlpath", None), getattr(option, "htmlpath", None)):
            if self.printed and path and Path(path).is_symlink():
                terminalreporter.write_line(
                    f"xlatune: {path} is a symbolic link: its final figures are not written "
                    "(pytest wrote it through the link; xlatune writes nothing through one)"
                )
        if lines := corrections(self.printed, self.final):
            terminalreporter.write_sep("-", "xlatune: final figures (later runs of the same settings joined them)")
            for line in lines:
                terminalreporter.write_line(clean(line, terminal=True))  # it names stored job ids
