"""engine/outcome.py spells an item's `xlatune_*` user properties: exactly the lists the item
built by hand before (recorded from it on these runs), keys, values and order."""

from __future__ import annotations

from pathlib import Path

from pytest_xlatune.engine.outcome import ItemOutcome, Measurement
from pytest_xlatune.plan.expand import RunKind, RunSpec
from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.verdict import figures

SPEC = RunSpec(wave="wave2", profile="p1", config_tag="fsdp", kind=RunKind.PROFILE)
START = ItemOutcome(Path("cells/a.yml"), "wave2::p1[fsdp]")
HEAD = [("xlatune_cell", "cells/a.yml"), ("xlatune_item", "wave2::p1[fsdp]")]


def result(kind: RunKind, job: str, tgs: float | None, verdict: Verdict = Verdict.SUCCESS, **extra: str) -> JobResult:
    baseline = kind is RunKind.BASELINE
    return JobResult(
        key=f"k{job}",
        item="wave2::baseline-deployed[fsdp]" if baseline else "wave2::p1[fsdp]",
        wave="wave2",
        profile="baseline-deployed" if baseline else "p1",
        config_tag="fsdp",
        kind=kind,
        job_id=job,
        verdict=verdict,
        tgs=tgs,
        step_seconds=None if tgs is None else 2.0,
        tgs_values=() if tgs is None else (tgs,),
        **extra,
    )


BASELINES = [
    result(RunKind.BASELINE, "10", 1000.0),
    result(RunKind.BASELINE, "11", 1010.0),
    result(RunKind.BASELINE, "12", 990.0),
]


def test_before_a_measurement_only_the_cell_and_run():
    assert START.user_properties() == HEAD
    assert START.stopped_sweep().user_properties() == [*HEAD, ("xlatune_sweep_stop", True)]


def test_a_measured_shared_run():
    run = result(RunKind.PROFILE, "20", 1100.0, compile_cache="hit", shared_from="wave2::p0[fsdp]")
    found = figures.figure(run, [*BASELINES, run])
    assert START.measured(Measurement(run, SPEC, False, found)).user_properties() == [
        *HEAD,
        ("xlatune_tgs", 1100.0),
        ("xlatune_runs", "1100.0 (job 20)"),
        ("xlatune_delta_pct", 10.000000000000009),
        ("xlatune_delta_ci", (4.668437046846188, 15.603140176674609)),
        ("xlatune_direction", "better"),
        ("xlatune_judged", "better"),
        ("xlatune_unstable", False),
        ("xlatune_step_seconds", 2.0),
        ("xlatune_job_tgs", 1100.0),
        ("xlatune_job_id", "20"),
        ("xlatune_verdict", "success"),
        ("xlatune_reused", False),
        ("xlatune_shared", "wave2::p0[fsdp]"),
        ("xlatune_compile_cache", "hit"),
        ("xlatune_inert", ""),
        ("xlatune_stopped", ""),
        ("xlatune_profile", "p1"),
        ("xlatune_wave", "wave2"),
        ("xlatune_config_tag", "fsdp"),
        ("xlatune_numerics", ""),
    ]


def test_a_stopped_run_that_then_stopped_the_sweep():
    run = result(RunKind.PROFILE, "21", 900.0, Verdict.STOPPED_EARLY, reason="stopped early: slower")
    found = figures.figure(run, [*BASELINES, run])
    outcome = START.measured(Measurement(run, SPEC, True, found, numerics="step 40")).stopped_sweep()
    assert outcome.user_properties() == [
        *HEAD,
        ("xlatune_tgs", 900.0),
        ("xlatune_runs", "900.0 (job 21)"),
        ("xlatune_delta_pct", -9.999999999999998),
        ("xlatune_delta_ci", (-14.362187870762213, -5.415612582720778)),
        ("xlatune_direction", "worse"),
        ("xlatune_judged", "worse"),
        ("xlatune_unstable", False),
        ("xlatune_step_seconds", 2.0),
        ("xlatune_job_tgs", 900.0),
        ("xlatune_job_id", "21"),
        ("xlatune_verdict", "stopped_early"),
        ("xlatune_reused", True),
        ("xlatune_shared", ""),
        ("xlatune_compile_cache", ""),
        ("xlatune_inert", ""),
        ("xlatune_stopped", "stopped early: slower"),
        ("xlatune_profile", "p1"),
        ("xlatune_wave", "wave2"),
        ("xlatune_config_tag", "fsdp"),
        ("xlatune_numerics", "step 40"),
        ("xlatune_sweep_stop", True),
    ]


def test_a_stored_failure_with_needs_taken_as_advisory():
    run = result(RunKind.PROFILE, "22", None, Verdict.XLA_COMPILE_FAIL, reason="exit 1")
    outcome = START.measured(Measurement(run, SPEC, True, None, needs="a Δ % needs x")).taken_as_advisory()
    assert outcome.user_properties() == [
        *HEAD,
        ("xlatune_needs", "a Δ % needs x"),
        ("xlatune_tgs", None),
        ("xlatune_runs", ""),
        ("xlatune_delta_pct", None),
        ("xlatune_delta_ci", None),
        ("xlatune_direction", None),
        ("xlatune_judged", None),
        ("xlatune_unstable", False),
        ("xlatune_step_seconds", None),
        ("xlatune_job_tgs", None),
        ("xlatune_job_id", "22"),
        ("xlatune_verdict", "xla_compile_fail"),
        ("xlatune_reused", True),
        ("xlatune_shared", ""),
        ("xlatune_compile_cache", ""),
        ("xlatune_inert", ""),
        ("xlatune_stopped", ""),
        ("xlatune_profile", "p1"),
        ("xlatune_wave", "wave2"),
        ("xlatune_config_tag", "fsdp"),
        ("xlatune_numerics", ""),
        ("xlatune_gate_advisory", True),
    ]
