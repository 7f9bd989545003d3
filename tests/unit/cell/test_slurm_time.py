"""One Slurm --time grammar (cell.grammar.SLURM_TIME) for the cell loader, sbatch argv and submit.sh argv."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_xlatune.cell.grammar import SLURM_TIME
from pytest_xlatune.cell.load import CellError, load_cell
from pytest_xlatune.launch.maxtext.submit import submit_argv
from pytest_xlatune.slurm import commands

# man sbatch: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
# "days-hours:minutes", "days-hours:minutes:seconds".
DOCUMENTED = ["45", "45:00", "90:30", "01:30:00", "100:00:00", "2-12", "2-12:30", "2-12:30:15", "0"]
REFUSED = [
    "",
    "45 minutes",
    "1:5",
    "1:60",
    "1:00:60",
    "1-",
    "-5",
    "1-2-3",
    "1:00:00:00",
    "2-123",
    "UNLIMITED",
    "infinite",
    "45:00\n",
    "1h",
]


@pytest.mark.parametrize("text", DOCUMENTED)
def test_every_documented_form_is_accepted_everywhere(text: str, tmp_path: Path) -> None:
    assert SLURM_TIME.matches(text)
    cell = tmp_path / "c.yml"
    cell.write_text(f"model_tag: demo\nnodes: 1\nparallelism: FSDP=8\nbackend:\n  kind: sbatch\n  time: '{text}'\n")
    assert load_cell(cell).backend.option("time") == text
    assert f"--time={text}" in commands.sbatch(wrap="true", time_limit=text)
    assert f"--time={text}" in submit_argv("demo", "p", 1, None, text, None, [], False, arm="p")


@pytest.mark.parametrize("text", REFUSED)
def test_other_text_is_refused_everywhere(text: str, tmp_path: Path) -> None:
    assert not SLURM_TIME.matches(text)
    cell = tmp_path / "c.yml"
    cell.write_text(
        f"model_tag: demo\nnodes: 1\nparallelism: FSDP=8\nbackend:\n  kind: sbatch\n  time: {json.dumps(text)}\n"
    )  # a JSON string is a YAML double-quoted one
    with pytest.raises(CellError, match=re.escape("backend.time: expected a Slurm time limit HH:MM:SS, MM:SS or")):
        load_cell(cell)
    with pytest.raises(ValueError, match="invalid time limit"):
        commands.sbatch(wrap="true", time_limit=text)
    with pytest.raises(ValueError, match="a Slurm time limit"):
        submit_argv("demo", "p", 1, None, text, None, [], False, arm="p")


def test_an_unquoted_minutes_seconds_keeps_the_text_as_written(tmp_path: Path) -> None:
    """YAML 1.1 reads unquoted 45:00 as the base-60 integer 2700; the loader keeps '45:00'."""
    cell = tmp_path / "c.yml"
    cell.write_text("model_tag: demo\nnodes: 1\nparallelism: FSDP=8\nbackend:\n  kind: sbatch\n  time: 45:00\n")
    assert load_cell(cell).backend.option("time") == "45:00"
