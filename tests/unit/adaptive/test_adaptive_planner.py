"""adaptive.planner / adaptive.fixed: whole scripted sweeps through decide(), one steady step at a time."""

from __future__ import annotations

import pytest

from pytest_xlatune.adaptive import (
    AdaptiveRules,
    Conclude,
    Conclusion,
    Control,
    CrossCheck,
    Repeat,
    ReportView,
    Role,
    RunState,
    Share,
    StopEarly,
    StopKind,
    Submit,
    SweepState,
    fixed,
    planner,
)
from pytest_xlatune.adaptive.values import Budget
from tests.adaptive_driver import BASE, drive, observation, plan


def effects(**pct: float):  # type: ignore[no-untyped-def]
    """A cluster where each named profile is pct % faster than the baseline, the rest no-ops; the
    baseline's runs alternate ±0.4 % (real repeats never agree exactly, and no prior stands in)."""

    def tgs(item: str, role: Role, index: int) -> float:
        if role is not Role.PROFILE and role is not Role.WINNER_EVIDENCE:
            return BASE * (1 + 0.004 * (-1) ** index)
        return BASE * (1 + pct.get(item, 0.0) / 100)

    return tgs


def test_a_clear_loser_is_stopped_at_its_first_steady_step_and_no_baseline_control_or_evidence_run_ever_is() -> None:
    # The baselines ran to the end first (the sweep's step scatter is known), so the futility
    # test looks from the first steady step; the loser rule waits for min_steady.
    result = drive(plan("slow", "p1"), planner.decide, effects(slow=-12.0))
    stops = result.of(StopEarly)
    slow = next(r for r in result.state.runs if r.item == "slow")
    assert slow.state is RunState.STOPPED and len(slow.steady) == AdaptiveRules().futility_from == 1
    assert any(
        isinstance(s, StopEarly) and s.run == slow.run and s.kind is StopKind.FUTILE and "after 1 of 10" in s.reason
        for s in stops
    )
    never = [r for r in result.state.runs if r.role is not Role.PROFILE]
    assert never and all(r.state is RunState.FINISHED and len(r.steady) == 10 for r in never)


def test_a_run_whose_remaining_steps_could_change_its_verdict_runs_to_the_end() -> None:
    # +2.2 % sits between "within the noise" and the 3 % the sweep is designed to find: undecided.
    result = drive(plan("edge", winner=False), planner.decide, effects(edge=2.2))
    first = next(r for r in result.state.runs if r.item == "edge")
    assert first.state is RunState.FINISHED and len(first.steady) == 10


def test_an_undecided_profile_is_repeated_and_a_clear_null_is_not() -> None:
    result = drive(plan("null", "edge", winner=False), planner.decide, effects(edge=2.2))
    repeats = [a.item for a in result.of(Repeat)]
    assert "edge" in repeats and "null" not in repeats
    assert repeats.count("edge") <= AdaptiveRules().repeat_cap - 1
    assert any("undecided" in a.reason for a in result.of(Repeat))


def test_a_duplicate_key_is_shared_never_submitted() -> None:
    the_plan = plan("p1", "p2", ("p2_again", "p2"), "p3")
    result = drive(the_plan, planner.decide, effects(p2=1.0))
    submitted = [a.item for a in result.of(Submit)]
    assert "p2_again" not in submitted and submitted.count("p2") == 1
    shares = result.of(Share)
    assert [(s.item, s.source) for s in shares if isinstance(s, Share)] == [("p2_again", "p2")]
    assert "p2_again" not in result.conclusion.skipped


def test_a_profile_with_the_baselines_settings_shares_the_baseline() -> None:
    result = drive(plan("p1", ("deployed", "B")), planner.decide, effects())
    assert [(s.item, s.source) for s in result.of(Share) if isinstance(s, Share)] == [("deployed", "baseline")]


def test_controls_are_interleaved_every_k_candidate_runs() -> None:
    names = [f"p{i}" for i in range(9)]
    result = drive(plan(*names, rules=AdaptiveRules(control_every=4, control_max_age_s=1e9)), planner.decide, effects())
    order = result.submitted()
    first = order.index("control")
    assert order[first - 4 : first] == ["p0", "p1", "p2", "p3"]
    assert order.count("control") >= 2
    assert all("candidate runs since the last control" in a.reason for a in result.of(Control)[:2])


def test_a_control_is_due_when_the_last_one_is_older_than_its_age_limit() -> None:
    the_plan = plan("p1", "p2", rules=AdaptiveRules(control_every=100, control_max_age_s=700.0))
    result = drive(the_plan, planner.decide, effects())
    assert result.of(Control) and "min ago" in result.of(Control)[0].reason


