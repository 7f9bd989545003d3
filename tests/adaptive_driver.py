"""A scripted engine for the adaptive planner's tests: plans with plain string keys, and a loop
that feeds decide() one steady step at a time with values the test chose (no randomness)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from pytest_xlatune.adaptive import (
    Action,
    AdaptiveRules,
    Conclude,
    Control,
    CrossCheck,
    Observation,
    Plan,
    PlanItem,
    Repeat,
    ReportView,
    Role,
    RunState,
    Share,
    StopEarly,
    Submit,
    SweepState,
)
from pytest_xlatune.adaptive.values import Budget, Key

A = TypeVar("A")

BASE = 1000.0
RUN_S = 600.0  # every scripted job: 100 s of start-up, then 10 steady steps of 50 s
STARTUP_S, STEP_S = 100.0, 50.0


def plan(
    *profiles: str | tuple[str, str],
    budget: Budget | None = None,
    rules: AdaptiveRules | None = None,
    winner: bool = True,
    other_tags: tuple[str, ...] = (),
    **thresholds: float,
) -> Plan:
    """baseline, baseline-r2, evidence, the profiles (a name, or (name, key) to share a key), winner."""
    from pytest_xlatune.cell.values import Thresholds

    items = [
        PlanItem("baseline", "B", Role.BASELINE),
        PlanItem("baseline-r2", "B", Role.BASELINE),
        PlanItem("evidence", "E", Role.EVIDENCE),
    ]
    for p in profiles:
        name, key = (p, p) if isinstance(p, str) else p
        items.append(PlanItem(name, key, Role.PROFILE, frozenset({f"--xla_{key.split('=')[0]}"}), 1))
    if winner:
        items.append(PlanItem("winner", "W", Role.WINNER_EVIDENCE))
    return Plan(
        tuple(items),
        Thresholds(**thresholds),
        rules or AdaptiveRules(),
        budget or Budget(queue_hours=None),  # type: ignore[arg-type]
        other_tags=other_tags,
    )


def observation(
    run: str,
    item: str,
    key: Key,
    role: Role,
    start: float,
    values: Sequence[float],
    state: RunState = RunState.FINISHED,
) -> Observation:
    end = start + RUN_S if state is not RunState.RUNNING else None
    return Observation(run, item, key, role, start, start, end, tuple(values), state, nodes=8)


def flat(tgs: float, n: int = 10, scatter: float = 0.002) -> tuple[float, ...]:
    """Steady steps around `tgs` with a small alternating scatter (a known in-job variance)."""
    return tuple(tgs * (1 + scatter * (-1) ** i) for i in range(n))


@dataclass
class Drive:
    """What a policy did over a whole scripted sweep."""

    state: SweepState
    actions: list[tuple[float, Action]] = field(default_factory=list)

    def of(self, kind: type[A]) -> list[A]:
        return [a for _, a in self.actions if isinstance(a, kind)]

    @property
    def conclusion(self) -> Conclude:
        return self.of(Conclude)[0]

    def submitted(self) -> list[str]:
        """Items in the order their runs started (controls as 'control')."""
        return [r.item if r.role is not Role.CONTROL else "control" for r in self.state.runs]


def drive(
    the_plan: Plan,
    decide: Callable[[SweepState, float], tuple[Action, ...]],
    tgs: Callable[[str, Role, int], float],
    limit: int = 500,
    regresses: Callable[[str, str], bool] = lambda item, tag: False,
    report: Callable[[SweepState], ReportView] | None = None,
) -> Drive:
    """Run `decide` to its Conclude; `tgs(item, role, run index)` is a run's steady level;
    `regresses(item, tag)`: whether a CrossCheck of `item` on `tag` finds a regression;
    `report(state)`: what the report's verdicts say (SweepState.report; None: nothing said)."""
    state, now, seq = SweepState(the_plan), 0.0, 0
    result = Drive(state)
    for _ in range(limit):
        if report is not None:
            state = replace(state, report=report(state))
        actions = decide(state, now)
        result.actions += [(now, a) for a in actions]
        running = [r for r in state.runs if r.state.active]
        for action in actions:
            if isinstance(action, Share):
                state = state.with_share(action.item)
            elif isinstance(action, StopEarly):
                run = next(r for r in running if r.run == action.run)
                state = state.with_run(
                    Observation(
                        run.run,
                        run.item,
                        run.key,
                        run.role,
                        run.submitted_at,
                        run.started_at,
                        now,
                        run.steady,
                        RunState.STOPPED,
                        run.nodes,
                    )
                )
            elif isinstance(action, Conclude):
                result.state = state
                return result
            elif isinstance(action, CrossCheck):  # a finished check (its run is not the plan's)
                state = replace(
                    state,
                    checked=state.checked | {(action.item, action.config_tag)},
                    regressing=state.regressing
                    | ({action.item} if regresses(action.item, action.config_tag) else set()),
                )
            else:
                seq += 1
                state = state.with_run(_start(the_plan, state, action, now, seq))
        running = [r for r in state.runs if r.state.active]
        if not running:
            if not any(isinstance(a, (StopEarly, CrossCheck)) for a in actions):
                raise AssertionError(f"stalled at {now}: {actions}")
            continue
        run = running[0]
        index = sum(1 for r in state.runs if r.key == run.key and r.run < run.run)
        measured = next((i.name for i in the_plan.items if i.key == run.key and i.role is Role.PROFILE), run.item)
        level = tgs(measured if run.role is Role.WINNER_EVIDENCE else run.item, run.role, index)
        steps = len(run.steady) + 1
        now = (run.started_at or now) + STARTUP_S + steps * STEP_S
        values = flat(level)[:steps]
        done = steps == the_plan.steady_steps
        state = state.with_run(
            Observation(
                run.run,
                run.item,
                run.key,
                run.role,
                run.submitted_at,
                run.started_at,
                now if done else None,
                values,
                RunState.FINISHED if done else RunState.RUNNING,
                run.nodes,
            )
        )
    raise AssertionError("no Conclude within the limit")


def _start(the_plan: Plan, state: SweepState, action: Action, now: float, seq: int) -> Observation:
    if isinstance(action, Control):
        item, role = the_plan.baseline, Role.CONTROL
    elif isinstance(action, Repeat):
        item, role = the_plan.item(action.item), Role.PROFILE
    else:
        assert isinstance(action, Submit), action
        item = the_plan.item(action.item)
        role = item.role
    # The winner's evidence run measures its source's settings (as bench/replay.py and the
    # engine's driver key it); without a source, a key of its own.
    source = action.source if isinstance(action, Submit) else ""
    key = f"{item.key}" if role is not Role.WINNER_EVIDENCE else the_plan.item(source).key if source else "W"
    return Observation(f"{seq:03d}", item.name, key, role, now, now, None, (), RunState.RUNNING, 8)
