"""Likely winners first (adaptive.order, the planner's candidate order) and the sequential
futility test (rules.futile): its false-stop rate checked by simulation with a fixed seed."""

from __future__ import annotations

import math
import random

from pytest_xlatune.adaptive import (
    AdaptiveRules,
    Observation,
    Plan,
    Role,
    RunState,
    StopKind,
    Submit,
    SweepState,
    judge,
    planner,
    rules,
)
from pytest_xlatune.adaptive.judge import Board
from pytest_xlatune.adaptive.order import OTHER_WEIGHT, Prior, ranked
from tests.adaptive_driver import BASE, flat, observation, plan

H = 3600.0
# Two wave-1 baselines and six controls an hour apart: 0.8 % run-to-run noise over 7 df.
LEVELS = (1000.0, 1010.0, 992.0, 1004.0, 1011.0, 994.0, 1000.0, 1003.0)


def test_the_prior_is_per_family_and_weak() -> None:
    prior = Prior.of([("a", "FSDP", 6.0), ("b", "PP", 8.0), ("c", "FSDP", -2.0), ("c", "FSDP", -4.0)], family="FSDP")
    assert math.isclose(prior.gain("a").pct, 3.0)  # one sweep counts half
    assert math.isclose(prior.gain("b").pct, OTHER_WEIGHT * 4.0)  # another family's, a quarter of that
    assert math.isclose(prior.gain("c").pct, -2.0)  # two sweeps: 2/3 of their mean
    assert prior.gain("d").pct == 0.0 and prior.gain("d").why == "no prior"
    assert "+6.0 % in 1 FSDP sweep(s)" in prior.gain("a").why
    assert [g.name for g in ranked(["c", "d", "e", "b", "a"], prior)] == ["a", "b", "d", "e", "c"]  # ties: list order


def test_evidence_hints_add_to_the_prior() -> None:
    prior = Prior.of([("x", "FSDP", 2.0)], family="FSDP").with_hints(
        [("x", 0.25, "acts on all-gather"), ("y", -0.25, "mechanism-irrelevant")]
    )
    assert math.isclose(prior.gain("x").pct, 1.25)
    assert prior.gain("x").why == "+2.0 % in 1 FSDP sweep(s) → +1.00; evidence: acts on all-gather → +0.25"
    assert prior.gain("y").pct == -0.25 and prior.gain("y").why == "evidence: mechanism-irrelevant → -0.25"
    assert [g.name for g in ranked(["y", "z", "x"], prior)] == ["x", "z", "y"]


def test_the_driver_orders_by_the_evidence_run_once_it_has_facts() -> None:
    from typing import cast

    from pytest_xlatune.engine.adaptive import Driver, SweepView
    from pytest_xlatune.plan.catalog import EvidenceFacts
    from pytest_xlatune.plan.expand import RunKind, RunSpec

    class Evidence:
        facts: EvidenceFacts | None = None

        def evidence_facts(self) -> EvidenceFacts | None:
            return self.facts

    items = plan("p1", "p2", "p3").items
    flags = {"p1": "--xla_gpu_enable_pipelined_p2p=true", "p2": "--xla_x=1", "p3": "--xla_gpu_all_gather_x=1"}
    specs = {n: RunSpec("wave2", n, "default", RunKind.PROFILE, xla_flags=(f,)) for n, f in flags.items()}
    sweep = Evidence()
    driver = Driver(cast(SweepView, sweep), Plan(items), specs, {}, "p3")
    assert driver.ordered() is driver.plan  # no evidence run yet: list order
    sweep.facts = EvidenceFacts("7", (("all-gather", 1 << 20),))
    ordered = driver.ordered()
    assert [i.name for i in ordered.candidate_order] == ["p3", "p2", "p1"]  # p1: no collective-permute
    first = planner.decide(_baselines_ran(ordered), 1800.0)
    assert isinstance(first[0], Submit) and first[0].item == "p3"
    assert "acts on all-gather, the collective with the most bytes in the evidence HLO (job 7)" in first[0].reason
    assert driver._ahead(first[0], "p1", _baselines_ran(ordered))  # runs inside p1's item
    assert driver.ordered() is ordered  # built once per evidence job


def _baselines_ran(the_plan: Plan, spread: float = 4.0) -> SweepState:
    runs = (
        observation("b1", "baseline", "B", Role.BASELINE, 0.0, flat(BASE)),
        observation("b2", "baseline-r2", "B", Role.BASELINE, 600.0, flat(BASE + spread)),
        observation("e", "evidence", "E", Role.EVIDENCE, 1200.0, flat(BASE)),
    )
    return SweepState(the_plan, runs)


