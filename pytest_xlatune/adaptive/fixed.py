"""The fixed protocol through the planner's interface (pure): every item once, to the end, in list
order — no controls, no repeats, no early stop, no sharing, no stop condition, no budget."""

from __future__ import annotations

from .model import Action, Conclude, Conclusion, Role, Submit, SweepState


def decide(state: SweepState, now: float) -> tuple[Action, ...]:
    """The next item in list order once nothing runs; the winner's evidence run last."""
    if state.active:
        return ()
    ran = {r.item for r in state.runs}
    for item in state.plan.items:
        if item.role is not Role.WINNER_EVIDENCE and item.name not in ran:
            return (Submit(item.name, "fixed protocol: next item in list order"),)
    evidence = next((i for i in state.plan.items if i.role is Role.WINNER_EVIDENCE and i.name not in ran), None)
    best = max((r for r in state.runs if r.role is Role.PROFILE and r.measured),
               key=lambda r: r.value or 0.0, default=None)
    if evidence is not None and best is not None:  # the winner, else the best run: its cost is the same
        return (Submit(evidence.name, "fixed protocol: the best run with the profiler", source=best.item),)
    return (Conclude(Conclusion.EXHAUSTED, "fixed protocol: every item ran"),)
