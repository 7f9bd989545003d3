"""pytest hooks for xlatune: options, cell collection, per-item status, reports. Hooks only."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from .cell.load import CellError, load_cell
from .engine.items import CellFile, CellItem
from .engine.session import RUNTIME_KEY, Runtime
from .settings import Settings, add_options
from .engine.stopsignals import StopSignals
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
    _check_cell_paths(config)

    def write(text: str, always: bool) -> None:
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if terminal is None or (config.option.verbose <= 0 and not always):
            return
        # Written while the item runs, so step around output capturing.
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            terminal.write_line(f"  [xlatune] {text}")

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
    _STOP_SIGNALS.install()
    if config.pluginmanager.hasplugin("html"):
        from .report import html as htmlreport

        config.pluginmanager.register(htmlreport, "xlatune-html")


_STOP_SIGNALS = StopSignals()


def pytest_unconfigure(config: pytest.Config) -> None:
    _STOP_SIGNALS.restore()
    unregister_kinds()


class CellsSeen:
    """Under xdist the controller collects nothing: it learns the cells from workers' reports,
    so it can write each cell's report once, at the end."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        cell_path = props.get("xlatune_cell")
        if not cell_path:
            return
        if Path(cell_path) not in self.runtime.cells:
            try:
                self.runtime.note_cell(load_cell(Path(cell_path)))
            except CellError:
                return  # already reported by the worker that collected it
        if self.runtime.settings.gate:
            self.runtime.note_gate(Path(str(cell_path)), report)
        if report.when == "call":
            self.runtime.note_ran(Path(cell_path), props["xlatune_item"])
            if props.get("xlatune_sweep_stop"):  # from a worker too: the controller writes the lock
                self.runtime.note_stopped(Path(cell_path))
            if props.get("xlatune_needs"):
                self.runtime.needs[report.nodeid] = props["xlatune_needs"]


def _check_cell_paths(config: pytest.Config) -> None:
    """A directory named like a cell (named, or matched by xlatune_cells) is a usage error, not
    a silent "no tests ran"."""
    named = [Path(arg.split("::")[0]) for arg in config.args]
    globbed = [p for pattern in config.getini("xlatune_cells") for p in config.rootpath.glob(pattern)]
    for path in named + globbed:
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
    return [f"xlatune: store {settings.store_dir}, reports in {settings.report_dir}, "
            f"poll every {settings.poll_interval:g} s"
            + (", remeasure" if settings.remeasure else "")]


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    if report.when != "call":
        return None
    props = dict(report.user_properties)
    if "xlatune_tgs" not in props or props["xlatune_tgs"] is None or not report.passed:
        return None
    delta, interval = props.get("xlatune_delta_pct"), props.get("xlatune_delta_ci")
    text = f"{props['xlatune_tgs']:.1f} TGS"
    if delta is not None:
        text += f" {delta:+.2f} %"
    elif props.get("xlatune_needs"):
        text += " (no baseline: see the end)"
    if interval:
        text += f" [{interval[0]:+.1f}, {interval[1]:+.1f}] " + str(props.get('xlatune_direction', '')).replace('_', ' ')
    if props.get("xlatune_numerics"):
        text += " — numerics changed: " + str(props["xlatune_numerics"])
    if props.get("xlatune_shared"):
        text += f" (same effective settings as {props['xlatune_shared']}: shared)"
    if props.get("xlatune_stopped"):
        text += f" ({props['xlatune_stopped']})"
    word = ("REUSED " if props.get("xlatune_reused") else "PASSED ") + text
    markup = {"yellow": True} if props.get("xlatune_numerics") else {"green": True}
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
            runtime.outputs = runtime.write_reports(runtime.cells_that_ran()) + runtime.write_locks()
        except OSError as error:
            runtime.stops.append(f"xlatune: the report could not be written: {error}")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    runtime = config.stash.get(RUNTIME_KEY, None)
    for message in getattr(runtime, "stops", []):
        terminalreporter.write_sep("=", "xlatune STOP", red=True)
        terminalreporter.write_line(message)
    if needs := getattr(runtime, "needs", {}):
        terminalreporter.write_sep("-", "xlatune: runs the selected items needed (not run)")
        for nodeid, text in needs.items():
            terminalreporter.write_line(f"{nodeid}: {text}")
    for output in getattr(runtime, "outputs", []):
        terminalreporter.write_line(output.line(config.invocation_params.dir))
    for cell, spent in runtime.costs() if runtime is not None else ():
        terminalreporter.write_line(f"xlatune: {cell.path.name}: sweep cost {spent.text()}")
    for cell, line in runtime.adaptive_lines() if runtime is not None else ():
        terminalreporter.write_line(f"xlatune: {cell.path.name}: {line}")
