"""Evidence-driven waves through pytest: catalog order and skips, the stack, the winner's evidence
run, and the report's baseline ↔ winner diff. The fake trainer writes recorded real artifacts
(tests/fake_evidence_trainer.py), so the diff is the real CPU one: all-reduce 2 → 11 ops."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from tests.conftest import FAKE as FAKE_ADAPTIVE
from tests.conftest import (
    FIXED as FAKE,  # stacks need every winner measured (an adaptive sweep stops at the first confirmed win)
)

EVIDENCE_FAKE = [arg.replace("fake_trainer", "fake_evidence_trainer") for arg in FAKE]

CELL = """\
model_tag: ev
nodes: 1
parallelism: FSDP=8
config_tags:
  default: {}
waves:
  2:
    - name: ar_off
      xla_flags: [--xla_fake_tgs=1100, --xla_disable_hlo_passes=cpu-all-reduce-combiner]
    - name: other                 # 1000 × 1.08 through the fake's penalty knob, not fake_tgs
      xla_flags: [--xla_fake_other=1]
      overrides: {fake_penalize: --xla_fake_other, fake_penalty: 1.08}
    - name: slow
      xla_flags: [--xla_fake_slow=1, --xla_fake_tgs=900]
  3: {stack: 2}
"""


@pytest.fixture
def cell(pytester: pytest.Pytester, fake_trainer_env: None) -> Path:
    return pytester.makefile(".yml", ev=CELL)


def test_stack_and_winner_evidence_run_and_the_report_explains_the_winner(
    pytester: pytest.Pytester, cell: Path
) -> None:
    result = pytester.runpytest(str(cell), "-v", *EVIDENCE_FAKE)
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(
        [
            "*wave3::stack_top2[[]default[]] PASSED 1188.* TGS*",  # 1100 × 1.08: both flags
            "*evidence2::winner[[]default[]] PASSED 1188.* TGS*",
        ]
    )
    store = pytester.path / ".xlatune"
    stack_log = next(store.rglob("*-ev-stack_top2-default.log")).read_text()
    assert "--xla_fake_tgs=1100 --xla_disable_hlo_passes=cpu-all-reduce-combiner --xla_fake_other=1" in stack_log
    assert "fake_penalty=1.08" in stack_log
    winner_log = next(store.rglob("*-ev-winner-default.log")).read_text()  # the stack, re-run
    assert "--xla_disable_hlo_passes=cpu-all-reduce-combiner --xla_fake_other=1" in winner_log
    assert "--xla_dump_to=" in winner_log

    report = (pytester.path / "ev-tuning.md").read_text()
    why = report.split("## Why the winning flag wins")[1].split("## Negative findings")[0]
    assert re.search(r"`stack_top2` \(jobs? [0-9]", why)  # the winner: both flags
    jobs = re.search(r"Evidence: baseline job (\d+) against job (\d+) \(`stack_top2`", why)
    assert jobs, why
    base_job, winner_job = jobs.groups()
    assert "- all-reduce: 2 ops of 640.8 KiB → 11 ops of 116.5 KiB; in loop 1 of 2 → 8 of 11" in why
    assert f"jobs/{winner_job}-ev-winner-default/xla_dump/module_0042.jit_train_step" in why
    assert re.search(r"\| step \| [\d.,]+ \| [\d.,]+ \| [-+][\d.,]+ \|", why)
    evidence = report.split("## Evidence (Wave 1.5)")[1].split("## Why")[0]
    assert f"### Baseline evidence: job {base_job}" in evidence
    assert f"### Winner evidence: job {winner_job}" in evidence
    assert "| all-reduce | 11 | 11 | 0 | 8 | 1.3 MiB | 512.0 KiB |" in evidence
    assert re.search(
        r"\| stack_top2 ⭐ \| `--xla_fake_tgs=1100 --xla_disable_hlo_passes=cpu-all-reduce-combiner "
        r"--xla_fake_other=1` \| 1,188\.\d",
        report,
    )


def test_stack_skips_with_a_reason_when_only_one_flag_won(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    cell = pytester.makefile(".yml", ev=CELL.replace("fake_penalty: 1.08", "fake_penalty: 0.999"))
    result = pytester.runpytest(str(cell), "-rs", *EVIDENCE_FAKE)
    result.assert_outcomes(passed=7, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*fewer than 2 winning profiles (better than baseline-deployed "
            "beyond noise, with distinct settings) in waves 2-3 to stack: ar_off*"
        ]
    )


CATALOG_CELL = """\
model_tag: cat
nodes: 1
parallelism: FSDP=8
baseline_repeats: 1
waves:
  2: {catalog: pp, max: 3}
