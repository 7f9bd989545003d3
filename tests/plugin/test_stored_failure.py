"""A failure reused from the store says so (job, age, how to rerun); --lf runs its job again."""

from __future__ import annotations

import stat
import sys

import pytest

from pytest_xlatune.engine.items import stored_failure_line
from pytest_xlatune.results import JobResult, Verdict
from tests.cells import cell_yaml

CELL = cell_yaml("lf", ("a", "--xla_fake_tgs=1100"), ("b", "--xla_fake_tgs=900"))
# The "cause": while `broken` exists, profile b's job crashes at once (same key: the interpreter
# is not part of a run's identity, its image is).
WRAPPER = """#!/bin/bash
case "$XLA_FLAGS" in *--xla_fake_tgs=900*) [ -e {marker} ] && {{ echo "Segmentation fault"; exit 139; }};; esac
exec {python} "$@"
"""
ARGS = ["--xlatune-workload=fake_trainer", "--xlatune-poll-interval=0.05", "--xlatune-fixed-protocol"]


def test_a_stored_failure_says_so_and_lf_runs_its_job_again(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    marker = pytester.path / "broken"
    marker.touch()
    wrapper = pytester.path / "python"
    wrapper.write_text(WRAPPER.format(marker=marker, python=sys.executable))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    pytester.makefile(".yml", lf=CELL)
    args = [*ARGS, f"--xlatune-python={wrapper}"]
    first = pytester.runpytest("lf.yml", *args)
    first.assert_outcomes(passed=4, failed=1)
    assert "stored failure" not in first.stdout.str()
    again = pytester.runpytest("lf.yml", *args)  # the store answers: nothing runs again
    again.assert_outcomes(passed=4, failed=1)
    again.stdout.fnmatch_lines(
        [
            "stored failure (job *, * ago, from an earlier session; not run again): run "
            "its job again with pytest --lf, or pytest 'lf.yml::wave2::b[[]default[]]' "
            "--xlatune-remeasure"
        ]
    )
    marker.unlink()  # the cause is fixed
    fixed = pytester.runpytest("lf.yml", "--lf", *args)
    fixed.assert_outcomes(passed=1, deselected=4)
    assert "stored failure" not in fixed.stdout.str()


@pytest.mark.parametrize(("seconds", "shown"), [(5, "5 s"), (600, "10 min"), (7200, "2 h"), (3 * 86400, "3 d")])
def test_stored_failure_line_names_job_and_age(seconds: float, shown: str) -> None:
    result = JobResult(
        key="k",
        item="wave2::b[default]",
        wave="wave2",
        profile="b",
        config_tag="default",
        kind="profile",
        job_id="42",
        verdict=Verdict.PYTHON_EXCEPTION,
        ended_at=1000.0,
    )
    line = stored_failure_line(result, "c.yml::wave2::b[default]", 1000.0 + seconds)
    assert line.startswith(f"stored failure (job 42, {shown} ago, from an earlier session; not run again)")
