"""Change points in a recipe's TGS history (pure), as continuous-benchmarking tools mark them.

The test, stated once: at every split of the series that leaves at least `min_size` (2) points on
each side, a two-sided Welch two-sample t-test of the mean before against the mean after; the
split with the smallest p-value is a change point when that p-value, Bonferroni-corrected by the
number of splits tested, is below `alpha` (0.05). Binary segmentation then searches each side
the same way. Two sides without scatter are a change point when their means differ (p = 0) and
none when they are equal (p = 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats as scipy_stats

ALPHA = 0.05
MIN_SIZE = 2
TEST = (
    "two-sided Welch t-test at every split (at least 2 points a side), Bonferroni-corrected "
    "by the number of splits, alpha 0.05, binary segmentation"
)


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first point after the change
    before: float  # mean of the segment before
    after: float  # mean of the segment after
    p_value: float  # the smallest split's p-value
    corrected_p: float  # times the number of splits tested (capped at 1)

    @property
    def delta_pct(self) -> float:
        return (self.after / self.before - 1.0) * 100.0 if self.before else math.nan


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t-test (no scatter on either side: 0 if the means differ)."""
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    var_a = sum((x - mean_a) ** 2 for x in a) / (len(a) - 1)
    var_b = sum((x - mean_b) ** 2 for x in b) / (len(b) - 1)
    se2 = var_a / len(a) + var_b / len(b)
    if se2 <= 0:
        return 1.0 if math.isclose(mean_a, mean_b) else 0.0
    t = (mean_a - mean_b) / math.sqrt(se2)
    df = se2**2 / ((var_a / len(a)) ** 2 / (len(a) - 1) + (var_b / len(b)) ** 2 / (len(b) - 1))
    return float(2 * scipy_stats.t.sf(abs(t), df))


def _best_split(values: Sequence[float], min_size: int) -> tuple[int, float, int] | None:
    splits = range(min_size, len(values) - min_size + 1)
    if not splits:
        return None
    scored = [(welch_p(values[:k], values[k:]), k) for k in splits]
    p, k = min(scored)
    return k, p, len(scored)


def change_points(
    values: Sequence[float], alpha: float = ALPHA, min_size: int = MIN_SIZE, offset: int = 0
) -> list[ChangePoint]:
    """The change points of `values` in order (see the module's test); nan values are skipped by
    the caller, not here."""
    found = _best_split(values, min_size)
    if found is None:
        return []
    k, p, tested = found
    corrected = min(1.0, p * tested)
    if corrected >= alpha:
        return []
    before, after = values[:k], values[k:]
    point = ChangePoint(offset + k, sum(before) / len(before), sum(after) / len(after), p, corrected)
    return [*change_points(before, alpha, min_size, offset), point, *change_points(after, alpha, min_size, offset + k)]
