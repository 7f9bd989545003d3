"""adaptive.judge + adaptive.rules: verdicts vs the controls nearest in time, and each decision rule."""

from __future__ import annotations

import math

import pytest

from pytest_xlatune.adaptive import (
    AdaptiveRules,
    Plan,
    PlanItem,
    Role,
    RunState,
    StopEarly,
    StopKind,
    SweepState,
    judge,
    rules,
)
from pytest_xlatune.adaptive.judge import Board, Estimate
from pytest_xlatune.cell.values import Thresholds
from pytest_xlatune.verdict import stats
from tests.adaptive_driver import BASE, flat, observation, plan

H = 3600.0


def board_of(
    the_plan: Plan,
    *runs: tuple[str, float, float, int],
    controls: tuple[tuple[float, float], ...] = (),
    now: float = 10 * H,
) -> Board:
    """Three wave-1 baselines at 1000 TGS (996, 1004, 1000: 0.4 % noise over 2 df, no prior),
    controls (time, TGS), candidate runs (item, time, TGS, steady steps)."""
    obs = [
        observation("b1", "baseline", "B", Role.BASELINE, 0.0, flat(BASE - 4)),
        observation("b2", "baseline-r2", "B", Role.BASELINE, 600.0, flat(BASE + 4)),
        observation("b3", "baseline-r3", "B", Role.BASELINE, 1200.0, flat(BASE)),
    ]
    obs += [observation(f"c{i}", "baseline", "B", Role.CONTROL, t, flat(v)) for i, (t, v) in enumerate(controls)]
    for i, (item, t, v, n) in enumerate(runs):
        state = RunState.FINISHED if n == 10 else RunState.STOPPED
        obs.append(observation(f"r{i}", item, the_plan.item(item).key, Role.PROFILE, t, flat(v, n), state))
    return judge.build(SweepState(the_plan, tuple(obs)), now)


def est(board: Board, key: str) -> Estimate:
    found = board.get(key)
    assert found is not None, f"{key} is not judged"
    return found


def test_a_run_between_two_controls_is_judged_against_the_drift_not_the_start() -> None:
    # The cluster drifted up 6 % between the wave-1 pair and the control 4 h later; a no-op
    # profile measured half-way reads +3 % against the start, which the fixed protocol calls better.
    the_plan = plan("noop")
    board = board_of(the_plan, ("noop", 2 * H - 300, 1030.0, 10), controls=((4 * H - 300, 1060.0),))
    estimate = board.get("noop")
    assert estimate is not None and abs(estimate.delta_pct) < 0.5 and not estimate.better
    fixed = stats.compare([1030.0], [BASE, BASE], stats.run_noise([BASE, BASE]))
    assert fixed.verdict is stats.Direction.BETTER
    assert (
        board.drift_report().significant
        and "beyond the noise of back-to-back baseline runs" in board.drift_report().text()
    )


def test_undecided_asks_for_a_repeat_only_while_the_interest_threshold_is_in_reach() -> None:
    the_plan = plan("edge", "null", "lead")
    board = board_of(the_plan, ("edge", 2 * H, 1024.5, 10), ("null", 3 * H, 1000.0, 10))
    edge, null = board.get("edge"), board.get("null")
    assert edge is not None and null is not None
    assert rules.undecided(edge, board) is not None and "could still be ≥ +3 %" in (rules.undecided(edge, board) or "")
    assert rules.undecided(null, board) is None
    capped_plan = plan("edge", "null", "lead", rules=AdaptiveRules(repeat_cap=1))
    capped = board_of(capped_plan, ("edge", 2 * H, 1024.5, 10), ("null", 3 * H, 1000.0, 10))
    assert rules.undecided(est(capped, "edge"), capped) is None  # at the cap
    led = board_of(the_plan, ("edge", 2 * H, 1024.5, 10), ("lead", 3 * H, 1100.0, 10), ("lead", 4 * H, 1100.0, 10))
    assert rules.undecided(est(led, "edge"), led) is None  # clearly below a confirmed +10 %


