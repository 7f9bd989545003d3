"""Noisy and adversarial stand-ins of whole sweeps (the fake trainer's scripted load): the
verdicts never claim more than the runs hold, and every output says the same."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.conftest import FIXED

# The baseline pair ran on a loaded machine (jobs 1 and 2 at 0.77 of their speed); the load was
# gone for the baseline's evidence run (job 3) and every no-op profile after it.
LOADED_BASELINE = """\
model_tag: loaded
nodes: 1
parallelism: FSDP=8
baseline_repeats: 2
overrides: {fake_load: "1:0.77,2:0.77"}
waves:
  2:
    - {name: noop_a, xla_flags: [--xla_noop_a=1]}
    - {name: noop_b, xla_flags: [--xla_noop_b=1]}
"""


def test_a_loaded_baseline_pair_its_evidence_run_contradicts_makes_no_noop_a_win(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(".yml", loaded=LOADED_BASELINE)
    result = pytester.runpytest(str(cell), "-v", "--junitxml=junit.xml", *FIXED)
    result.assert_outcomes(passed=6)
    assert not [line for line in result.stdout.lines if " PASSED " in line and " better" in line], result.stdout.str()
    result.stdout.fnmatch_lines(["*wave2::noop_a* PASSED * TGS +29.* within noise*", "*lock*not written*"])
    assert not (pytester.path / "loaded.lock.json").exists()
    report = (pytester.path / "loaded-tuning.md").read_text()
    tldr = report.split("## TL;DR", 1)[1].split("\n## ", 1)[0]
    assert "inconclusive" in tldr and "keep the deployed environment" not in tldr, tldr
    assert "**Identical settings disagree**" in report and "evidence: " in report
    directions = {
        p.get("value")
        for p in ET.parse(pytester.path / "junit.xml").getroot().iter("property")
        if p.get("name") == "xlatune_direction"
    }
    assert "better" not in directions and "within_noise" in directions, directions


def test_a_run_whose_steps_slowed_mid_run_is_no_more_certain_than_its_steps_say(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    # Job 4 (noop_a's run) lost 40 % from step 10 on: a co-tenant for the second half of it.
    cell = pytester.makefile(".yml", tail=LOADED_BASELINE.replace('"1:0.77,2:0.77"', '"4:0.6:10"'))
    result = pytester.runpytest(str(cell), "-v", *FIXED)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*wave2::noop_a* PASSED * TGS -20.* within noise*"])
    assert not [line for line in result.stdout.lines if " PASSED " in line and (" worse" in line or " better" in line)]


def test_a_deterministic_sweep_reads_the_baselines_evidence_run_within_noise(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    # No noise at all: the baseline pair agrees exactly, and the baseline's profiled evidence run
    # (steps 9-14) is 0.01 % off it from which steps it averages. The steps' own error bounds it.
    cell = pytester.makefile(".yml", det=LOADED_BASELINE.replace('overrides: {fake_load: "1:0.77,2:0.77"}\n', ""))
    result = pytester.runpytest(str(cell), "-v", *FIXED)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*wave1.5::evidence* PASSED * TGS -0.01 % * within noise*"])
    assert "unstable" not in result.stdout.str()
    assert "Identical settings disagree" not in (pytester.path / "loaded-tuning.md").read_text()