def test_a_confirmed_win_concludes_and_skips_the_rest_but_not_its_variants() -> None:
    # lever_a and lever_b set the same flag (variants); p3 and p4 are other levers.
    the_plan = plan("p1", ("lever_a", "lever=1"), ("lever_b", "lever=2"), "p3", "p4")
    result = drive(the_plan, planner.decide, effects(lever_a=9.0, lever_b=10.0))
    conclusion = result.conclusion
    assert conclusion.why is Conclusion.WIN
    ran = {r.item for r in result.state.runs}
    assert {"lever_a", "lever_b"} <= ran and not {"p3", "p4"} & ran
    assert set(conclusion.skipped) == {"p3", "p4"}
    confirmations = [a for a in result.of(Repeat) if "confirming" in a.reason]
    assert confirmations  # a win counts once it was measured twice
    # lever_a's first win got the recipe's evidence run as its second run; the recipe became
    # lever_b, which gets its own evidence run at the end (two profiled runs at most).
    profiled = [a.source for a in result.of(Submit) if isinstance(a, Submit) and a.item == "winner"]
    assert profiled == ["lever_a", "lever_b"]


def test_a_win_stops_the_search_only_after_the_variants_that_come_later() -> None:
    the_plan = plan(("lever_a", "lever=1"), "p2", ("lever_b", "lever=2"), "p3")
    result = drive(the_plan, planner.decide, effects(lever_a=20.0))
    ran = [r.item for r in result.state.runs]
    assert "lever_b" in ran and "p2" not in ran and "p3" not in ran


def test_a_confirmed_win_is_checked_on_every_other_config_tag_before_it_stops_the_search() -> None:
    the_plan = plan("p1", "good", "p3", "p4", other_tags=("dense", "long"))
    result = drive(the_plan, planner.decide, effects(good=20.0))
    checks = result.of(CrossCheck)
    assert [(c.item, c.config_tag) for c in checks] == [("good", "dense"), ("good", "long")]
    assert "regress [dense] by more than 1 %" in checks[0].reason
    assert result.conclusion.why is Conclusion.WIN and "regresses none of dense, long" in result.conclusion.reason
    assert set(result.conclusion.skipped) == {"p3", "p4"}


def test_a_win_that_regresses_another_config_tag_does_not_stop_the_search() -> None:
    the_plan = plan("p1", "good", "p3", "better", "p5", other_tags=("dense",))
    result = drive(
        the_plan, planner.decide, effects(good=20.0, better=25.0), regresses=lambda item, tag: item == "good"
    )
    assert [(c.item, c.config_tag) for c in result.of(CrossCheck)] == [("good", "dense"), ("better", "dense")]
    ran = {r.item for r in result.state.runs}
    assert {"p3", "better"} <= ran  # the search went on past good's win
    assert result.conclusion.why is Conclusion.WIN and "better" in result.conclusion.reason
    assert result.conclusion.skipped == ("p5",)
    # Its only win regressing the other tag, the search runs every candidate.
    alone = drive(
        plan("p1", "good", "p3", other_tags=("dense",)),
        planner.decide,
        effects(good=20.0),
        regresses=lambda item, tag: True,
    )
    assert alone.conclusion.why is Conclusion.EXHAUSTED and {"p1", "good", "p3"} <= {r.item for r in alone.state.runs}


def test_bounded_concludes_after_enough_profiles_with_none_above_the_bound() -> None:
    names = [f"p{i:02d}" for i in range(8)]
    result = drive(plan(*names, bounded_profiles=5), planner.decide, effects())
    assert result.conclusion.why is Conclusion.BOUNDED
    assert result.conclusion.skipped == ("p05", "p06", "p07")
    assert "winner" in result.submitted()  # the best run's evidence, as the tool runs it without a winner


def test_a_profile_above_the_bound_keeps_the_search_going() -> None:
    names = [f"p{i:02d}" for i in range(8)]
    result = drive(plan(*names, bounded_profiles=5), planner.decide, effects(p01=4.0))
    assert result.conclusion.why is Conclusion.EXHAUSTED


def test_the_queue_budget_concludes_with_the_rest_skipped() -> None:
    names = [f"p{i}" for i in range(12)]
    budget = Budget(queue_hours=2.0, reserve_s=0.0)
    result = drive(plan(*names, budget=budget), planner.decide, effects())
    assert result.conclusion.why is Conclusion.BUDGET
    last_start = max(r.submitted_at for r in result.state.runs)
    assert last_start < 2.0 * 3600
    assert result.conclusion.skipped and "p11" in result.conclusion.skipped


