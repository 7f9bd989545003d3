"""Backend keys a cell accepts do something: `local.python` picks the interpreter, no `sbatch.template`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_xlatune.cell.load import CellError, load_cell
from pytest_xlatune.settings import Settings

HEAD = "model_tag: m\nnodes: 1\nparallelism: FSDP=8\npdbs: 2\n"


def settings(tmp_path: Path, python: str = sys.executable, image: str = "") -> Settings:
    return Settings(
        store_dir=tmp_path / "store",
        report_dir=tmp_path,
        write_report=False,
        remeasure=False,
        poll_interval=1.0,
        python=python,
        image=image,
    )


def cell(tmp_path: Path, backend: str) -> Path:
    path = tmp_path / "c.yml"
    path.write_text(HEAD + backend)
    return path


def test_local_python_is_the_interpreter_of_the_cells_jobs(tmp_path: Path) -> None:
    c = load_cell(cell(tmp_path, "backend:\n  kind: local\n  python: venv/bin/python\n"))
    assert settings(tmp_path).for_cell(c).python == str(tmp_path / "venv" / "bin" / "python")
    assert settings(tmp_path, python="/opt/py/bin/python").for_cell(c).python == "/opt/py/bin/python"
    assert settings(tmp_path, image="/images/py").for_cell(c).python == "/images/py"


def test_without_local_python_the_option_decides(tmp_path: Path) -> None:
    c = load_cell(cell(tmp_path, "backend:\n  kind: local\n"))
    assert settings(tmp_path).for_cell(c).python == sys.executable


def test_sbatch_template_is_refused_not_ignored(tmp_path: Path) -> None:
    with pytest.raises(
        CellError,
        match=r"backend\.template.*an option of backend kind sbatch: "
        r"command, time, partition.*unknown option 'template'",
    ):
        load_cell(cell(tmp_path, "backend:\n  kind: sbatch\n  template: job.j2\n"))
