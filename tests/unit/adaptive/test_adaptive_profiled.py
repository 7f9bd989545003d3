"""The winner's profiled re-run as a run of its settings (adaptive/judge.build, adaptive/planner):
a first win's second run is the recipe's evidence run, its steps after the profiler's window
count as a run of the candidate, unless it has too few of them or lies outside the candidate's
plain runs' 99 % prediction interval."""

from __future__ import annotations

from typing import cast

from pytest_xlatune.adaptive import Role, Submit, SweepState, judge, planner
from pytest_xlatune.adaptive.values import Repeat
from tests.adaptive_driver import BASE, flat, observation, plan

H = 3600.0


def _first_win(the_plan: object = None) -> SweepState:
    """Two baselines, the evidence run, a control, and w's first run at +8 %."""
    the_plan = the_plan or plan("w", "p2")
    runs = (
        observation("b1", "baseline", "B", Role.BASELINE, 0.0, flat(BASE)),
        observation("b2", "baseline-r2", "B", Role.BASELINE, 600.0, flat(BASE * 1.004)),
        observation("e", "evidence", "E", Role.EVIDENCE, 1200.0, flat(BASE, 6)),
        observation("c1", "baseline", "B", Role.CONTROL, 1800.0, flat(BASE * 0.998)),
        observation("r1", "w", "w", Role.PROFILE, 2400.0, flat(BASE * 1.08)),
    )
    return SweepState(the_plan, runs)  # type: ignore[arg-type]


def test_the_planner_submits_the_winners_evidence_run_as_a_first_wins_confirming_run() -> None:
    state = _first_win()
    actions = planner.decide(state, 3000.0)
    assert len(actions) == 1 and isinstance(actions[0], Submit)
    assert (actions[0].item, actions[0].source) == ("winner", "w")
    assert "its second run is the recipe's evidence run" in actions[0].reason and actions[0].source == "w"
    # the engine prints "<item>: <source> with the profiler: <reason>": the reason never repeats it
    assert "with the profiler" not in actions[0].reason


def test_a_second_win_gets_a_plain_repeat_once_the_evidence_run_went_to_the_first() -> None:
    state = _first_win(plan("w", "v")).with_run(
        observation("x", "winner", "w", Role.WINNER_EVIDENCE, 3000.0, flat(BASE * 1.08, 6))
    )
    state = state.with_run(observation("r2", "v", "v", Role.PROFILE, 3600.0, flat(BASE * 1.12)))
    actions = planner.decide(state, 4200.0)
    assert any(isinstance(a, Repeat) and a.item == "v" for a in actions), actions


def test_the_profiled_rerun_counts_as_a_run_of_the_winners_settings() -> None:
    state = _first_win().with_run(observation("x", "winner", "w", Role.WINNER_EVIDENCE, 3000.0, flat(BASE * 1.08, 6)))
    board = judge.build(state, 3700.0)
    est = board.get("w")
    assert est is not None and est.runs == ("r1", "x")
    # its six steps of ten: what it misses counts as a stopped run's (a wider interval)
    sample = dict(board.samples)["w"][1]
    assert sample[0] == "x" and sample[3] > 0


def test_a_profiled_rerun_outside_the_plain_runs_interval_makes_its_key_unstable_never_better() -> None:
    # Left out, it would give the win another draw (its plain repeat); pooled, it flags the key.
    state = _first_win().with_run(observation("x", "winner", "w", Role.WINNER_EVIDENCE, 3000.0, flat(BASE * 1.5, 6)))
    board = judge.build(state, 3700.0)
    est = board.get("w")
    assert est is not None and est.runs == ("r1", "x") and "w" in board.flagged
    assert est.unstable and not est.better
    again = state.with_run(observation("r2", "w", "w", Role.PROFILE, 3700.0, flat(BASE * 1.08)))
    later = judge.build(again, 4400.0).get("w")
    assert later is not None and later.unstable and not later.better


def test_a_profiled_rerun_with_too_few_steady_steps_confirms_nothing() -> None:
    state = _first_win().with_run(observation("x", "winner", "w", Role.WINNER_EVIDENCE, 3000.0, flat(BASE * 1.08, 2)))
    est = judge.build(state, 3700.0).get("w")
    assert est is not None and est.runs == ("r1",)


def test_the_real_driver_runs_the_early_evidence_run_and_keys_it_by_its_source() -> None:
    from pytest_xlatune.engine.adaptive import Driver, SweepView
    from pytest_xlatune.plan.expand import RunKind, RunSpec
    from pytest_xlatune.results import JobResult, Verdict

    the_plan = plan("w", "p2")
    specs = {name: RunSpec("wave2", name, "default", RunKind.PROFILE) for name in ("w", "p2")}
    specs["winner"] = RunSpec("evidence2", "winner", "default", RunKind.WINNER_EVIDENCE, evidence=True)
    driver = Driver(cast(SweepView, None), the_plan, specs, {}, "winner")
    early = Submit("winner", "confirming", source="w")
    assert driver._early_evidence(early, "p2")  # asked for inside p2's item: run now
    assert not driver._early_evidence(early, "winner")  # the item at hand: it runs as itself
    assert not driver._early_evidence(Submit("p2", "next"), "w")
    result = JobResult(
        key="k", item="winner", wave="evidence2", profile="winner", config_tag="default",
        kind=RunKind.WINNER_EVIDENCE, job_id="7", verdict=Verdict.SUCCESS, tgs=BASE, resolved_from="w",
    )  # fmt: skip
    assert driver._measured_item("winner", Role.WINNER_EVIDENCE, result).key == "w"
    assert driver._measured_item("winner", Role.WINNER_EVIDENCE, result).name == "winner"


def test_a_cell_too_short_for_the_profiled_window_confirms_with_a_plain_repeat() -> None:
    # 15 steps: steady 5-14, profiled 9-14 (6 steps); 10 steps: steady 5-9, profiled 9 alone.
    from dataclasses import replace

    short = replace(plan("w", "p2"), steady_steps=5)
    state = SweepState(short, tuple(replace(r, steady=r.steady[:5]) for r in _first_win().runs))
    actions = planner.decide(state, 3000.0)
    assert len(actions) == 1 and isinstance(actions[0], Repeat) and actions[0].item == "w"