def test_the_node_hour_budget_concludes_too() -> None:
    names = [f"p{i}" for i in range(12)]
    budget = Budget(queue_hours=None, node_hours=8.0, reserve_s=0.0)  # 8 nodes: one wall hour
    result = drive(plan(*names, budget=budget), planner.decide, effects())
    assert result.conclusion.why is Conclusion.BUDGET
    spent = sum(r.node_seconds(1e12) for r in result.state.runs) / 3600
    assert spent < 8.0 + 8 * 600 / 3600  # at most the run that was in flight on top


def test_decide_returns_nothing_while_a_run_is_in_flight_and_undecided() -> None:
    the_plan = plan("p1")
    state = SweepState(
        the_plan,
        (
            observation("1", "baseline", "B", Role.BASELINE, 0.0, [BASE] * 10),
            observation("2", "baseline-r2", "B", Role.BASELINE, 600.0, [BASE] * 10),
            observation("3", "evidence", "E", Role.EVIDENCE, 1200.0, [BASE] * 6),
            observation("4", "p1", "p1", Role.PROFILE, 1800.0, [BASE * 1.02], RunState.RUNNING),
        ),
    )
    assert planner.decide(state, 1900.0) == ()


def test_decide_is_a_pure_function_of_the_state() -> None:
    the_plan = plan("p1", ("p1b", "p1"), "p2")
    state = SweepState(
        the_plan,
        (
            observation("1", "baseline", "B", Role.BASELINE, 0.0, [BASE] * 10),
            observation("2", "baseline-r2", "B", Role.BASELINE, 600.0, [BASE] * 10),
            observation("3", "evidence", "E", Role.EVIDENCE, 1200.0, [BASE] * 6),
            observation("4", "p1", "p1", Role.PROFILE, 1800.0, [BASE] * 10),
        ),
    )
    first = planner.decide(state, 2400.0)
    assert first == planner.decide(state, 2400.0)
    assert [type(a) for a in first] == [Share, Submit]
    assert planner.decide(state.with_share("p1b"), 2400.0) == first[1:]  # an acknowledged share is not repeated


@pytest.mark.parametrize("decide", [planner.decide, fixed.decide], ids=["adaptive", "fixed"])
def test_every_policy_ends_with_one_conclude(decide) -> None:  # type: ignore[no-untyped-def]
    result = drive(plan("p1", "p2"), decide, effects(p2=-20.0))
    assert len(result.of(Conclude)) == 1


def test_the_fixed_protocol_runs_every_item_once_to_the_end_in_list_order() -> None:
    the_plan = plan("p1", ("p1_again", "p1"), "slow", "p3")
    result = drive(the_plan, fixed.decide, effects(slow=-25.0, p3=6.0))
    assert result.submitted() == ["baseline", "baseline-r2", "evidence", "p1", "p1_again", "slow", "p3", "winner"]
    assert all(r.state is RunState.FINISHED and len(r.steady) == 10 for r in result.state.runs)
    assert not result.of(StopEarly) and not result.of(Share) and not result.of(Control) and not result.of(Repeat)
    assert result.conclusion.why is Conclusion.EXHAUSTED
    winner = next(a for a in result.of(Submit) if isinstance(a, Submit) and a.item == "winner")
    assert winner.source == "p3"


def test_a_win_found_inside_the_budgets_reserve_still_gets_its_confirming_run() -> None:
    # win's first run ends at 5350 s, 1850 s before the 2 h budget: inside the 1900 s reserve,
    # where no new candidate starts; an unconfirmed win is no recipe to profile, so its second
    # run goes ahead: the recipe's evidence run of it, which measures as a run of its settings.
    budget = Budget(queue_hours=2.0, reserve_s=1900.0)
    the_plan = plan("p0", "win", "p2", budget=budget)
    result = drive(the_plan, planner.decide, effects(win=20.0))
    confirming = [a for a in result.of(Submit) if a.item == "winner" and "confirming" in a.reason]
    assert confirming and confirming[0].source == "win"
    assert len(result.state.runs_of(the_plan.item("win").key)) == 2
    assert "p2" not in {r.item for r in result.state.runs}