def test_a_first_win_needs_its_confirming_run_and_then_counts() -> None:
    the_plan = plan("win")
    once = board_of(the_plan, ("win", 2 * H, 1080.0, 10))
    twice = board_of(the_plan, ("win", 2 * H, 1080.0, 10), ("win", 2.2 * H, 1082.0, 10))
    assert rules.confirmation(est(once, "win"), once) is not None
    assert not rules.confirmed_win(est(once, "win"), once)
    assert rules.confirmation(est(twice, "win"), twice) is None
    # No control since its first run: a co-tenant's burst could be the "win"; a control decides.
    assert not rules.confirmed_win(est(twice, "win"), twice)
    assert "a control after the win's first run" in (rules.awaiting_control(est(twice, "win"), twice) or "")
    controlled = board_of(
        the_plan, ("win", 2 * H, 1080.0, 10), ("win", 2.2 * H, 1082.0, 10), controls=((2.4 * H, BASE),)
    )
    assert rules.confirmed_win(est(controlled, "win"), controlled)
    assert rules.awaiting_control(est(controlled, "win"), controlled) is None
    small = board_of(the_plan, ("win", 2 * H, 1040.0, 10), ("win", 2.2 * H, 1040.0, 10))
    assert not rules.confirmed_win(est(small, "win"), small)  # better, but below +5 %


def test_the_leader_and_runner_up_race_only_while_their_order_matters() -> None:
    the_plan = plan("a", "b")
    close = board_of(the_plan, ("a", 2 * H, 1100.0, 10), ("a", 2.2 * H, 1100.0, 10), ("b", 3 * H, 1098.0, 10))
    raced = rules.race(close)
    assert raced is not None and raced[0].key == "b" and "runner-up" in raced[1]  # the one with fewer runs
    apart = board_of(the_plan, ("a", 2 * H, 1150.0, 10), ("b", 3 * H, 1040.0, 10))
    assert rules.race(apart) is None


def test_the_recipe_is_the_simplest_of_the_tied_winners() -> None:
    items = (
        PlanItem("baseline", "B", Role.BASELINE),
        PlanItem("baseline-r2", "B", Role.BASELINE),
        PlanItem("one", "one", Role.PROFILE, frozenset({"--xla_a"}), 1),
        PlanItem("three", "three", Role.PROFILE, frozenset({"--xla_b", "--xla_c", "env:D"}), 3),
    )
    the_plan = Plan(items, Thresholds())
    tied = board_of(the_plan, ("one", 2 * H, 1100.0, 10), ("three", 3 * H, 1105.0, 10))
    assert getattr(rules.recipe(tied), "key", None) == "one"
    ahead = board_of(the_plan, ("one", 2 * H, 1100.0, 10), ("three", 3 * H, 1200.0, 10))
    assert getattr(rules.recipe(ahead), "key", None) == "three"


def running(the_plan: Plan, item: str, tgs: float, steps: int, role: Role = Role.PROFILE) -> StopEarly | None:
    """What stop_early says about a run of `item` at `tgs` after `steps` steady steps."""
    run = observation(
        "x",
        item,
        the_plan.item(item).key if role is Role.PROFILE else "B",
        role,
        2 * H,
        flat(tgs, steps),
        RunState.RUNNING,
    )
    return rules.stop_early(run, board_of(the_plan), 2 * H + 100 + 50 * steps)


@pytest.mark.parametrize("tgs, kind", [(900.0, StopKind.LOSER), (1000.0, StopKind.SETTLED), (1150.0, StopKind.WINNER)])
def test_a_run_is_stopped_once_its_remaining_steps_cannot_change_a_decision(tgs: float, kind: StopKind) -> None:
    stop = running(plan("p"), "p", tgs, AdaptiveRules().min_steady)
    assert stop is not None and stop.kind is kind
    assert f"{kind.value} after {AdaptiveRules().min_steady} of 10 steady steps" in stop.reason


