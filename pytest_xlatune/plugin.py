"""pytest hooks for xlatune: options, cell collection, per-item status, reports. Hooks only."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from .cell.load import CellError, load_cell
from .engine.history_outputs import after_session
from .engine.items import CellFile, CellItem
from .engine.session import RUNTIME_KEY, Runtime
from .settings import Settings, add_options
from .engine.stopsignals import StopSignals
from .shareable import clean, clean_report
from . import shareable
from .report.final import Final, corrections, finals, rewrite_html, rewrite_junit, status_text
from .launch.registry import Backend, LaunchContext, make_backend, register_kind, unregister_kinds

CELL_SUFFIXES = (".yml", ".yaml")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(trylast=True)
def pytest_xlatune_make_launcher(context: LaunchContext) -> Backend:
    """The built-in backends, after every plugin's."""
    return make_backend(context)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)
    parser.addini("xlatune_cells", "glob patterns (relative to rootdir) of cell files collected "
                  "without naming them (default: cells/*.yml cells/*.yaml)", type="linelist",
                  default=["cells/*.yml", "cells/*.yaml"])


def pytest_cmdline_main(config: pytest.Config) -> None:
    """`-n N` without `--dist`: xdist's default `load` would split a cell's items between workers
    (the second one refused by the store's lock); keep each cell's slot on one worker instead, as
    `--dist loadgroup` does. An explicit `--dist` is left as given."""
    if getattr(config.option, "dist", "no") == "load" and not _dist_given(config):
        config.option.dist = "loadgroup"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist workers parse the command line again (`-n 2` alone reads as no loadgroup there):
    tell them the controller schedules by group, so cell items carry their group suffix."""
    node.workerinput["xlatune_loadgroup"] = node.config.getvalue("dist") == "loadgroup"


def _dist_given(config: pytest.Config) -> bool:
    args = [*config.invocation_params.args, *config.getini("addopts"),
            *os.environ.get("PYTEST_ADDOPTS", "").split()]
    return any(a in ("--dist", "-d", "--distload") or a.startswith("--dist=") for a in args)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "xlatune: an item of an XLA tuning cell")
    for added in config.hook.pytest_xlatune_backend_kinds():
        for backend_plugin in added:
            register_kind(backend_plugin)
    settings = Settings.from_config(config)
    settings.hang_settings(), settings.base_policy()  # bad values fail now, as usage errors
    settings.check_store()
    settings.check_outputs()
    shareable.configure(settings.mask)
    _check_cell_paths(config)

    def write(text: str, always: bool) -> None:
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if terminal is None or (config.option.verbose <= 0 and not always):
            return
        # Written while the item runs, so step around output capturing.
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            terminal.write_line(clean(f"  [xlatune] {text}", terminal=True))

    # Progress (steps, re-attach) with -v; incidents (retries, RESUMEs, failed polls, cancels on
    # sight, notifications not sent) always: a sweep runs for hours while nobody watches.
    worker = getattr(config, "workerinput", None)
    runtime = Runtime(settings, config.rootpath, lambda text: write(text, False),
                      warn=lambda text: write(text, True),
                      session_id=worker["testrunuid"] if worker else uuid.uuid4().hex,
                      make_backend=lambda context: config.hook.pytest_xlatune_make_launcher(context=context),
                      rerun_failed=bool(config.getoption("lf", False)))
    config.stash[RUNTIME_KEY] = runtime
    config.pluginmanager.register(CellsSeen(runtime), "xlatune-cells-seen")
    config.pluginmanager.register(FinalFigures(runtime), "xlatune-final-figures")
    _STOP_SIGNALS.install()
    if config.pluginmanager.hasplugin("html"):
        from .report import html as htmlreport

        config.pluginmanager.register(htmlreport, "xlatune-html")


_STOP_SIGNALS = StopSignals()


def pytest_unconfigure(config: pytest.Config) -> None:
    _STOP_SIGNALS.restore()
    unregister_kinds()
    shareable.reset()


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after every other plugin's wrapper
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """What a cell item reports reaches the terminal, junit.xml, pytest-html and xdist: clean it."""
    report = yield
    if isinstance(item, CellItem):
        clean_report(report)
    return report


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    report = yield
    if isinstance(collector, CellFile):
        clean_report(report)
    return report


class CellsSeen:
    """Under xdist the controller collects nothing: it learns the cells from workers' reports,
    so it can write each cell's report once, at the end."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if not props.get("xlatune_cell"):
            return
        cell_path = Path(str(props["xlatune_cell"]))
        if cell_path not in self.runtime.cells:
            try:
                self.runtime.note_cell(load_cell(cell_path))
            except CellError:
                return  # already reported by the worker that collected it
        if self.runtime.settings.gate:
            self.runtime.note_gate(Path(str(cell_path)), report)
        if report.when == "call":
            self.runtime.note_ran(cell_path, str(props["xlatune_item"]))
            if props.get("xlatune_sweep_stop"):  # from a worker too: the controller writes the lock
                self.runtime.note_stopped(cell_path)
            if props.get("xlatune_needs"):
                self.runtime.needs[report.nodeid] = str(props["xlatune_needs"])


