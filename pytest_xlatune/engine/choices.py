"""Where the per-cell loop asks which runs come next: the seam an adaptive sweep replaces. The
default, the fixed protocol's plan order, lives with the simulator's in adaptive/fixed.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..plan.expand import RunSpec
from ..results import JobResult


class SweepChoices(Protocol):
    """The choices of a sweep that are policy, not mechanics (the plan order is the default)."""

    def next_runs(
        self, after: RunSpec, upcoming: Sequence[RunSpec], results: Callable[[], list[JobResult]]
    ) -> Sequence[RunSpec]:
        """The runs to queue after `after`, in order, from the selected ones (`results()`: the
        cell's current results, read only when a choice needs them)."""
        ...