def test_before_min_steady_only_the_futility_test_stops_and_only_once_a_full_run_gave_the_step_scatter() -> None:
    # Eight control points (as test_adaptive_order's futility board): a -10 % first run is
    # futile after its first steady step; the loser rule (its own scatter) waits for min_steady.
    the_plan = plan("p")
    levels = (1000.0, 1010.0, 992.0, 1004.0, 1011.0, 994.0, 1000.0, 1003.0)

    def look(scatter: float, steps: int) -> StopEarly | None:
        runs = [
            observation(f"c{i}", "baseline", "B", Role.BASELINE if i < 2 else Role.CONTROL, i * H, flat(v, 10, scatter))
            for i, v in enumerate(levels)
        ]
        board = judge.build(SweepState(the_plan, tuple(runs)), 8 * H)
        run = observation("x", "p", "p", Role.PROFILE, 8 * H, flat(900.0, steps, scatter), RunState.RUNNING)
        return rules.stop_early(run, board, 8 * H + 100 + 50 * steps)

    first = look(0.002, 1)
    assert first is not None and first.kind is StopKind.FUTILE and "futile after 1 of 10 steady steps" in first.reason
    later = look(0.002, AdaptiveRules().min_steady)
    assert later is not None and later.kind is StopKind.LOSER
    assert look(0.0, 1) is None  # no step scatter known yet: nothing before min_steady
    assert look(0.0, AdaptiveRules().min_steady) is not None


@pytest.mark.parametrize("role", [Role.BASELINE, Role.CONTROL, Role.EVIDENCE, Role.WINNER_EVIDENCE])
def test_baselines_controls_and_evidence_runs_are_never_stopped(role: Role) -> None:
    assert running(plan("p"), "p", 700.0, 5, role=role) is None


def test_an_undecided_run_and_one_near_a_boundary_run_on() -> None:
    assert running(plan("p"), "p", 1025.0, 5) is None  # undecided: its repeat is judged with it
    boundary = next(
        v
        for v in range(1000, 1100)
        if running(plan("p"), "p", float(v), 9) is None and running(plan("p"), "p", float(v) - 3, 9) is not None
    )
    assert 1005 < boundary < 1040


def test_every_entry_of_the_signature_is_monotone_in_the_runs_value() -> None:
    # Monotone entries are what make "same signature at both ends" mean "same decisions in between".
    the_plan = plan("p", "lead")
    board = board_of(the_plan, ("lead", 1 * H, 1060.0, 10))
    run = observation("x", "p", "p", Role.PROFILE, 2 * H, flat(1000.0), RunState.RUNNING)
    estimates = [board.with_value(run, BASE * math.exp(d / 1000), 3 * H) for d in range(-150, 200)]
    signatures = [rules.signature(e, board) for e in estimates if e is not None]
    assert len(signatures) == len(estimates)
    for entry in range(len(signatures[0])):
        column = [s[entry] for s in signatures]
        assert column == sorted(column), entry
    assert len(set(signatures)) >= 5


def test_a_replication_is_charged_for_the_keys_run_twice_not_for_every_candidate_tested() -> None:
    # The runs after a win's first are no witness of why it was chosen: Bonferroni over the keys
    # that ran twice, not over every candidate tested once (a +8 % winner at 3 df failed its
    # replication in 1 order in 8 of bench/orders.py when 12 single-run candidates shared it).
    def win(singles: int, repeated: bool) -> Estimate:
        names = [f"p{i}" for i in range(1, singles + 1)]
        others = [(n, (2.4 + 0.1 * i) * H, 1000.0, 10) for i, n in enumerate(names)]
        if repeated:
            others.append(("p1", 4.0 * H, 1002.0, 10))
        return est(
            board_of(plan("win", *names), ("win", 2 * H, 1080.0, 10), ("win", 2.2 * H, 1065.0, 10), *others), "win"
        )

    assert win(5, repeated=False).replicated and win(12, repeated=False).replicated
    assert win(5, repeated=False).better and win(12, repeated=False).better
    assert not win(5, repeated=True).replicated  # another key's repeat shares the error rate