def test_the_planner_tries_the_likely_winner_first_and_says_why() -> None:
    items = plan("p1", "p2", "p3").items
    ordered = Plan(items, prior=Prior.of([("p3", "FSDP", 7.0)], family="FSDP"))
    first = planner.decide(_baselines_ran(ordered), 1800.0)
    assert first == (Submit("p3", "next candidate by expected gain: +3.50 % (+7.0 % in 1 FSDP sweep(s) → +3.50)"),)
    plain = planner.decide(_baselines_ran(Plan(items)), 1800.0)
    assert plain == (Submit("p1", "next candidate in list order"),)  # no prior: list order, as before


def _board(the_plan: Plan) -> Board:
    runs = [
        observation("b1", "baseline", "B", Role.BASELINE, 0.0, flat(LEVELS[0])),
        observation("b2", "baseline-r2", "B", Role.BASELINE, 600.0, flat(LEVELS[1])),
    ]
    runs += [observation(f"c{i}", "baseline", "B", Role.CONTROL, i * H, flat(v)) for i, v in enumerate(LEVELS[2:], 1)]
    return judge.build(SweepState(the_plan, tuple(runs)), 7 * H)


def _stopped_as_futile(board: Board, effect_pct: float, rng: random.Random) -> bool:
    """One simulated first run at `effect_pct` (run noise = the board's, steps i.i.d.): whether
    the futility test stops it at any look."""
    total = board.plan.steady_steps
    level = BASE * (1 + effect_pct / 100) * math.exp(rng.gauss(0.0, board.noise.cv_pct / 100))
    steps = [level * (1 + rng.gauss(0.0, 0.002)) for _ in range(total)]
    for n in range(rules.first_look(board), total):
        run = Observation("x", "p", "p", Role.PROFILE, 3.5 * H, 3.5 * H, None, tuple(steps[:n]), RunState.RUNNING, 8)
        stopped = board.with_value(run, sum(steps[:n]) / n, 3.5 * H + 50 * n, steps=n)
        assert stopped is not None
        if rules.futile(stopped, board, n) is not None:
            return True
    return False


def test_the_futility_test_keeps_its_stated_false_stop_rate() -> None:
    # A candidate at exactly +win_pct is stopped as futile in at most futility_alpha of runs
    # (5 %; 300 runs: the bound plus three standard errors), while a no-op is stopped in most.
    the_plan = plan("p")
    board = _board(the_plan)
    assert rules.first_look(board) == the_plan.rules.futility_from == 1  # every look, the first steady step's too
    rng = random.Random(27)
    win = the_plan.thresholds.win_pct
    at_win = sum(_stopped_as_futile(board, win, rng) for _ in range(300)) / 300
    alpha = the_plan.rules.futility_alpha
    assert at_win <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / 300)
    null = sum(_stopped_as_futile(board, 0.0, rng) for _ in range(100)) / 100
    assert null >= 0.8


def test_a_futile_stop_leaves_no_better_verdict_and_names_its_test() -> None:
    the_plan = plan("p", rules=AdaptiveRules(futility_alpha=0.05))
    board = _board(the_plan)
    run = observation("x", "p", "p", Role.PROFILE, 3.5 * H, flat(1008.0, 2), RunState.RUNNING)
    stop = rules.stop_early(run, board, 3.5 * H + 100)
    assert stop is not None and stop.kind in (StopKind.FUTILE, StopKind.SETTLED)
    stopped = board.with_value(run, 1008.0, 3.5 * H + 100, steps=2)
    assert stopped is not None and not stopped.better  # one partial run below win_pct: never better
    if stop.kind is StopKind.FUTILE:
        assert "below the win threshold +5 %" in stop.reason and "false-stop odds ≤ 5%" in stop.reason


def test_one_partial_run_is_never_better_below_the_win_threshold_but_a_full_one_can_be() -> None:
    board = _board(plan("p"))
    run = observation("x", "p", "p", Role.PROFILE, 3.5 * H, flat(1035.0, 3), RunState.RUNNING)
    partial = board.with_value(run, 1035.0, 3.5 * H + 100, steps=3)
    full = board.with_value(run, 1035.0, 3.5 * H + 100)
    assert partial is not None and full is not None
    assert partial.partial and not partial.better
    assert full.better and not full.partial


def test_a_first_run_at_the_win_threshold_not_yet_better_is_repeated_before_the_next_candidate() -> None:
    # Two baselines 3 % apart: one degree of freedom, +8 % is not yet better beyond the noise.
    the_plan = plan("w", "p2")
    state = _baselines_ran(the_plan, spread=30.0).with_run(
        observation("r1", "w", "w", Role.PROFILE, 1800.0, flat(1095.0))
    )
    actions = planner.decide(state, 2500.0)
    # Its second run is the recipe's evidence run of w (the profiled run measures as a run of w).
    assert len(actions) == 1 and isinstance(actions[0], Submit)
    assert (actions[0].item, actions[0].source) == ("winner", "w")
    assert "a possible win at or above +5 %, repeated now" in actions[0].reason


