"""What a pytest session configures belongs to it: backend kinds and the masker are the
Session's values, not module-level registries another session inherits or clears."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

import pytest_xlatune
from pytest_xlatune import shareable
from pytest_xlatune.cell.load import CellError, load_cell
from pytest_xlatune.engine.session import Session
from pytest_xlatune.launch.registry import BackendPlugin, backend_kinds, checks, make_backend
from pytest_xlatune.settings import Settings

CELL = "model_tag: m\nnodes: 1\nparallelism: FSDP=8\npdbs: 2\nbackend:\n  kind: recorded\n  site: lab\n"
PLUGIN = BackendPlugin("recorded", make_backend, lambda key, value: None if key == "site" else "site only")


def test_a_plugin_kind_is_known_only_to_the_loader_it_is_given_to(tmp_path: Path) -> None:
    path = tmp_path / "c.yml"
    path.write_text(CELL)
    kinds = backend_kinds([PLUGIN])
    assert load_cell(path, checks(kinds)).backend.option("site") == "lab"
    with pytest.raises(
        CellError, match=r"backend\.kind.*expected one of local, maxtext-slurm, sbatch, found 'recorded'"
    ):
        load_cell(path)  # another session (no plugin) never sees it


def test_a_plugin_cannot_take_a_built_in_kind_name() -> None:
    with pytest.raises(ValueError, match="backend kind 'sbatch' is built in"):
        backend_kinds([BackendPlugin("sbatch", make_backend)])


def test_a_session_inside_another_puts_the_outer_masker_back() -> None:
    outer = shareable.configure([re.compile("outer-[0-9]+")])
    try:
        inner = shareable.configure([re.compile("inner-[0-9]+")])
        assert shareable.clean("inner-1 outer-2") == f"{shareable.MASK} outer-2"
        shareable.reset(inner)
        assert shareable.clean("inner-1 outer-2") == f"inner-1 {shareable.MASK}"
    finally:
        shareable.reset(outer)


def test_the_session_owns_the_stateful_hooks_and_plugin_py_stays_thin(tmp_path: Path) -> None:
    settings = Settings(
        store_dir=tmp_path / "store",
        report_dir=tmp_path,
        write_report=False,
        remeasure=False,
        poll_interval=1.0,
        python=sys.executable,
    )
    session = Session(settings, tmp_path, report=lambda text: None)
    for hook in (
        "pytest_runtest_logreport",
        "pytest_collection_finish",
        "pytest_sessionfinish",
        "pytest_terminal_summary",
        "pytest_report_header",
        "pytest_unconfigure",
    ):
        assert callable(getattr(session, hook))
    plugin = Path(pytest_xlatune.__file__).parent / "plugin.py"
    assert len(plugin.read_text().splitlines()) <= 120
    hooks = [node.name for node in ast.parse(plugin.read_text()).body if isinstance(node, ast.FunctionDef)]
    assert all(name.startswith("pytest_") for name in hooks), hooks