def test_the_engine_queues_by_the_same_list_order_the_simulator_submits_by() -> None:
    # One fixed protocol: the engine's PlanOrder and the simulator's decide share in_list_order.
    the_plan = plan("p1", "slow", "p3")
    submitted = drive(the_plan, fixed.decide, effects(slow=-25.0)).submitted()
    names = [i.name for i in the_plan.items if i.role is not Role.WINNER_EVIDENCE]
    assert submitted[: len(names)] == list(fixed.in_list_order(names))
    assert list(fixed.in_list_order(names, after="p1")) == names[names.index("p1") + 1 :]
    assert list(fixed.in_list_order(names, done={"slow"})) == [n for n in names if n != "slow"]
    assert list(fixed.in_list_order(names, after="not listed")) == []
    specs = ["a", "b", "c"]  # PlanOrder reads only equality and order
    assert fixed.PlanOrder().next_runs("a", specs, list) == ("b", "c")  # type: ignore[arg-type]
    assert fixed.PlanOrder().next_runs("z", specs, list) == ()  # type: ignore[arg-type]


def _plain_runs(state: SweepState, item: str) -> int:
    return sum(r.item == item and r.role is Role.PROFILE and not r.state.active for r in state.runs)


def test_a_win_the_report_would_not_lock_runs_again_and_ends_the_search_once_the_lock_holds_it() -> None:
    # The board confirms `good` on two runs; the report's verdicts (the runs after its first on
    # their own, against the baselines' mean) lock it only from its third plain run.
    def report(state: SweepState) -> ReportView:
        return ReportView("good", locked=_plain_runs(state, "good") >= 3)

    result = drive(plan("p1", "good", "p3", "p4"), planner.decide, effects(good=20.0), report=report)
    waits = [a for a in result.of(Repeat) if "a win the report does not lock yet" in a.reason]
    assert waits and all(a.item == "good" for a in waits)
    assert result.conclusion.why is Conclusion.WIN and set(result.conclusion.skipped) == {"p3", "p4"}
    assert _plain_runs(result.state, "good") == 3


def test_a_win_the_report_never_locks_gets_one_run_beyond_the_cap_and_never_ends_the_search() -> None:
    cap = AdaptiveRules().repeat_cap
    result = drive(
        plan("p1", "good", "p3", "p4"), planner.decide, effects(good=20.0), report=lambda state: ReportView("good")
    )
    runs = [r for r in result.state.runs if r.key == "good"]  # its plain runs and its profiled run
    assert len(runs) == cap + 1
    assert {"p3", "p4"} <= {r.item for r in result.state.runs}  # the search went on
    assert result.conclusion.why is not Conclusion.WIN


def test_a_board_win_the_report_does_not_name_gets_no_extra_run() -> None:
    # The report names another recipe (unlocked): more runs of `good` would not lock it.
    result = drive(plan("p1", "good", "p3"), planner.decide, effects(good=20.0), report=lambda state: ReportView("p1"))
    assert not [a for a in result.of(Repeat) if "the report does not lock" in a.reason]


def test_a_win_the_report_never_names_ends_the_search_as_the_board_says() -> None:
    # restore_default is reported apart, never the lock's recipe: the
    # lock's silence on them holds nothing back.
    result = drive(
        plan("p1", "good", "p3"),
        planner.decide,
        effects(good=20.0),
        report=lambda state: ReportView(named=frozenset({"p1", "p3"})),
    )
    assert result.conclusion.why is Conclusion.WIN and "p3" in result.conclusion.skipped
    assert not [a for a in result.of(Repeat) if "does not lock" in a.reason]


def test_a_recipe_the_lock_lacks_only_a_control_for_gets_one() -> None:
    # The report names `good` and would lock it but for a control after its first run.
    def report(state: SweepState) -> ReportView:
        first = min(r.submitted_at for r in state.runs if r.item == "good") if _plain_runs(state, "good") else None
        bracketed = first is not None and any(
            r.role is Role.CONTROL and r.submitted_at > first and not r.state.active for r in state.runs
        )
        return ReportView("good", bracketed, unbracketed=first is not None and not bracketed)

    result = drive(plan("p1", "good", winner=False), planner.decide, effects(good=20.0), report=report)
    assert any("only once a control ran after its first run" in c.reason for c in result.of(Control))


def test_the_lock_s_control_is_never_asked_for_twice_in_a_row() -> None:
    # A report that stays unbracketed whatever runs (a control that fails, a store the report
    # cannot read): one control, then the sweep goes on and concludes.
    result = drive(
        plan("p1", "good", "p3"),
        planner.decide,
        effects(good=20.0),
        report=lambda state: ReportView("good", unbracketed=_plain_runs(state, "good") > 0),
    )
    assert [c for c in result.of(Control) if "only once a control ran" in c.reason]
    assert "control,control" not in ",".join(result.submitted())
    assert result.conclusion.why is not None
