"""--xlatune-gate-repair with the fake trainer: the gate fails on a new image, the same session
re-tunes (the previous sweep's top candidates) and proposes a lock that then passes the gate."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from tests.conftest import FAKE
from tests.plugin.test_gate import image

CELL = """\
model_tag: fixable
nodes: 1
parallelism: FSDP=8
waves:
  2:
    - {name: fast, xla_flags: [--xla_fake_tgs=1100]}
    - {name: alt, xla_flags: [--xla_fake_tgs=1060]}
    - {name: slow, xla_flags: [--xla_fake_tgs=900]}
"""
# The new image: the locked recipe slows to 1030, `alt` speeds up to 1200.
NEW = """case "$XLA_FLAGS" in *--xla_fake_tgs=1100*) export XLA_FLAGS="$XLA_FLAGS --xla_fake_tgs=1030";;
  *--xla_fake_tgs=1060*) export XLA_FLAGS="$XLA_FLAGS --xla_fake_tgs=1200";; esac"""


def test_repair_proposes_a_lock_that_passes_the_gate(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    cell = pytester.makefile(".yml", fixable=CELL)
    pytester.runpytest(str(cell), *FAKE).assert_outcomes(passed=7)
    lock = cell.with_suffix(".lock.json")
    assert json.loads(lock.read_text())["recipes"][0]["profile"] == "fast"
    new = image(pytester.path, "new-python", NEW)
    same = image(pytester.path, "same-python", "")
    passed = pytester.runpytest(str(cell), "--xlatune-gate", "--xlatune-gate-repair", f"--xlatune-image={same}", *FAKE)
    assert passed.ret == 0
    passed.assert_outcomes(passed=6, skipped=4)  # the repair wave: nothing to repair
    assert not cell.with_suffix(".lock.proposed.json").exists()

    result = pytester.runpytest(
        str(cell), "--xlatune-gate", "--xlatune-gate-repair", f"--xlatune-image={new}", "-rs", *FAKE
    )
    assert result.ret == 6, result.stdout.str()  # regressed, repair proposed
    result.stdout.fnmatch_lines(
        [
            "*recipe 'fast' [[]default[]] regressed vs the lock*",
            "*proposed lock written to fixable.lock.proposed.json: regressed, repair proposed*",
        ]
    )
    proposed_file = pytester.path / "fixable.lock.proposed.json"
    proposed = json.loads(proposed_file.read_text())
    assert proposed["recipes"][0]["profile"] == "alt" and proposed["image"] == new
    assert proposed["recipes"][0]["tgs"] == pytest.approx(1200, rel=0.01)
    # The proposed lock's figure is the terminal's: the same runs (the candidate's, the plain
    # confirming run and the HLO-dump run that joined them), the same value.
    [final] = [line for line in result.stdout.lines if line.startswith("fixable.yml::repair::alt[default]: ")]
    shown = final.split("; jobs ")[1].rstrip(")").split(", ")
    assert list(proposed["recipes"][0]["job_ids"]) == shown and len(shown) == 3, final
    assert f"{proposed['recipes'][0]['tgs']:.1f} TGS" in final
    report = (pytester.path / "fixable-gate.md").read_text()
    assert "### Repair" in report and "**regressed, repair proposed** (exit code 6)" in report
    assert "| locked: fast |" in report and "| proposed: alt | --xla_fake_tgs=1060 | 1200." in report
    assert (
        "the winner once more" in report
        and "node-hours on the new image" in report
        and "- `slow` (previous sweep: 900.1 TGS on (default)): 900.1 TGS -10.00 %" in report
    )
    # a candidate's figure, markdown-escaped as every value of that list (it may quote a log)
    assert re.search(r"- `slow` \(previous sweep: .*\): 900\.1 TGS -10\.00 % \\\[[+-][0-9.]+, [+-][0-9.]+\\\]", report)
    assert "Collective inventory" in report

    # Accept the proposal: the gate on the new image passes with it.
    shutil.copy(proposed_file, lock)
    again = pytester.runpytest(str(cell), "--xlatune-gate", f"--xlatune-image={new}", *FAKE)
    assert again.ret == 0, again.stdout.str()
    assert "**Verdict: PASSED" in (pytester.path / "fixable-gate.md").read_text()


def test_no_repair_found_exits_1(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    cell = pytester.makefile(".yml", fixable=CELL)
    pytester.runpytest(str(cell), *FAKE).assert_outcomes(passed=7)
    worse = image(
        pytester.path,
        "worse-python",
        """export XLA_FLAGS="$XLA_FLAGS --xla_fake_tgs=1030"
case "$XLA_FLAGS" in *--xla_fake_tgs=1100*) ;; *) export XLA_FLAGS="$XLA_FLAGS --xla_fake_tgs=1000";; esac""",
    )
    result = pytester.runpytest(str(cell), "--xlatune-gate", "--xlatune-gate-repair", f"--xlatune-image={worse}", *FAKE)
    assert result.ret == 1, result.stdout.str()
    assert not (pytester.path / "fixable.lock.proposed.json").exists()
    assert "**regressed, no repair found** (exit code 1)" in (pytester.path / "fixable-gate.md").read_text()


def test_repair_without_the_gate_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--xlatune-gate-repair")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--xlatune-gate-repair: expected with --xlatune-gate, found it alone*"])


def test_five_gate_runs_across_two_venvs_chart_the_change_point_at_the_switch(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    from pytest_xlatune.report.__main__ import main

    cell = pytester.makefile(".yml", fixable=CELL)
    pytester.runpytest(str(cell), *FAKE).assert_outcomes(passed=7)
    same, new = image(pytester.path, "same-python", ""), image(pytester.path, "new-python", NEW)
    codes = [
        pytester.runpytest(str(cell), "--xlatune-gate", f"--xlatune-image={venv}", *FAKE).ret
        for venv in (same, same, new, new, new)
    ]
    assert codes == [0, 0, 1, 1, 1]
    out = pytester.path / "out"
    assert (
        main([str(cell), "--root", str(pytester.path), "--store", str(pytester.path / ".xlatune"), "--out", str(out)])
        == 0
    )
    history = (out / "fixable-history.md").read_text()
    # The sweep's row, then the five gates: the recipe fell from 1100 to 1030 at the fourth gate run.
    assert "| sweep |" in history and history.count("| gate |") == 5
    assert "- change point before run 4 (" in history and "recipe TGS 1100.1 → 1030.1 (-6.36 %" in history
    chart = (out / "fixable-history-fixable-default.svg").read_text()
    assert chart.count('class="change-point"') == 1
    assert chart.strip() in (out / "fixable-history.html").read_text()  # inline, the same chart
