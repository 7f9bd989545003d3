"""adaptive.values: the seam's values refuse bad input with a clear message and account time and node-hours."""

from __future__ import annotations

import math

import pytest

from pytest_xlatune.adaptive import AdaptiveRules, Budget, Plan, PlanItem, Role, RunState, SweepState
from tests.adaptive_driver import observation, plan


def test_a_plan_needs_unique_names_and_a_baseline() -> None:
    with pytest.raises(ValueError, match="item names must be unique, found p twice"):
        Plan(
            (
                PlanItem("baseline", "B", Role.BASELINE),
                PlanItem("p", "1", Role.PROFILE),
                PlanItem("p", "2", Role.PROFILE),
            )
        )
    with pytest.raises(ValueError, match="expected at least one baseline item, found none"):
        Plan((PlanItem("p", "1", Role.PROFILE),))


@pytest.mark.parametrize("field, value", [("confidence", 1.0), ("stop_confidence", 0.0), ("interest_confidence", -1)])
def test_adaptive_rules_probabilities_are_checked(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"AdaptiveRules.{field}: expected a probability in \\(0, 1\\), found {value}"):
        AdaptiveRules(**{field: value})  # type: ignore[arg-type]


def test_adaptive_rules_counts_are_checked() -> None:
    with pytest.raises(ValueError, match="min_steady >= 2"):
        AdaptiveRules(min_steady=1)
    for early in (0, 3):
        with pytest.raises(ValueError, match=f"futility_from from 1 to min_steady, found .*futility_from={early}"):
            AdaptiveRules(futility_from=early)
    assert AdaptiveRules(futility_from=2).futility_from == 2  # the old first look, still allowed


@pytest.mark.parametrize("value", [0.0, -1.0, math.nan, math.inf])
def test_budget_hours_are_checked(value: float) -> None:
    with pytest.raises(ValueError, match=f"Budget.queue_hours: expected hours > 0 or None, found {value}"):
        Budget(queue_hours=value)


def test_the_budget_counts_queue_time_and_node_hours() -> None:
    state = SweepState(plan("p"), (observation("1", "baseline", "B", Role.BASELINE, 0.0, [1.0] * 10),), started_at=0.0)
    assert Budget(queue_hours=1.0).left(state, 1000.0) == pytest.approx(2600.0)
    assert Budget(queue_hours=None).left(state, 1e9) == math.inf
    # 8 nodes × 600 s = 4800 node-seconds spent of 8 node-hours: (28800 - 4800) / 8 wall seconds left
    assert Budget(queue_hours=None, node_hours=8.0).left(state, 1000.0) == pytest.approx(3000.0)


def test_an_observation_accounts_only_its_run_time() -> None:
    run = observation("1", "p", "p", Role.PROFILE, 100.0, [10.0, 20.0], RunState.RUNNING)
    assert run.value == 15.0 and not run.measured
    assert run.node_seconds(400.0) == 8 * 300.0 and run.midpoint(400.0) == 250.0
    queued = observation("2", "p", "p", Role.PROFILE, 0.0, [], RunState.PENDING)
    assert queued.value is None


def test_a_newer_view_of_a_run_replaces_it_in_place() -> None:
    state = SweepState(plan("p"))
    first = observation("1", "p", "p", Role.PROFILE, 0.0, [1.0], RunState.RUNNING)
    later = observation("1", "p", "p", Role.PROFILE, 0.0, [1.0, 2.0], RunState.RUNNING)
    other = observation("2", "p", "p", Role.PROFILE, 0.0, [], RunState.PENDING)
    state = state.with_run(first).with_run(other).with_run(later)
    assert [r.run for r in state.runs] == ["1", "2"] and state.runs[0].steady == (1.0, 2.0)
    assert state.active == state.runs


@pytest.mark.parametrize(
    "role, stoppable",
    [
        (Role.PROFILE, True),
        (Role.BASELINE, False),
        (Role.CONTROL, False),
        (Role.EVIDENCE, False),
        (Role.WINNER_EVIDENCE, False),
    ],
)
def test_only_candidate_runs_are_stoppable(role: Role, stoppable: bool) -> None:
    assert role.stoppable is stoppable
