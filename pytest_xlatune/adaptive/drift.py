"""The drift model (pure): the baseline's level at any time of the sweep, from its interleaved
controls, and whether the controls moved beyond the run-to-run noise.

A control point is one control run, or several run back to back (the wave-1 pair), at the mean
log TGS of its runs. The baseline's level is modelled as a random walk observed through the
points with the run-to-run noise, and a run is compared with the best linear unbiased estimate
of the level at its own time (kriging with the random walk's covariance). With noiseless points
that estimate is the straight line between the two controls bracketing the run (and the last
control's level after it); with noisy points it is a local weighted mean of the controls nearest
in time, narrower the faster the level walks. Its error variance — the points' noise and the
walk between them — is part of every verdict's interval. The walk's rate is the policy's prior
unless successive points differ beyond the noise (χ²), then the excess they show.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as _st

from ..verdict.stats import PRIOR_REJECT_CONFIDENCE
from .values import Observation, Role

HOUR = 3600.0


@dataclass(frozen=True)
class Point:
    """Controls run back to back: their mean log TGS at their mean time."""

    time: float
    level: float
    runs: tuple[str, ...]

    @property
    def n(self) -> int:
        return len(self.runs)


def points(runs: Sequence[Observation], now: float) -> tuple[Point, ...]:
    """The control points of these runs: measured controls in time order, merged while no
    measured candidate run lies between them."""
    measured = sorted(
        (r for r in runs if r.measured and r.role is not Role.EVIDENCE and r.role is not Role.WINNER_EVIDENCE),
        key=lambda r: r.midpoint(now),
    )
    groups: list[list[Observation]] = []
    previous_was_control = False
    for run in measured:
        if run.role.is_control:
            if previous_was_control:
                groups[-1].append(run)
            else:
                groups.append([run])
        previous_was_control = run.role.is_control
    return tuple(
        Point(
            sum(r.midpoint(now) for r in g) / len(g),
            sum(math.log(r.value or 1.0) for r in g) / len(g),
            tuple(r.run for r in g),
        )
        for g in groups
    )


def prior_rate(pct_per_sqrt_h: float) -> float:
    """A drift of `pct_per_sqrt_h` % per √hour as a variance rate (log² per second)."""
    return (pct_per_sqrt_h / 100) ** 2 / HOUR


def rate(pts: Sequence[Point], cv_pct: float, floor: float) -> float:
    """The random-walk variance rate of the level: the prior (`floor`) unless the successive
    points differ beyond the noise (χ² at PRIOR_REJECT_CONFIDENCE, as stats.pooled_noise treats
    its prior), then their excess variance per second."""
    noise = (cv_pct / 100) ** 2
    pairs = [
        (b.level - a.level, noise * (1 / a.n + 1 / b.n), max(b.time - a.time, 1.0)) for a, b in itertools.pairwise(pts)
    ]
    if not pairs or noise <= 0:
        return floor
    statistic = sum(d**2 / var for d, var, _ in pairs)
    if statistic <= float(_st.chi2.ppf(PRIOR_REJECT_CONFIDENCE, len(pairs))):
        return floor
    excess = sum(d**2 - var for d, var, _ in pairs)  # summed first: per-pair clipping counts noise as drift
    return max(floor, excess / sum(span for _, _, span in pairs))


@dataclass(frozen=True)
class Model:
    """The baseline's level over time: control points, a walk rate (log² per second) and the
    run-to-run noise (a fraction)."""

    points: tuple[Point, ...]
    walk_rate: float
    cv: float

    @functools.cached_property
    def _system(self) -> tuple[npt.NDArray[np.float64], ...]:
        times = np.array([p.time for p in self.points])
        cov = self.walk_rate * np.minimum.outer(times, times)
        noise = np.diag([self.cv**2 / p.n for p in self.points])
        size = len(self.points)
        system = np.zeros((size + 1, size + 1))
        system[:size, :size] = cov + noise
        system[:size, size] = system[size, :size] = 1.0  # the weights sum to 1: no bias, any start level
        return times, system, np.array([p.level for p in self.points]), cov + noise

    def reference(self, times: Sequence[float]) -> tuple[list[float], float] | None:
        """The level at each of `times`, and the variance of the error of their mean (the
        points' noise and the walk, correlated across the times); None without a point."""
        if not self.points or not times:
            return None
        grid, system, levels, total = self._system
        targets = np.asarray(times, dtype=float)
        cross = self.walk_rate * np.minimum.outer(grid, targets)
        weights = np.linalg.solve(system, np.vstack([cross, np.ones(len(targets))]))[: len(grid)]
        mean = weights.mean(axis=1)
        var = (
            mean @ total @ mean
            - 2 * mean @ cross.mean(axis=1)
            + self.walk_rate * float(np.minimum.outer(targets, targets).mean())
        )
        return [float(v) for v in weights.T @ levels], max(0.0, float(var))


@dataclass(frozen=True)
class DriftReport:
    """How far the controls moved over the sweep, and whether that is beyond the noise."""

    points: tuple[Point, ...]
    range_pct: float  # highest point vs lowest, in %
    p_value: float  # of "the controls differ by the run-to-run noise alone" (χ²)
    cv_pct: float

    @property
    def significant(self) -> bool:
        return self.p_value < 1 - PRIOR_REJECT_CONFIDENCE

    def text(self) -> str:
        if len(self.points) < 2:
            return "drift: not measured (fewer than two control points)"
        levels = " → ".join(f"{math.exp(p.level):.1f}" for p in self.points)
        verdict = "beyond" if self.significant else "within"
        return (
            f"drift: the controls moved {self.range_pct:.2f} % over the sweep ({levels} TGS, each point "
            "the geometric mean of its runs), "
            f"{verdict} the noise of back-to-back baseline runs, {self.cv_pct:.2f} % (p = {self.p_value:.3g}; "
            "the verdicts' intervals use the noise pooled over every group of identical settings)"
        )


def report(pts: Sequence[Point], cv_pct: float) -> DriftReport:
    """χ² test of the control points against one constant level under the run-to-run noise."""
    if len(pts) < 2 or cv_pct <= 0:
        return DriftReport(tuple(pts), 0.0, 1.0, cv_pct)
    total = sum(p.n for p in pts)
    mean = sum(p.n * p.level for p in pts) / total
    statistic = sum(p.n * (p.level - mean) ** 2 for p in pts) / (cv_pct / 100) ** 2
    levels = [p.level for p in pts]
    return DriftReport(
        tuple(pts), math.expm1(max(levels) - min(levels)) * 100, float(_st.chi2.sf(statistic, len(pts) - 1)), cv_pct
    )
