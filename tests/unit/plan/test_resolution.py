"""Runs resolved from results at run time: the stack of winners and the winner's evidence run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_xlatune.cell.values import Cell, ClusterSlot, ConfigTag, Parallelism, Profile, Stack
from pytest_xlatune.engine.sweep import Sweep
from pytest_xlatune.plan.expand import RunKind, RunSpec, expand
from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.store import ResultStore

PROFILES = (
    Profile("ag", 2, ("--xla_ag=1",)),
    Profile("ag_big", 2, ("--xla_ag=2",)),
    Profile("ov", 2, ("--xla_ov=2",), (("NCCL_X", "8"),)),
    Profile("late", 4, ("--xla_late=1",)),
    Profile("remat", 3, (), (), (("remat_policy", "full"),)),
)


class NoLauncher:
    name = "none"

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"resolution must not touch the launcher ({name})")


def make_sweep(tmp_path: Path, top: int = 2, wave: int = 3) -> Sweep:
    cell = Cell(
        path=Path("c.yml"),
        model_tag="m",
        slot=ClusterSlot(nodes=1),
        parallelism=Parallelism((("FSDP", 8),)),
        config_tags=(ConfigTag("default"),),
        profiles=PROFILES,
        stacks=(Stack(wave, top),),
    )
    return Sweep(
        cell=cell, specs=expand(cell), store=ResultStore(tmp_path / "s.jsonl"), launcher=NoLauncher(), nodelist="n"
    )  # type: ignore[arg-type]


def measure(sweep: Sweep, spec: RunSpec, tgs: float, job: int) -> JobResult:
    result = JobResult(
        key=sweep.key(spec),
        item=spec.name,
        wave=spec.wave,
        profile=spec.profile,
        config_tag=spec.config_tag,
        kind=spec.kind.value,
        job_id=str(job),
        verdict=Verdict.SUCCESS,
        xla_flags=spec.xla_flags,
        env=spec.env,
        tgs=tgs,
        step_seconds=1000 / tgs,
        resolved_from=spec.resolved_from,
    )
    sweep.store.add_result(result)
    return result


def run(sweep: Sweep, tgs: dict[str, float]) -> None:
    """Store a measurement for the baselines and the named profiles."""
    for job, spec in enumerate(sweep.specs, 1):
        if spec.kind is RunKind.BASELINE:
            measure(sweep, spec, 1000.0 + job, job)
        elif spec.profile in tgs:
            measure(sweep, spec, tgs[spec.profile], job)


def spec(sweep: Sweep, kind: RunKind) -> RunSpec:
    return next(s for s in sweep.specs if s.kind is kind)


def test_stack_combines_the_top_winners_with_distinct_settings(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    # ag_big shares --xla_ag with the better ag, so ov (next best) is stacked instead.
    run(sweep, {"ag": 1100.0, "ag_big": 1090.0, "ov": 1080.0, "remat": 1001.0})
    resolved, reason = sweep.resolution(spec(sweep, RunKind.STACK))
    assert reason == "" and resolved is not None
    assert resolved.resolved_from == "ag+ov"
    assert resolved.xla_flags == ("--xla_ag=1", "--xla_ov=2")
    assert resolved.env == (("NCCL_X", "8"),)
    assert resolved.name == "wave3::stack_top2[default]"


def test_stack_takes_at_most_top_k_and_only_waves_up_to_its_own(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, top=3, wave=3)
    run(sweep, {"ag": 1100.0, "ov": 1080.0, "remat": 1070.0, "late": 1200.0})
    resolved = sweep.resolve(spec(sweep, RunKind.STACK))
    assert resolved is not None and resolved.resolved_from == "ag+ov+remat"  # late is wave 4
    assert resolved.overrides == (("remat_policy", "full"),)


def test_stack_skips_with_a_reason_with_fewer_than_two_winners(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    run(sweep, {"ag": 1100.0, "ov": 1003.0})  # ov is within noise of the baseline
    resolved, reason = sweep.resolution(spec(sweep, RunKind.STACK))
    assert resolved is None
    assert reason == (
        "fewer than 2 winning profiles (better than baseline-deployed beyond noise, "
        "with distinct settings) in waves 2-3 to stack: ag"
    )


def test_stack_result_is_found_under_its_resolution(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    run(sweep, {"ag": 1100.0, "ov": 1080.0})
    stacked = sweep.resolve(spec(sweep, RunKind.STACK))
    assert stacked is not None
    measure(sweep, stacked, 1150.0, 99)
    assert any(r.kind == "stack" and r.job_id == "99" for r in sweep.results())


def test_winner_evidence_reruns_the_winner_with_the_dump_on(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    run(sweep, {"ag": 1100.0, "ov": 1080.0})
    stacked = sweep.resolve(spec(sweep, RunKind.STACK))
    assert stacked is not None
    measure(sweep, stacked, 1150.0, 99)  # the stack beats every single flag
    resolved, reason = sweep.resolution(spec(sweep, RunKind.WINNER_EVIDENCE))
    assert reason == "" and resolved is not None
    assert resolved.evidence and resolved.resolved_from == "stack_top2"
    assert resolved.xla_flags == ("--xla_ag=1", "--xla_ov=2")
    assert resolved.name == "evidence2::winner[default]"


def test_winner_evidence_falls_back_to_the_best_run_without_a_winner(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    run(sweep, {"ag": 1004.0, "ov": 990.0})
    resolved = sweep.resolve(spec(sweep, RunKind.WINNER_EVIDENCE))
    assert resolved is not None and resolved.resolved_from == "ag"


@pytest.mark.parametrize("kind", [RunKind.WINNER_EVIDENCE, RunKind.STACK])
def test_nothing_measured_yet_means_no_resolution_and_a_reason(tmp_path: Path, kind: RunKind) -> None:
    sweep = make_sweep(tmp_path)
    resolved, reason = sweep.resolution(spec(sweep, kind))
    assert resolved is None and reason
