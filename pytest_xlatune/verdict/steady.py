"""Steady-state throughput of one run from its step records (pure): Tokens/s/device as MaxText
printed it, or derived from the step time when the MaxText era printed none."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeGuard

from ..triage.lines import StepRecord

# maxtext-slurm's profiler captures steps 5-7 and dumps at step 8, a massive outlier.
PROFILER_LAST_STEP = 8
# A step timed before its work ended (asynchronous dispatch: MaxText's maxtest guide shows `seconds:
# 0.002, … Tokens/s/device: 19907654.921` between steps of 12.444 s and 11.715 s) measured no
# throughput: a step more than MISTIMED_RATIO times faster than the window's slower half is left
# out. Its neighbour that absorbed its time stays, so the mean errs a little low, never 1000x high.
# 50x: far beyond what load does to real steps (a busy machine slows steps 2-5x), so a window
# whose steps a hog slowed is kept whole, its spread judged by the noise checks.
MISTIMED_RATIO = 50.0


@dataclass(frozen=True)
class SteadyState:
    """Steady-state throughput of one run."""

    tgs: float | None  # mean Tokens/s/device; None: no Tokens/s/device and no tokens per step known
    step_seconds: float | None  # mean `seconds:`; None when the MaxText era prints none
    last_loss: float | None  # of the highest step that printed one, inside the window or not
    steps_used: tuple[int, ...]
    tgs_values: tuple[float, ...]  # per step, for confidence intervals
    derived: bool = False  # tgs is tokens per device per step / step seconds, not MaxText's figure
    mistimed: tuple[int, ...] = ()  # steps of the window left out: timed before their work ended


def last_loss(steps: Mapping[int, StepRecord]) -> float | None:
    """The loss of the highest step that printed one."""
    return next((steps[s].loss for s in sorted(steps, reverse=True) if steps[s].loss is not None), None)


def _finite(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def steady_state(
    steps: Mapping[int, StepRecord],
    *,
    profiler_on: bool,
    first: int = 5,
    last: int = 14,
    tokens_per_step: float | None = None,
) -> SteadyState | None:
    """Average Tokens/s/device and step time over steps 5-14, or 9-14 when the profiler ran.

    A MaxText era without Tokens/s/device still gives the mean step time, and a TGS derived
    from `tokens_per_step` (tokens per device per step: pdbs x sequence length) when known.
    """
    lo = max(first, PROFILER_LAST_STEP + 1) if profiler_on else first
    window = [steps[step] for step in sorted(steps) if lo <= step <= last]
    mistimed = _mistimed(window)
    window = [rec for rec in window if rec.step not in mistimed]
    measured = [rec for rec in window if _finite(rec.tokens_per_s)]
    timed = [rec for rec in window if _finite(rec.seconds) and (rec.seconds or 0) > 0]
    derived = not measured and bool(tokens_per_step) and bool(timed)
    used = measured or timed
    if not used:
        return None
    if measured:
        values = tuple(float(rec.tokens_per_s or 0.0) for rec in measured)
    elif derived:
        values = tuple(float(tokens_per_step or 0.0) / float(rec.seconds or 1.0) for rec in timed)
    else:
        values = ()
    return SteadyState(
        tgs=_mean(list(values)),
        step_seconds=_mean([float(rec.seconds) for rec in used if _finite(rec.seconds)]),
        last_loss=last_loss(steps),
        steps_used=tuple(rec.step for rec in used),
        tgs_values=values,
        derived=derived,
        mistimed=tuple(sorted(mistimed)),
    )


def _mistimed(window: list[StepRecord]) -> set[int]:
    """The steps far faster than the window's slower half (MISTIMED_RATIO): by step time where the
    lines print one, by Tokens/s/device where they print that."""
    seconds = sorted(float(rec.seconds or 0.0) for rec in window if _finite(rec.seconds) and (rec.seconds or 0) > 0)
    rates = sorted(float(rec.tokens_per_s or 0.0) for rec in window if _finite(rec.tokens_per_s))
    slow_seconds = seconds[len(seconds) // 2] if len(seconds) > 1 else None  # the upper median
    slow_rate = rates[(len(rates) - 1) // 2] if len(rates) > 1 else None  # the lower median
    return {
        rec.step
        for rec in window
        if (slow_seconds is not None and _finite(rec.seconds) and 0 < rec.seconds * MISTIMED_RATIO < slow_seconds)
        or (slow_rate is not None and _finite(rec.tokens_per_s) and rec.tokens_per_s > MISTIMED_RATIO * slow_rate > 0)
    }