def test_a_win_short_only_of_its_replication_is_repeated_now_unless_its_runs_disagree() -> None:
    # Two runs of +7-8 %: the pooled interval clears 0, but the second run alone does not beat
    # the replication test (2.5 % / 2 keys run twice — the win and p1's repeat): its third run
    # goes before the next candidate, not after all of them. Runs 6 % apart (unstable, the
    # noise's prior rejected) or a pooled interval reaching 0 wait for `undecided`, as before.
    the_plan = plan("win", "p1", "p2", "p3", "p4", "p5")
    others = [(f"p{i}", (2.4 + 0.2 * i) * H, 1000.0, 10) for i in range(1, 6)] + [("p1", 3.8 * H, 1002.0, 10)]

    def board(first: float, second: float) -> Board:
        return board_of(the_plan, ("win", 2 * H, first, 10), ("win", 2.2 * H, second, 10), *others)

    short = board(1080.0, 1065.0)
    win = est(short, "win")
    assert not win.better and not win.replicated and win.log_delta - win.half > 0
    assert "repeated now" in (rules.promising(win, short) or "")
    for first, second in ((1120.0, 1055.0), (1100.0, 1060.0)):
        wide = board(first, second)
        assert rules.promising(est(wide, "win"), wide) is None
        assert rules.undecided(est(wide, "win"), wide) is not None  # still repeated, at the end


def test_the_planners_no_win_stops_read_as_such_in_the_verdicts() -> None:
    # The verdicts hold a run the planner stopped as futile or settled to "never better on its
    # own" by the reason the engine stores ("stopped early: <reason>"): the two must agree.
    import dataclasses

    from pytest_xlatune.results import Verdict
    from pytest_xlatune.verdict.one_run import NO_WIN_STOPS, stopped_as_no_win
    from tests import report_cases as cases

    assert set(NO_WIN_STOPS) == {StopKind.FUTILE.value, StopKind.SETTLED.value}
    stored = dataclasses.replace(cases.Jobs().profile("p", 1000.0), verdict=Verdict.STOPPED_EARLY)
    for tgs in (1000.0, 900.0, 1150.0):
        stop = running(plan("p"), "p", tgs, AdaptiveRules().min_steady)
        assert stop is not None
        as_stored = dataclasses.replace(stored, reason=f"stopped early: {stop.reason}")
        assert stopped_as_no_win(as_stored) is (stop.kind.value in NO_WIN_STOPS)


def test_a_run_whose_own_steps_stalled_is_no_more_certain_than_its_steps_say() -> None:
    # A +8 % flag with one steady step 10 times slower (a stall, a co-tenant for a moment): its
    # mean reads -2 %, and its steps leave ±10 % on it. The planner, as the verdicts, sees that width:
    # the run is undecided and worth a repeat, not a settled "no win" (a +8 % flag lost to one step).
    the_plan = plan("stall", "null")
    steps = list(flat(1080.0))
    steps[3] = 108.0
    obs = [
        observation("b1", "baseline", "B", Role.BASELINE, 0.0, flat(BASE - 4)),
        observation("b2", "baseline-r2", "B", Role.BASELINE, 600.0, flat(BASE + 4)),
        observation("b3", "baseline-r3", "B", Role.BASELINE, 1200.0, flat(BASE)),
        observation("r0", "stall", "stall", Role.PROFILE, 2 * H, steps),
        observation("r1", "null", "null", Role.PROFILE, 3 * H, flat(1000.0)),
    ]
    board = judge.build(SweepState(the_plan, tuple(obs)), 10 * H)
    stall, null = est(board, "stall"), est(board, "null")
    assert stall.delta_pct < 0 and stall.high_pct > 8, stall.text()
    assert rules.undecided(stall, board) is not None
    assert null.high_pct < 3 and rules.undecided(null, board) is None, null.text()  # clean runs unchanged
