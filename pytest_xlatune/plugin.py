"""pytest hooks for xlatune: the stateless entry points. Hooks only.

pytest_configure builds the Session (engine/session.py) and registers it as a plugin object: the
hooks that read or write the session's state are its methods (docs/architecture.md says why).
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Protocol, TypeVar

import pytest

from .engine.cellfiles import check_cell_paths, dist_given, is_cell_file, uncollected_hint
from .engine.items import CellFile, CellItem
from .engine.session import Session
from .launch.registry import Backend, LaunchContext, backend_kinds, make_backend
from .options import add_options
from .report.final import teststatus
from .settings import Settings
from .shareable import clean, clean_report

R = TypeVar("R")
Wrapped = Generator[None, R, R]  # a wrapper hook: what the inner hooks returned, passed on


class WorkerNode(Protocol):
    """What pytest_configure_node reads of xdist's WorkerController."""

    workerinput: dict[str, object]
    config: pytest.Config


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(trylast=True)
def pytest_xlatune_make_launcher(context: LaunchContext) -> Backend:
    """The built-in backends, after every plugin's."""
    return make_backend(context)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)
    parser.addini(
        "xlatune_cells",
        "glob patterns (relative to rootdir) of cell files collected "
        "without naming them (default: cells/*.yml cells/*.yaml)",
        type="linelist",
        default=["cells/*.yml", "cells/*.yaml"],
    )


def pytest_cmdline_main(config: pytest.Config) -> None:
    """`-n N` without `--dist`: xdist's default `load` would split a cell's items between workers
    (the second one refused by the store's lock); keep each cell's slot on one worker instead, as
    `--dist loadgroup` does. An explicit `--dist` is left as given."""
    if getattr(config.option, "dist", "no") == "load" and not dist_given(config):
        config.option.dist = "loadgroup"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: WorkerNode) -> None:
    """xdist workers parse the command line again (`-n 2` alone reads as no loadgroup there):
    tell them the controller schedules by group, so cell items carry their group suffix."""
    node.workerinput["xlatune_loadgroup"] = node.config.getvalue("dist") == "loadgroup"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "xlatune: an item of an XLA tuning cell")
    kinds = backend_kinds(p for added in config.hook.pytest_xlatune_backend_kinds() for p in added)
    settings = Settings.from_config(config)
    settings.hang_settings(), settings.base_playbook()  # bad values fail now, as usage errors
    settings.check_store()
    settings.check_outputs()
    check_cell_paths(config)
    Session.start(config, settings, kinds)  # registers it: the hooks that need state are its methods


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after every other plugin's wrapper
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Wrapped[pytest.TestReport]:
    """What a cell item reports reaches the terminal, junit.xml, pytest-html and xdist: clean it."""
    report = yield
    if isinstance(item, CellItem):
        clean_report(report)
    return report


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Wrapped[pytest.CollectReport]:
    report = yield
    if isinstance(collector, CellFile):
        clean_report(report)
    return report


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    return CellFile.from_parent(parent, path=file_path) if is_cell_file(file_path, parent.config) else None


def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
    return teststatus(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    """`pytest mycells/` collects nothing when the cells are not named: say how to name them."""
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and (hint := uncollected_hint(config)):
        terminalreporter.write_line(clean(hint, terminal=True))
