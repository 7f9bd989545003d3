"""Something other than a file where the session reads or replaces one of its outputs: a FIFO
(which an open for reading would wait on forever), a directory, bytes that are no UTF-8. Each is
one line naming the path; the session ends, and the other outputs are written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cells import cell_yaml
from tests.conftest import FIXED

CELL = cell_yaml("hf", ("a", "--xla_fake_tgs=1100"))


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("cells/hf.yml", *FIXED, *args, timeout=120)


@pytest.fixture
def cell(pytester: pytest.Pytester, fake_trainer_env: None) -> Path:
    path = pytester.mkdir("cells") / "hf.yml"
    path.write_text(CELL)
    return path


@pytest.mark.parametrize("planted", ["fifo", "directory", "not_utf8"])
def test_a_report_path_that_holds_no_text_file_is_one_line_and_the_lock_and_history_are_written(
    pytester: pytest.Pytester, cell: Path, planted: str
) -> None:
    report = pytester.path / "hf-tuning.md"
    if planted == "fifo":
        os.mkfifo(report)
    elif planted == "directory":
        report.mkdir()
    else:
        report.write_bytes(b"# hf\n\xff\xfe\n")
    result = _run(pytester)
    result.assert_outcomes(passed=4)
    found = {
        "fifo": ": expected a regular file, found a FIFO (named pipe)",
        "directory": ": expected a regular file, found a directory",
        "not_utf8": ":2: expected UTF-8 text, found byte 0xff",
    }[planted]
    result.stdout.fnmatch_lines([f"xlatune: the report could not be written: {report}{found}*; move it away"])
    result.stdout.fnmatch_lines(["xlatune: recipe lock written to cells/hf.lock.json*", "xlatune: history written to*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert (cell.parent / "hf.lock.json").is_file()