class FinalFigures:
    """One figure per settings: remembers the figure each item line printed; at the end prints
    the final figure where a later run of the same settings changed it, and gives the junit file
    the final figures (report/final.py)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        # (cell, item) → its node id and the properties its line printed ({}: no figure printed)
        self.printed: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
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
            self.final = finals(self.runtime.report_inputs(self.runtime.cells_that_ran()), self.printed)
        except OSError:
            return
        xml = getattr(session.config.option, "xmlpath", None)
        if xml and self.final:
            rewrite_junit(Path(xml), self.final)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """After pytest-html wrote its file (its last hook): the item rows' final figures."""
        html = getattr(config.option, "htmlpath", None)
        if not html or not self.final or not config.pluginmanager.hasplugin("xlatune-html"):
            return
        from .report.html import figure_cells

        rewrite_html(Path(html), [(nodeid, *cell) for key, now in self.final.items()
                                  for nodeid, props in [self.printed[key]]
                                  for cell in figure_cells(props, {**props, **now.props()})])

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if lines := corrections(self.printed, self.final):
            terminalreporter.write_sep("-", "xlatune: final figures (later runs of the same settings joined them)")
            for line in lines:
                terminalreporter.write_line(line)


def _check_cell_paths(config: pytest.Config) -> None:
    """A directory named like a cell (named, or matched by xlatune_cells) is a usage error, not
    a silent "no tests ran"."""
    named = [Path(arg.split("::")[0]) for arg in config.args]
    globbed = [p for pattern in config.getini("xlatune_cells") for p in config.rootpath.glob(pattern)]
    for path in named + globbed:
        if path.suffix in CELL_SUFFIXES and shareable.strip_controls(str(path)) != str(path):
            # pytest prints node ids as they are: no escape code reaches the terminal that way.
            raise pytest.UsageError(f"{str(path)!r}: expected a cell file name without control characters")
        if path.suffix in CELL_SUFFIXES and path.is_dir():
            raise pytest.UsageError(f"{path}: expected a cell file ({'/'.join(CELL_SUFFIXES)}), "
                                    "found a directory")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix not in CELL_SUFFIXES:
        return None
    config = parent.config
    named = any(Path(arg.split("::")[0]).resolve() == file_path.resolve() for arg in config.args)
    root = config.rootpath
    globbed = any(file_path.resolve() in {p.resolve() for p in root.glob(pattern)}
                  for pattern in config.getini("xlatune_cells"))
    if named or globbed:
        return CellFile.from_parent(parent, path=file_path)
    return None


def pytest_collection_finish(session: pytest.Session) -> None:
    runtime = session.config.stash[RUNTIME_KEY]
    for item in session.items:
        if isinstance(item, CellItem):
            runtime.note_item(item.cell, item.spec)


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = config.stash[RUNTIME_KEY].settings
    return [clean(f"xlatune: store {settings.store_dir}, reports in {settings.report_dir}, "
                  f"poll every {settings.poll_interval:g} s"
                  + (", remeasure" if settings.remeasure else ""), terminal=True)]


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    if report.when != "call":
        return None
    props = dict(report.user_properties)
    if "xlatune_tgs" not in props or props["xlatune_tgs"] is None or not report.passed:
        return None
    text = status_text(props)  # the terminal summary repeats it when a later run changed it
    if props.get("xlatune_numerics"):
        text += " — numerics changed: " + str(props["xlatune_numerics"])
    if props.get("xlatune_shared"):
        text += f" (same effective settings as {props['xlatune_shared']}: shared)"
    if props.get("xlatune_stopped"):
        text += f" ({props['xlatune_stopped']})"
    word = ("REUSED " if props.get("xlatune_reused") else "PASSED ") + text
    markup = {"yellow": True} if props.get("xlatune_numerics") or props.get("xlatune_unstable") \
        else {"green": True}
    return report.outcome, "r" if props.get("xlatune_reused") else ".", (word, markup)


def pytest_sessionfinish(session: pytest.Session) -> None:
    runtime = session.config.stash.get(RUNTIME_KEY, None)
    if runtime is None:
        return
    runtime.close()
    # --collect-only and a session that ran no item write nothing; the report and the lock only
    # for cells whose items ran, each only when its content changes.
    if runtime.settings.write_report and not hasattr(session.config, "workerinput") \
            and not session.config.option.collectonly:
        try:
            runtime.outputs = (runtime.write_reports(runtime.cells_that_ran()) + runtime.write_locks()
                               + after_session(runtime, session))
        except OSError as error:
            runtime.stops.append(f"xlatune: the report could not be written: {error}")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    runtime = config.stash.get(RUNTIME_KEY, None)

    def write(text: str) -> None:
        terminalreporter.write_line(clean(text, terminal=True))

    for message in getattr(runtime, "stops", []):
        terminalreporter.write_sep("=", "xlatune STOP", red=True)
        write(message)
    if needs := getattr(runtime, "needs", {}):
        terminalreporter.write_sep("-", "xlatune: runs the selected items needed (not run)")
        for nodeid, text in needs.items():
            write(f"{nodeid}: {text}")
    for output in getattr(runtime, "outputs", []):
        write(output.line(config.invocation_params.dir))
    for cell, spent in runtime.costs() if runtime is not None else ():
        write(f"xlatune: {cell.path.name}: sweep cost {spent.text()}")
    for cell, line in runtime.adaptive_lines() if runtime is not None else ():
        write(f"xlatune: {cell.path.name}: {line}")
