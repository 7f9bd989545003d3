"""Where the per-cell loop asks which runs come next: the seam an adaptive sweep replaces."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..plan.expand import RunSpec
from ..results import JobResult


class SweepChoices(Protocol):
    """The choices of a sweep that are policy, not mechanics (the plan order is the default)."""

    def next_runs(self, after: RunSpec, upcoming: Sequence[RunSpec],
                  results: Callable[[], list[JobResult]]) -> Sequence[RunSpec]:
        """The runs to queue after `after`, in order, from the selected ones (`results()`: the
        cell's current results, read only when a choice needs them)."""
        ...


class PlanOrder:
    """The fixed plan: the selected runs in collection order."""

    def next_runs(self, after: RunSpec, upcoming: Sequence[RunSpec],
                  results: Callable[[], list[JobResult]]) -> Sequence[RunSpec]:
        return upcoming[upcoming.index(after) + 1:] if after in upcoming else ()
