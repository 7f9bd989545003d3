"""The numerics guard (pure): a run's loss trajectory against its baseline's, step by step.

Synthetic data is deterministic, so a flag that only reorders floating-point work (an
optimisation level, a combiner threshold, a scheduler) leaves the loss a job prints within a
few rounding steps of the baseline's, while a knob that changes what the model computes (a
dtype, a quantization mode, a broken pass) moves it well beyond. A run departs at the first
step where |Δ loss| > abs + rel·|baseline loss| (DEFAULT_TOLERANCE, measured with
`bench/numerics.py`; docs/explanation/verdicts.md; `abs` widens to 4× the baseline
repeats' own largest disagreement when they wander more than that); a run is `numerics changed` when it
departs from every baseline repeat it can be compared with. Every loss field of the step line
(`loss` and the extra `*_loss` fields) is checked.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

Trajectory = tuple[tuple[int, float], ...]  # (step, loss), steps ascending
MAIN = "loss"
MIN_STEPS = 3  # fewer common steps than this say nothing about a trajectory
REPEAT_MARGIN = 4.0  # the line is at least this many times the baseline repeats' own spread


class Numerics(Enum):
    """What the guard says about a run's loss trajectory."""

    SAME = "same"
    CHANGED = "changed"
    UNKNOWN = "unknown"  # no baseline trajectory, or too few common steps


class Mode(Enum):
    """What a `numerics changed` run may still be: never the recipe (fail) or a warned one."""

    FAIL = "fail"
    WARN = "warn"


@dataclass(frozen=True)
class Tolerance:
    """How far a loss may move before the run counts as computing something else."""

    abs: float
    rel: float

    def limit(self, reference: float) -> float:
        return self.abs + self.rel * abs(reference)

    @property
    def text(self) -> str:
        return f"{self.abs:g}" + (f" + {self.rel * 100:g} % of the loss" if self.rel else "")


# From bench/numerics.py on the demo model (docs/explanation/verdicts.md): identical settings and seven reordering-only
# flags moved no printed loss (3 decimals) at any of 15 steps, 2 runs each — at full precision by
# at most 4.8e-7 (-O1/-O2), so rounding can show at most 0.001 — while bfloat16 compute moved it
# by 0.006 at step 2 (5.8e-3 unrounded). The line sits at 3 units of the printed last digit.
DEFAULT_TOLERANCE = Tolerance(abs=0.003, rel=0.0)


@dataclass(frozen=True)
class Check:
    """One run's loss trajectories against one reference run's."""

    verdict: Numerics
    steps_compared: int
    max_abs: float  # largest |Δ loss| over the common steps of every loss field
    field: str = MAIN  # the loss field that departed first (or the main one)
    at_step: int | None = None  # the first step beyond the tolerance
    loss: float | None = None  # this run's loss at that step
    reference_loss: float | None = None
    reference_job: str = ""

    def where(self) -> str:
        """'loss left the baseline's at step 2: 6.012 vs 5.975, baseline job 7', or ''."""
        if self.verdict is not Numerics.CHANGED or self.at_step is None:
            return ""
        job = f", baseline job {self.reference_job}" if self.reference_job else ""
        return (
            f"{self.field} left the baseline's at step {self.at_step}: {_fmt(self.loss)} vs "
            f"{_fmt(self.reference_loss)}{job}"
        )


class _Step(Protocol):
    @property
    def loss(self) -> float | None: ...
    @property
    def extra(self) -> tuple[tuple[str, float], ...]: ...


def trajectories(steps: Mapping[int, _Step]) -> tuple[Trajectory, tuple[tuple[str, Trajectory], ...]]:
    """The main loss and each extra `*loss` field of a job's step lines, by step."""
    main = tuple((n, float(s.loss)) for n, s in sorted(steps.items()) if s.loss is not None)
    extra: dict[str, list[tuple[int, float]]] = {}
    for n, s in sorted(steps.items()):
        for name, value in getattr(s, "extra", ()):
            if name.endswith("loss") and name != MAIN:
                extra.setdefault(name, []).append((n, float(value)))
    return main, tuple((name, tuple(values)) for name, values in extra.items())


def compare(
    losses: Mapping[str, Trajectory],
    reference: Mapping[str, Trajectory],
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    reference_job: str = "",
) -> Check:
    """Step by step over every loss field both runs printed; the earliest departure wins."""
    compared, worst, first = 0, 0.0, None
    for name in sorted(set(losses) & set(reference), key=lambda n: (n != MAIN, n)):
        mine, theirs = dict(losses[name]), dict(reference[name])
        common = sorted(set(mine) & set(theirs))
        if name == MAIN:
            compared = len(common)
        for step in common:
            a, b = mine[step], theirs[step]
            if math.isnan(a) and math.isnan(b):
                continue
            delta = math.inf if not (math.isfinite(a) and math.isfinite(b)) else abs(a - b)
            worst = max(worst, delta)
            if delta > tolerance.limit(b) and (first is None or step < first[1]):
                first = (name, step, a, b)
            if first is not None and first[0] == name:
                break
    if first is not None:
        name, step, a, b = first
        return Check(Numerics.CHANGED, compared, worst, name, step, a, b, reference_job)
    verdict = Numerics.SAME if compared >= MIN_STEPS else Numerics.UNKNOWN
    return Check(verdict, compared, worst, reference_job=reference_job)


def guard(
    losses: Mapping[str, Trajectory],
    references: Sequence[tuple[str, Mapping[str, Trajectory]]],
    tolerance: Tolerance = DEFAULT_TOLERANCE,
) -> Check:
    """Against every reference run (job id, losses): changed only when it departs from all of
    them (a baseline repeat that itself wandered cannot condemn a run); the closest check else."""
    checks = [compare(losses, ref, tolerance, job) for job, ref in references if ref.get(MAIN)]
    if not checks or not losses.get(MAIN):
        return Check(Numerics.UNKNOWN, 0, 0.0)
    same = [c for c in checks if c.verdict is Numerics.SAME]
    if same:
        return min(same, key=lambda c: c.max_abs)
    changed = [c for c in checks if c.verdict is Numerics.CHANGED]
    if len(changed) == len(checks):
        return max(changed, key=lambda c: (c.at_step or 0, -c.max_abs))  # the latest departure
    return Check(Numerics.UNKNOWN, max(c.steps_compared for c in checks), min(c.max_abs for c in checks))


def widened(tolerance: Tolerance, references: Sequence[tuple[str, Mapping[str, Trajectory]]]) -> Tolerance:
    """The tolerance, or REPEAT_MARGIN × the largest disagreement of the baseline repeats among
    themselves when that is larger: a cluster whose identical runs wander is not held to a
    tighter line than its own repeats meet."""
    spread = agreement(references, tolerance)
    if spread is None or not math.isfinite(spread.max_abs):
        return tolerance
    return Tolerance(max(tolerance.abs, REPEAT_MARGIN * spread.max_abs), tolerance.rel)


def agreement(
    references: Iterable[tuple[str, Mapping[str, Trajectory]]], tolerance: Tolerance = DEFAULT_TOLERANCE
) -> Check | None:
    """Whether the baseline repeats agree with the first one (None: fewer than two)."""
    refs = [(job, ref) for job, ref in references if ref.get(MAIN)]
    if len(refs) < 2:
        return None
    checks = [compare(ref, refs[0][1], tolerance, refs[0][0]) for _, ref in refs[1:]]
    return max(checks, key=lambda c: (c.verdict is Numerics.CHANGED, c.max_abs))


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"
