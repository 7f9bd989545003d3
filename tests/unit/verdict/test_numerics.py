"""The numerics guard on recorded loss trajectories of the embedded workload (bench/numerics.py)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.triage.lines import parse_step_line
from pytest_xlatune.verdict import numerics
from pytest_xlatune.verdict.gate import image_gate
from pytest_xlatune.verdict.lock import Lock, LockedRecipe
from pytest_xlatune.verdict.numerics import Mode, Numerics, agreement, compare, guard, trajectories, widened
from pytest_xlatune.verdict.verdicts import numerics_check
from tests.report_cases import BF16_LOSSES, LOSSES

# Recorded with bench/numerics.py (demo model, FSDP=8, -O0 deployed), the printed 3 decimals:
# --xla_backend_optimization_level=1 and =2, cpu-all-reduce-combiner off, vector width 256,
# single-threaded Eigen, split count 4 and fast math on all printed the baseline's losses exactly.
REORDERED = LOSSES
# A cluster whose reductions are not bitwise reproducible: ±1 in the last printed digit.
JITTERED = tuple((s, round(v + (0.001 if s % 2 else -0.001), 3)) for s, v in LOSSES)


def fields(
    losses: tuple[tuple[int, float], ...], **extra: tuple[tuple[int, float], ...]
) -> dict[str, tuple[tuple[int, float], ...]]:
    return {"loss": losses, **extra}


def test_identical_and_reordering_only_trajectories_are_the_same() -> None:
    assert compare(fields(LOSSES), fields(LOSSES)).verdict is Numerics.SAME
    check = compare(fields(REORDERED), fields(LOSSES))
    assert check.verdict is Numerics.SAME and check.max_abs == 0 and check.steps_compared == 15
    assert compare(fields(JITTERED), fields(LOSSES)).verdict is Numerics.SAME  # within 0.003


def test_bfloat16_compute_is_caught_where_it_leaves_the_baseline() -> None:
    check = compare(fields(BF16_LOSSES), fields(LOSSES), reference_job="7")
    assert check.verdict is Numerics.CHANGED
    assert (check.at_step, check.loss, check.reference_loss) == (2, 4.475, 4.481)
    assert check.max_abs == pytest.approx(0.006)
    assert check.where() == "loss left the baseline's at step 2: 4.475 vs 4.481, baseline job 7"


def test_a_diverged_run_is_changed_and_a_short_one_unknown() -> None:
    diverged = LOSSES[:5] + tuple((s, math.nan) for s in range(5, 15))
    assert compare(fields(diverged), fields(LOSSES)).at_step == 5
    assert compare(fields(LOSSES[:2]), fields(LOSSES)).verdict is Numerics.UNKNOWN
    assert guard(fields(LOSSES), []).verdict is Numerics.UNKNOWN


def test_an_extra_loss_field_is_checked_too() -> None:
    aux = tuple((s, 0.01) for s in range(15))
    moved = tuple((s, 0.01 if s < 9 else 0.05) for s in range(15))
    check = compare(fields(LOSSES, moe_lb_loss=moved), fields(LOSSES, moe_lb_loss=aux))
    assert (check.verdict, check.field, check.at_step) == (Numerics.CHANGED, "moe_lb_loss", 9)


def test_changed_only_when_it_departs_from_every_baseline_repeat() -> None:
    wandered = fields(BF16_LOSSES)  # one baseline repeat that itself moved
    assert guard(fields(BF16_LOSSES), [("1", fields(LOSSES)), ("2", wandered)]).verdict is Numerics.SAME
    check = guard(fields(BF16_LOSSES), [("1", fields(LOSSES)), ("2", fields(LOSSES))])
    assert check.verdict is Numerics.CHANGED and check.reference_job in ("1", "2")


def test_repeats_that_wander_widen_the_line() -> None:
    refs = [("1", fields(LOSSES)), ("2", fields(JITTERED))]
    assert agreement(refs).max_abs == pytest.approx(0.001)
    assert widened(numerics.DEFAULT_TOLERANCE, refs).abs == pytest.approx(0.004)
    assert widened(numerics.DEFAULT_TOLERANCE, refs[:1]) == numerics.DEFAULT_TOLERANCE


def test_trajectories_take_every_loss_field_of_the_step_lines() -> None:
    lines = [
        f"completed step: {s}, seconds: 0.254, TFLOP/s/device: 0.123, Tokens/s/device: 1007.9, "
        f"total_weights: 256, loss: {v:.3f}, moe_lb_loss: 0.010, mtp_loss: {v + 1:.3f}"
        for s, v in LOSSES[:4]
    ]
    steps = {rec.step: rec for rec in map(parse_step_line, lines) if rec is not None}
    main, extra = trajectories(steps)
    assert main == LOSSES[:4]
    assert dict(extra)["mtp_loss"] == tuple((s, round(v + 1, 3)) for s, v in LOSSES[:4])
    assert set(dict(extra)) == {"moe_lb_loss", "mtp_loss"}


def result(
    kind: str, job: str, losses: tuple[tuple[int, float], ...], tgs: float = 1000.0, image: str = ""
) -> JobResult:
    return JobResult(
        key=f"{kind}-{job}",
        item=f"x::{kind}[default]",
        wave="gate",
        profile=kind,
        config_tag="default",
        kind=kind,
        job_id=job,
        verdict=Verdict.SUCCESS,
        tgs=tgs,
        losses=losses,
        image=image,
    )


def test_the_loss_round_trips_through_the_store_format() -> None:
    r = dataclasses.replace(result("profile", "3", BF16_LOSSES), extra_losses=(("mtp_loss", ((0, 1.5), (1, 1.25))),))
    again = JobResult.from_dict(r.to_dict())
    assert again == r and again.loss_fields()["mtp_loss"] == ((0, 1.5), (1, 1.25))


def test_a_run_is_judged_against_the_baselines_of_its_own_image() -> None:
    runs = [result("baseline", "1", LOSSES), result("baseline", "2", BF16_LOSSES, image="new")]
    assert numerics_check(result("profile", "3", BF16_LOSSES), runs).verdict is Numerics.CHANGED
    assert numerics_check(result("profile", "4", BF16_LOSSES, image="new"), runs).verdict is Numerics.SAME


LOCK = Lock(
    model_tag="m",
    parallelism="FSDP=8",
    image="old",
    nodelist="n[1-2]",
    date="2026-11-30",
    recipes=(
        LockedRecipe(
            config_tag="default",
            profile="fast",
            xla_flags=("--xla_a=1",),
            env=(),
            overrides=(),
            tgs=1100.0,
            ci_low_pct=8.0,
            ci_high_pct=12.0,
            baseline_tgs=1000.0,
            delta_pct=10.0,
            job_ids=("7",),
        ),
    ),
)


@pytest.mark.parametrize("mode", list(Mode))
def test_the_image_gate_holds_the_recipe_to_the_new_baseline_loss(mode: Mode) -> None:
    baselines = [result("baseline", "200", LOSSES), result("baseline", "201", LOSSES)]
    controls = {
        "old_recipe_runs": [result("gate_old_recipe", "300", LOSSES, 1100.0)],
        "old_baseline_runs": [result("gate_old_baseline", "400", LOSSES)],
    }
    same = image_gate([result("gate_recipe", "100", LOSSES, 1100.0)], baselines, LOCK, 1.0, False, mode, **controls)
    assert same.problems == () and same.warnings == ()
    moved = image_gate(
        [result("gate_recipe", "100", BF16_LOSSES, 1100.0)], baselines, LOCK, 1.0, False, mode, **controls
    )
    line = (
        "recipe 'fast' [default] changes numerics on the new image: loss left the baseline's at "
        "step 2: 4.475 vs 4.481, baseline job 200, job 100 (tolerance 0.003)"
    )
    assert (moved.problems, moved.warnings) == (((line,), ()) if mode is Mode.FAIL else ((), (line,)))
