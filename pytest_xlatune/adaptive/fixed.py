"""The fixed protocol, the one implementation the engine and the simulator share: every item once,
to the end, in list order — no controls, no repeats, no early stop, no sharing, no stop condition,
no budget. The engine queues runs by it (`PlanOrder`, the default of engine/choices.py's seam);
bench/replay.py and bench/orders.py drive it through the planner's interface (`decide`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TypeVar

from ..plan.expand import RunSpec
from ..results import JobResult
from .values import Action, Conclude, Conclusion, Role, Submit, SweepState

T = TypeVar("T")


def in_list_order(items: Sequence[T], after: T | None = None, done: Collection[T] = ()) -> Iterable[T]:
    """The protocol's one rule: the items after `after` (all of them for None; none when `after`
    is not listed), in list order, less those already `done`."""
    if after is not None and after not in items:
        return ()
    start = items.index(after) + 1 if after is not None else 0
    return (item for item in items[start:] if item not in done)


class PlanOrder:
    """The engine's fixed plan: the selected runs in collection order."""

    def next_runs(
        self, after: RunSpec, upcoming: Sequence[RunSpec], results: Callable[[], list[JobResult]]
    ) -> Sequence[RunSpec]:
        return tuple(in_list_order(upcoming, after))


def decide(state: SweepState, now: float) -> tuple[Action, ...]:
    """The next item in list order once nothing runs; the winner's evidence run last."""
    if state.active:
        return ()
    ran = {r.item for r in state.runs}
    names = [i.name for i in state.plan.items if i.role is not Role.WINNER_EVIDENCE]
    if (name := next(iter(in_list_order(names, done=ran)), None)) is not None:
        return (Submit(name, "fixed protocol: next item in list order"),)
    evidence = next((i for i in state.plan.items if i.role is Role.WINNER_EVIDENCE and i.name not in ran), None)
    best = max(
        (r for r in state.runs if r.role is Role.PROFILE and r.measured), key=lambda r: r.value or 0.0, default=None
    )
    if evidence is not None and best is not None:  # the winner, else the best run: its cost is the same
        return (Submit(evidence.name, "fixed protocol: the best run", source=best.item),)
    return (Conclude(Conclusion.EXHAUSTED, "fixed protocol: every item ran"),)