"""


def test_catalog_candidates_follow_the_evidence_and_irrelevant_ones_skip(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(".yml", cat=CATALOG_CELL)
    before = pytester.runpytest(str(cell), "--collect-only", "-q", *EVIDENCE_FAKE)
    before.stdout.fnmatch_lines(["*wave1.5::evidence*", "*wave2::cp_decomp_256m*"])  # catalog order
    result = pytester.runpytest(str(cell), "-v", "-rs", *EVIDENCE_FAKE)
    # Evidence (FSDP HLO: all-gather, all-reduce, all-to-all) decides at run time: 3 run.
    result.assert_outcomes(passed=2 + 3 + 1, skipped=22 - 3)
    for line in (
        "*wave2::pipelined_ag[[]default[]] PASSED*",
        "*wave2::pipelined_ar[[]default[]] PASSED*",
        "*wave2::overlap_2[[]default[]] PASSED*",
        "*mechanism-irrelevant: acts on collective-permute, and the evidence HLO (job 2) has no collective-permute*",
        "*beyond max 3 of catalog pp (ordered by the evidence of job 2)*",
    ):
        result.stdout.fnmatch_lines([line])
    # The next session collects in the order the stored evidence gives.
    again = pytester.runpytest(str(cell), "--collect-only", "-q", *EVIDENCE_FAKE)
    lines = [line for line in again.stdout.lines if "::wave2::" in line]
    assert [line.split("::")[-1] for line in lines[:3]] == [
        "pipelined_ag[default]",
        "pipelined_ar[default]",
        "overlap_2[default]",
    ]
    assert lines[-1].endswith("pipelined_rs[default]")  # skipped ones last


ORDER_CELL = """\
model_tag: ord
nodes: 1
parallelism: FSDP=8
waves:
  2:
    - name: p2p                   # collective-permute: the FSDP evidence HLO has none
      xla_flags: [--xla_gpu_enable_pipelined_p2p=true]
    - name: fastmath              # compute: the recorded profile shows less compute than collective time
      xla_flags: [--xla_cpu_enable_fast_math=true]
    - name: plain                 # no known mechanism: the evidence says nothing of it
      xla_flags: [--xla_fake_plain=1]
    - name: ag                    # all-gather: the collective with the most bytes, and the winner
      xla_flags: [--xla_gpu_all_gather_combine_threshold_bytes=536870912, --xla_fake_tgs=1100]
"""


def test_the_adaptive_sweep_orders_by_its_own_evidence_run_within_the_session(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(".yml", ord=ORDER_CELL)
    adaptive = [arg.replace("fake_trainer", "fake_evidence_trainer") for arg in FAKE_ADAPTIVE]
    result = pytester.runpytest(str(cell), "-v", "-rs", "--html=report.html", "--self-contained-html", *adaptive)
    out = result.stdout.str()
    # Listed last, the all-gather candidate runs first, inside the first candidate's item, as
    # soon as the evidence run (job 3: after the wave-1 pair) says what leads the step.
    result.stdout.fnmatch_lines(
        [
            "*wave2::ag[[]default[]]: run ahead of wave2::p2p[[]default[]]: next candidate by expected gain: "
            "+0.25 % (evidence: acts on all-gather, the collective with the most bytes in the evidence HLO "
            "(job 3) (place 1) → +0.25)*"
        ]
    )
    # Its confirmed win ends the search before any other candidate ran.
    result.assert_outcomes(passed=5, skipped=3)
    assert "run ahead" not in out.replace("wave2::ag[default]: run ahead", "")
    assert out.count("not run: the adaptive sweep concluded: confirmed win: wave2::ag[default]") == 3
    # The summary and the HTML report say the order and why (the store's `order` record).
    line = (
        "candidates in planned order wave2::ag[default], wave2::fastmath[default], wave2::plain[default], "
        "wave2::p2p[default]; ahead of list order: wave2::ag[default] +0.25 % (evidence: acts on all-gather, "
        "the collective with the most bytes in the evidence HLO (job 3) (place 1) → +0.25)"
    )
    assert out.count(f"xlatune: ord.yml: {line}") == 1
    assert f"Adaptive sweep: {html.escape(line)}" in (pytester.path / "report.html").read_text()
    assert line.replace("[default]", "\\[default\\]") in (pytester.path / "ord-tuning.md").read_text()
    # The next session's collection shows the order the stored evidence gives, and why.
    again = pytester.runpytest(str(cell), "--collect-only", "-q", *adaptive)
    again.stdout.fnmatch_lines(
        [
            "xlatune: ord.yml: candidates in planned order wave2::ag[[]default[]], wave2::fastmath[[]default[]], "
            "wave2::plain[[]default[]], wave2::p2p[[]default[]]; ahead of list order: wave2::ag[[]default[]] "
            "+0.25 % (evidence: acts on all-gather, *"
        ]
    )
