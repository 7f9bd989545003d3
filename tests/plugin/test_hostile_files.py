"""Something other than a file where the session reads or replaces one of its outputs: a FIFO
(which an open for reading would wait on forever), a directory, bytes that are no UTF-8. Each is
one line naming the path; the session ends, and the other outputs are written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cells import cell_yaml
from tests.conftest import FAKE

# Adaptive: the win `a` is locked once a control ran after its first run (before `b`).
CELL = cell_yaml("hf", ("a", "--xla_fake_tgs=1100"), ("b", "--xla_fake_tgs=900"))


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("cells/hf.yml", *FAKE, *args, timeout=120)


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
    result.assert_outcomes(passed=5)
    found = {
        "fifo": ": expected a regular file, found a FIFO (named pipe)",
        "directory": ": expected a regular file, found a directory",
        "not_utf8": ":2: expected UTF-8 text, found byte 0xff",
    }[planted]
    result.stdout.fnmatch_lines([f"xlatune: the report could not be written: {report}{found}*; move it away"])
    result.stdout.fnmatch_lines(["xlatune: recipe lock written to cells/hf.lock.json*", "xlatune: history written to*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert (cell.parent / "hf.lock.json").is_file()


@pytest.mark.parametrize("planted", ["fifo", "directory"])
def test_a_lock_path_that_holds_no_file(pytester: pytest.Pytester, cell: Path, planted: str) -> None:
    lock = cell.parent / "hf.lock.json"
    if planted == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    result = _run(pytester)
    result.assert_outcomes(passed=5)
    if planted == "fifo":  # unreadable, so the whole sweep replaces it
        result.stdout.fnmatch_lines(["xlatune: recipe lock written to cells/hf.lock.json*"])
        assert lock.is_file()
    else:
        result.stdout.fnmatch_lines(
            [
                f"xlatune: the recipe lock could not be written: {lock}: expected a file it can replace, "
                "found a directory; move it away"
            ]
        )
    result.stdout.fnmatch_lines(["xlatune: tuning report written to hf-tuning.md"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not [p for p in cell.parent.iterdir() if p.name.startswith(".hf.lock.json.")]  # no temp file left


def test_a_gate_against_a_fifo_lock_is_one_line(pytester: pytest.Pytester, cell: Path) -> None:
    os.mkfifo(cell.parent / "hf.lock.json")
    result = _run(pytester, "--xlatune-gate")
    result.stdout.fnmatch_lines(["*hf.lock.json: expected a recipe lock file, found a FIFO (named pipe); move it away"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_gate_against_a_hand_edited_lock_is_one_line_naming_the_key(pytester: pytest.Pytester, cell: Path) -> None:
    # The sweep writes a lock; an image that is a list, not a string, was a traceback at the end
    # of the gate (every item failed first).
    _run(pytester).assert_outcomes(passed=5)
    lock = cell.parent / "hf.lock.json"
    lock.write_text(lock.read_text().replace('"image": ""', '"image": ["a"]'))
    result = _run(pytester, "--xlatune-gate")
    result.stdout.fnmatch_lines(["*hf.lock.json: image: expected a string, found a list"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_junit_and_html_through_a_symbolic_link_are_not_rewritten_by_us(
    pytester: pytest.Pytester, cell: Path, tmp_path: Path
) -> None:
    # pytest writes its files through a link; the final-figure rewrite wrote through it again.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for name in ("junit.xml", "report.html"):
        (outside / name).write_text("")
        (pytester.path / name).symlink_to(outside / name)
    result = pytester.runpytest("cells/hf.yml", *FAKE, "--junitxml=junit.xml", "--html=report.html")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            f"xlatune: {name} is a symbolic link: its final figures are not written*"
            for name in ("junit.xml", "report.html")
        ]
    )
    # a's line printed its first run; the rewrite would have given it its profiled re-run too.
    junit = (outside / "junit.xml").read_text()
    profile = junit.split('name="a[default]"', 1)[1].split("</testcase>", 1)[0]
    assert "mean of" not in profile and "xlatune_runs" in profile
    assert (pytester.path / "junit.xml").is_symlink() and (pytester.path / "report.html").is_symlink()