def test_the_real_driver_runs_a_later_listed_likely_winner_ahead_only_with_a_prior() -> None:
    from typing import cast

    from pytest_xlatune.engine.adaptive import Driver, SweepView
    from pytest_xlatune.plan.expand import RunKind, RunSpec

    items = plan("p1", "p2", "p3").items
    specs = {name: RunSpec("wave2", name, "default", RunKind.PROFILE) for name in ("p1", "p2", "p3")}
    ordered = Plan(items, prior=Prior.of([("p3", "FSDP", 7.0)], family="FSDP"))
    driver = Driver(cast(SweepView, None), ordered, specs, {}, "p3")
    state = _baselines_ran(ordered)
    ahead = planner.decide(state, 1800.0)[0]
    assert isinstance(ahead, Submit) and ahead.item == "p3"
    assert driver._ahead(ahead, "p1", state)  # p3 runs inside p1's item; p1 runs after it
    assert not driver._ahead(ahead, "p3", state)  # it is the item at hand
    ran = state.with_run(observation("r", "p3", "p3", Role.PROFILE, 1800.0, flat(BASE)))
    assert not driver._ahead(ahead, "p1", ran)  # already ran: never twice
    plain = Driver(cast(SweepView, None), Plan(items), specs, {}, "p3")
    assert not plain._ahead(Submit("p3", "x"), "p1", _baselines_ran(Plan(items)))  # no prior: list order


def _pair_board(the_plan: Plan, second: float) -> Board:
    """The sweep's start: the wave-1 pair alone (one degree of freedom of noise)."""
    runs = (
        observation("b1", "baseline", "B", Role.BASELINE, 0.0, flat(BASE)),
        observation("b2", "baseline-r2", "B", Role.BASELINE, 600.0, flat(second)),
    )
    return judge.build(SweepState(the_plan, runs), 1200.0)


def test_the_futility_test_pools_the_noise_prior_while_the_runs_do_not_reject_it() -> None:
    # After the wave-1 pair alone (df 1: a Student-t factor of 51 at 99.4 %) a no-op's first run
    # was never futile; with the prior's pseudo-degrees of freedom it is stopped at the first look.
    the_plan = plan("p")
    board = _pair_board(the_plan, BASE * 1.008)
    assert board.noise.df == 1 and not board.noise.prior_rejected
    run = observation("x", "p", "p", Role.PROFILE, 1500.0, flat(BASE * 1.004, 2), RunState.RUNNING)
    stopped = board.with_value(run, BASE * 1.004, 1600.0, steps=2)
    assert stopped is not None and not stopped.better and rules.undecided(stopped, board) is None
    assert stopped.upper(1 - 0.05 / rules.looks(the_plan)) > math.log1p(the_plan.thresholds.win_pct / 100)
    assert rules.futile(stopped, board, 2) is not None
    # The verdicts keep the runs' own noise: the same run is no more "better" than before.
    assert stopped.df == 1


def test_the_futility_test_keeps_the_runs_noise_when_they_reject_the_prior() -> None:
    the_plan = plan("p")
    board = _pair_board(the_plan, BASE * 1.06)  # 6 % apart: the χ² test rejects the 0.8 % prior
    assert board.noise.prior_rejected
    run = observation("x", "p", "p", Role.PROFILE, 1500.0, flat(BASE * 1.03, 2), RunState.RUNNING)
    stopped = board.with_value(run, BASE * 1.03, 1600.0, steps=2)
    assert stopped is not None
    level = 1 - the_plan.rules.futility_alpha / rules.looks(the_plan)
    assert rules.futility_bound(stopped, board, level) == stopped.upper(level)


def test_the_pooled_futility_test_keeps_its_stated_false_stop_rate_after_the_pair_alone() -> None:
    # The prior's noise (0.8 %) is the truth here: a candidate at exactly +win_pct is stopped as
    # futile in at most futility_alpha of runs (300 runs: the bound plus three standard errors).
    the_plan = plan("p")
    board = _pair_board(the_plan, BASE * 1.008)
    rng = random.Random(2727)
    win = the_plan.thresholds.win_pct

    def stopped_at_some_look(effect_pct: float) -> bool:
        total = the_plan.steady_steps
        level = BASE * (1 + effect_pct / 100) * math.exp(rng.gauss(0.0, 0.008))
        steps = [level * (1 + rng.gauss(0.0, 0.002)) for _ in range(total)]
        for n in range(the_plan.rules.min_steady, total):
            run = Observation("x", "p", "p", Role.PROFILE, 1500.0, 1500.0, None, tuple(steps[:n]), RunState.RUNNING, 8)
            stopped = board.with_value(run, sum(steps[:n]) / n, 1500.0 + 50 * n, steps=n)
            assert stopped is not None
            if rules.futile(stopped, board, n) is not None:
                return True
        return False

    alpha = the_plan.rules.futility_alpha
    at_win = sum(stopped_at_some_look(win) for _ in range(300)) / 300
    assert at_win <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / 300)
    assert sum(stopped_at_some_look(0.0) for _ in range(100)) / 100 >= 0.5
