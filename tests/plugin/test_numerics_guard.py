"""The numerics guard through pytest: a faster run whose loss drifts is marked, never the recipe
or the lock, unless --xlatune-numerics=warn; the option is checked at parse time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FAKE

CELL = """\
model_tag: num
nodes: 1
parallelism: FSDP=8
steps: 10
# Steps slow enough that the guard looks while the run still trains, however busy the machine.
overrides: {fake_step_sleep: 0.1}
waves:
  2:
    - name: drifts
      xla_flags: [--xla_fake_tgs=1300, --xla_fake_loss_drift=0.01]
    - name: fast
      xla_flags: [--xla_fake_tgs=1200]
"""


@pytest.fixture
def cell(pytester: pytest.Pytester, fake_trainer_env: None) -> Path:
    return pytester.makefile(".yml", num=CELL)


def test_a_faster_run_whose_loss_drifts_is_marked_and_never_the_recipe(pytester: pytest.Pytester, cell: Path) -> None:
    result = pytester.runpytest(str(cell), "-v", *FAKE)
    result.assert_outcomes(passed=6)  # baseline ×2, evidence, drifts, fast, evidence2::winner
    result.stdout.fnmatch_lines(
        [
            "*wave2::drifts[[]default[]] PASSED 130[01].* — numerics changed: loss left the baseline's at "
            "step 1: 4.91 vs 4.9, baseline job 1*",
        ]
    )
    fast_line = next(line for line in result.stdout.lines if "wave2::fast[" in line and "PASSED" in line)
    assert "numerics" not in fast_line
    # The adaptive sweep spends nothing more on it: stopped once its steady state is known, no
    # confirming run (the +30 % would earn one), and the confirmation goes to the recipe instead.
    result.stdout.fnmatch_lines(
        [
            "*wave2::drifts*PASSED*(stopped early: numerics changed: it cannot be the recipe)*",
            "*wave2::fast[[]default[]]: run 2: confirming a win*",
        ]
    )
    assert not [line for line in result.stdout.lines if "wave2::drifts[default]: run 2" in line]
    lock = json.loads((pytester.path / "num.lock.json").read_text())
    assert [r["profile"] for r in lock["recipes"]] == ["fast"]
    report = (pytester.path / "num-tuning.md").read_text()
    assert "**`fast`** ⭐" in report and "**Numerics changed:** `drifts`" in report
    assert "`--xlatune-numerics=fail`: a run whose loss left the baseline's is never the recipe" in report


def test_warn_mode_marks_the_run_and_lets_it_win(pytester: pytest.Pytester, cell: Path) -> None:
    pytester.makeini("[pytest]\nxlatune_numerics = warn\n")
    result = pytester.runpytest(str(cell), "-v", *FAKE)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*wave2::drifts[[]default[]] PASSED 1300.* — numerics changed: *"])
    assert not [line for line in result.stdout.lines if "stopping early: numerics changed" in line]
    lock = json.loads((pytester.path / "num.lock.json").read_text())
    assert [r["profile"] for r in lock["recipes"]] == ["drifts"]
    report = (pytester.path / "num-tuning.md").read_text()
    assert "**`drifts`** ⭐" in report and "**Its loss left the baseline's**" in report
    assert "`--xlatune-numerics=warn`: **a run whose loss left the baseline's may still be the recipe**" in report


def test_a_bad_numerics_mode_is_a_usage_error(pytester: pytest.Pytester, cell: Path) -> None:
    result = pytester.runpytest(str(cell), "--xlatune-numerics=maybe", *FAKE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--xlatune-numerics*expected fail or warn, found 'maybe'*"])
