"""Steady-state estimates and noise-aware verdicts (pure); the noise is verdict/noise.py.

A run's steady value is the mean of its steady steps; the unit of evidence is the run, not the step.
Run-to-run noise (`Noise`, verdict/noise.py) is a CV pooled over groups of identical settings.
A comparison takes the ratio of the candidate and baseline run means; each side has its own
variance, max(pooled CV², its own runs' CV²)/n (a profile noisier than the baseline gets a wider
interval), and the Student-t interval on log(ratio) uses the Welch–Satterthwaite degrees of
freedom. A candidate whose own runs disagree beyond the noise of the other groups (F test at 99 %)
is `unstable`: never better. See docs/explanation/noise.md.
A regression gate FAILs only when the whole interval is past the tolerance, PASSes when none of it
is, and is AMBIGUOUS otherwise; the caller then re-measures the candidate and, if still ambiguous,
FAILs when the probability that the regression exceeds the tolerance is at least 80 %.
Consecutive steps are autocorrelated, so a job's own standard error is inflated by the AR(1)
factor √((1+r)/(1−r)), r the lag-1 autocorrelation clipped to [0, 0.8]; within-job scatter
describes one job only and never stands in for run-to-run noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
import numpy.typing as npt
from scipy import stats as _st

from .noise import (
    DEFAULT_PRIOR_CV_PCT,
    DEFAULT_PRIOR_DF,
    PRIOR_REJECT_CONFIDENCE,
    Noise,
    check_confidence,
    detectable_effect,
    disagree,
    finite_positive,
    floored,
    outlier,
    pooled_noise,
    run_noise,
    runs_to_detect,
    without,
)

# The noise model's names stay readable as stats.X (verdict/verdicts.py, adaptive/, report/ call
# them so): the comparison and the noise it is judged against are read together.
__all__ = [
    "DEFAULT_FAIL_PROBABILITY",
    "DEFAULT_PRIOR_CV_PCT",
    "DEFAULT_PRIOR_DF",
    "NO_SPREAD",
    "PRIOR_REJECT_CONFIDENCE",
    "Comparison",
    "Direction",
    "GateDecision",
    "JobEstimate",
    "Noise",
    "Spread",
    "compare",
    "decide_after_remeasure",
    "decide_final",
    "detectable_effect",
    "direction",
    "disagree",
    "floored",
    "job_estimate",
    "outlier",
    "pooled_noise",
    "regression_check",
    "regression_probability",
    "run_noise",
    "runs_to_detect",
    "too_noisy",
    "welch",
    "without",
    "words",
]

DEFAULT_FAIL_PROBABILITY = 0.8  # still ambiguous after re-measuring: FAIL at ≥ 80 % odds
_MAX_AUTOCORR = 0.8  # caps the SE inflation at 3×: r from 6-10 steps is itself very noisy
_ON_THE_LINE = 1e-9  # percentage points: 990 vs 1000 is exactly -1 % despite float round-off


class Direction(Enum):
    """Whether a candidate is better than its baseline beyond the run-to-run noise."""

    BETTER = "better"
    WORSE = "worse"
    WITHIN_NOISE = "within_noise"


class GateDecision(Enum):
    """The outcome of a regression gate."""

    PASS = "pass"
    FAIL = "fail"
    AMBIGUOUS = "ambiguous"


@dataclass(frozen=True)
class JobEstimate:
    """One job's steady-state mean and its within-job uncertainty."""

    mean: float
    stderr: float  # inf when n == 1: one step says nothing about scatter
    n: int
    autocorr: float  # lag-1 autocorrelation used for the inflation, after clipping
    ci_low: float
    ci_high: float
    confidence: float


@dataclass(frozen=True)
class Comparison:
    """Candidate vs baseline: Δ % of the means and its interval under run-to-run noise."""

    delta_pct: float
    ci_low_pct: float
    ci_high_pct: float
    confidence: float
    verdict: Direction
    candidate_mean: float
    baseline_mean: float
    n_candidate: int
    n_baseline: int
    higher_is_better: bool
    unstable: bool = False  # the candidate's runs disagree beyond the noise: never a win
    not_applied: bool = False  # a requested library setting left no trace: never a win, never "within noise"
    # what widens the interval most, in words (`baselines differ by 150 %`): a `too_noisy` one's why
    noise_note: str = ""


def job_estimate(tgs_values: Sequence[float], confidence: float = 0.95) -> JobEstimate:
    """Estimate one job's steady mean from its per-step values (e.g. TGS of steps 5-14)."""
    check_confidence(confidence)
    x = finite_positive(tgs_values, "job_estimate")
    n, mean = x.size, float(x.mean())
    if n == 1:
        return JobEstimate(mean, math.inf, 1, 0.0, -math.inf, math.inf, confidence)
    centred = x - mean
    ss = float(centred @ centred)
    r = 0.0
    if n >= 3 and ss > 0.0:
        r = min(max(float(centred[:-1] @ centred[1:]) / ss, 0.0), _MAX_AUTOCORR)
    stderr = math.sqrt(ss / (n - 1) / n * (1 + r) / (1 - r))
    half = float(_st.t.ppf((1 + confidence) / 2, n - 1)) * stderr
    return JobEstimate(mean, stderr, n, r, mean - half, mean + half, confidence)


# How each side's variance is worded when it is the one that widens an interval most.
_SIDE_WORDS = {
    "candidate": ("its runs differ by {:.0f} %", "its steps shifted within its run (±{:.1f} % on its mean)"),
    "baseline": ("baselines differ by {:.0f} %", "the baselines' steps shifted within their runs (±{:.1f} %)"),
}


def _side(values: npt.NDArray[np.float64], noise: Noise, spread: Spread, side: str) -> tuple[float, float, str]:
    """One side's variance of log(mean), its degrees of freedom and what sets it, in words ("": the
    pooled noise of other runs): the pooled CV², or the side's own when its runs spread more (then
    with n − 1 degrees of freedom; `Spread.witnesses` count in that spread), and never below
    `Spread.step_var`, what their own steps show."""
    both = np.concatenate([values, finite_positive(spread.witnesses, "witnesses")]) if spread.witnesses else values
    own = float(both.std(ddof=1) / both.mean()) if both.size >= 2 else 0.0
    pooled = noise.cv_pct / 100
    runs, steps = _SIDE_WORDS[side]
    differ = runs.format(float(both.max() / both.min() - 1) * 100)
    if own > pooled and own**2 >= spread.step_var:
        return own**2 / values.size, float(both.size - 1), differ
    if spread.step_var > pooled**2:
        return spread.step_var / values.size, noise.df, steps.format(math.sqrt(spread.step_var) * 100)
    # the pooled noise: named by this side's runs when they are what it is made of (a baseline pair alone)
    return pooled**2 / values.size, noise.df, differ if own > 0 and math.isclose(own, pooled) else ""


def welch(var_c: float, df_c: float, var_b: float, df_b: float) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of two variance estimates."""
    denominator = var_c**2 / df_c + var_b**2 / df_b
    return (var_c + var_b) ** 2 / denominator if denominator > 0 else min(df_c, df_b)


@dataclass(frozen=True)
class Spread:
    """What one side's runs show of their own error beyond the pooled noise: `witnesses`, runs of
    the same settings measured apart from its mean (the baseline's profiled evidence run when it
    disagrees with the baseline's runs), counted in its spread; `step_var`, the relative variance
    of one run's mean that the runs' own steady steps show (their mean square): a run whose steps
    shifted mid-run (load on its nodes for a while) is no more certain than its steps say,
    however well the pooled noise of the other runs agrees."""

    witnesses: tuple[float, ...] = ()
    step_var: float = 0.0


NO_SPREAD = Spread()


def _log_ratio(
    candidate: Sequence[float],
    baseline: Sequence[float],
    noise: Noise,
    spread_c: Spread = NO_SPREAD,
    spread_b: Spread = NO_SPREAD,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float, tuple[float, float], float, str]:
    """The two sides' values, log(ratio of their means), each side's variance of log(mean), the
    interval's degrees of freedom and what widens it most (`Comparison.noise_note`)."""
    c, b = finite_positive(candidate, "candidate"), finite_positive(baseline, "baseline")
    if noise.cv_pct < 0 or noise.df <= 0:
        raise ValueError(f"noise needs cv_pct >= 0 and df > 0, got {noise!r}")
    log_ratio = math.log(float(c.mean()) / float(b.mean()))
    (var_c, df_c, note_c), (var_b, df_b, note_b) = (
        _side(c, noise, spread_c, "candidate"),
        _side(b, noise, spread_b, "baseline"),
    )
    # the wider side's reason; else the other side's (the pooled noise is then mostly its runs)
    note = (note_c or note_b if var_c > var_b else note_b or note_c) or f"run-to-run noise {noise.cv_pct:.1f} %"
    if df_c == df_b == noise.df:  # one pooled estimate on both sides: its own df, not twice it
        return c, b, log_ratio, (var_c, var_b), noise.df, note
    return c, b, log_ratio, (var_c, var_b), welch(var_c, df_c, var_b, df_b), note


def compare(
    candidate: Sequence[float],
    baseline: Sequence[float],
    noise: Noise,
    confidence: float = 0.95,
    higher_is_better: bool = True,
    unstable: bool = False,
    extra_var: float = 0.0,
    spread_c: Spread = NO_SPREAD,
    spread_b: Spread = NO_SPREAD,
) -> Comparison:
    """Compare per-run steady means of a candidate and its baseline under run-to-run noise;
    an `unstable` candidate is never better (nor worse): its runs say nothing settled.
    `extra_var`: a relative variance the candidate's mean carries beyond the run-to-run noise
    (a run stopped early: the scatter of the steady steps it did not run); `spread_c` /
    `spread_b`: what each side's runs show of their own error (`Spread`)."""
    check_confidence(confidence)
    if not extra_var >= 0.0:
        raise ValueError(f"extra_var must be >= 0, got {extra_var!r}")
    c, b, log_ratio, (var_c, var_b), df, note = _log_ratio(candidate, baseline, noise, spread_c, spread_b)
    se = math.sqrt(math.sqrt(var_c + var_b) ** 2 + extra_var)
    half = float(_st.t.ppf((1 + confidence) / 2, df)) * se
    low, high = math.expm1(log_ratio - half) * 100, math.expm1(log_ratio + half) * 100
    if unstable:
        verdict = Direction.WITHIN_NOISE
    elif low > 0:
        verdict = Direction.BETTER if higher_is_better else Direction.WORSE
    elif high < 0:
        verdict = Direction.WORSE if higher_is_better else Direction.BETTER
    else:
        verdict = Direction.WITHIN_NOISE
    return Comparison(
        delta_pct=math.expm1(log_ratio) * 100,
        ci_low_pct=low,
        ci_high_pct=high,
        confidence=confidence,
        verdict=verdict,
        candidate_mean=float(c.mean()),
        baseline_mean=float(b.mean()),
        n_candidate=c.size,
        n_baseline=b.size,
        higher_is_better=higher_is_better,
        unstable=unstable,
        noise_note="its run stopped early" if extra_var > max(var_c, var_b) else note,
    )


# A 95 % interval that holds both a halving and a doubling (e.g. [-100.0, +1143449.3] from two
# baselines 150 % apart under load) says nothing a tuning decision could use: every output words
# it "noise too large to judge" and says why (`noise_note`); the figure itself stays as it is.
TOO_NOISY_LOW_PCT, TOO_NOISY_HIGH_PCT = -50.0, 100.0


def too_noisy(comparison: Comparison) -> bool:
    """Within noise only because the interval spans a halving and a doubling: nothing to judge."""
    c = comparison
    return (
        c.verdict is Direction.WITHIN_NOISE
        and not (c.unstable or c.not_applied)
        and c.ci_low_pct <= TOO_NOISY_LOW_PCT
        and c.ci_high_pct >= TOO_NOISY_HIGH_PCT
    )


def direction(comparison: Comparison) -> str:
    """The verdict as every output spells it: better | worse | within_noise | unstable | not_applied
    | too_noisy (`too_noisy`: within noise, but the interval spans a halving and a doubling)."""
    if comparison.not_applied:
        return "not_applied"
    if comparison.unstable:
        return "unstable"
    return "too_noisy" if too_noisy(comparison) else comparison.verdict.value


def words(comparison: Comparison) -> str:
    """The verdict in the words every output prints: `within noise`, `unstable`, …, and for a
    `too_noisy` one `noise too large to judge: baselines differ by 150 %`."""
    if too_noisy(comparison):
        return "noise too large to judge" + (f": {comparison.noise_note}" if comparison.noise_note else "")
    return direction(comparison).replace("_", " ")


def regression_check(
    candidate: Sequence[float],
    baseline: Sequence[float],
    noise: Noise,
    tolerance_pct: float,
    higher_is_better: bool = True,
    confidence: float = 0.95,
) -> GateDecision:
    """Gate a regression: FAIL/PASS only when the whole interval is past/inside the tolerance.

    A regression is Δ < −tolerance when higher is better (TGS), Δ > +tolerance when lower is
    better (step seconds). An interval ending exactly on the tolerance line counts as inside.
    """
    if tolerance_pct < 0:
        raise ValueError(f"tolerance_pct must be >= 0, got {tolerance_pct!r}")
    cmp = compare(candidate, baseline, noise, confidence, higher_is_better)
    # Express both directions as "how much worse, in %": positive is a regression.
    worse_low, worse_high = (
        (-cmp.ci_high_pct, -cmp.ci_low_pct) if higher_is_better else (cmp.ci_low_pct, cmp.ci_high_pct)
    )
    if worse_low > tolerance_pct + _ON_THE_LINE:
        return GateDecision.FAIL
    if worse_high <= tolerance_pct + _ON_THE_LINE:
        return GateDecision.PASS
    return GateDecision.AMBIGUOUS


def regression_probability(
    candidate: Sequence[float],
    baseline: Sequence[float],
    noise: Noise,
    tolerance_pct: float,
    higher_is_better: bool = True,
) -> float:
    """Return P(true regression beyond the tolerance), Student-t on the log ratio."""
    _, _, log_ratio, (var_c, var_b), df, _ = _log_ratio(candidate, baseline, noise)
    se = math.sqrt(var_c + var_b)
    line = math.log1p(-tolerance_pct / 100) if higher_is_better else math.log1p(tolerance_pct / 100)
    beyond = log_ratio - line if not higher_is_better else line - log_ratio  # > 0: past the line
    if se == 0.0:
        return 1.0 if beyond > 0 else 0.0
    return float(_st.t.cdf(beyond / se, df))


def decide_after_remeasure(
    candidate: Sequence[float],
    baseline: Sequence[float],
    noise: Noise,
    tolerance_pct: float,
    higher_is_better: bool = True,
    confidence: float = 0.95,
    fail_probability: float = DEFAULT_FAIL_PROBABILITY,
) -> GateDecision:
    """Decide PASS or FAIL with all runs, once re-measuring is over; never AMBIGUOUS.

    The interval rule of `regression_check` first; if still ambiguous, FAIL when the probability
    that the regression exceeds the tolerance is >= fail_probability (0.5 is "point estimate vs
    tolerance"; the default 0.8 spares good recipes, since 1 % is barely above one run's noise).
    """
    if not 0.0 < fail_probability < 1.0:
        raise ValueError(f"fail_probability must be in (0, 1), got {fail_probability!r}")
    decision = regression_check(candidate, baseline, noise, tolerance_pct, higher_is_better, confidence)
    if decision is not GateDecision.AMBIGUOUS:
        return decision
    p = regression_probability(candidate, baseline, noise, tolerance_pct, higher_is_better)
    return GateDecision.FAIL if p >= fail_probability else GateDecision.PASS


def decide_final(
    candidate: Sequence[float], baseline: Sequence[float], noise: Noise, tolerance_pct: float
) -> tuple[GateDecision, float | None]:
    """The last word of a regression gate (TGS, higher is better): `decide_after_remeasure`, yet
    never FAIL for runs whose 95 % interval includes no change (their figure reads `within noise`
    wherever it is shown: no regression the data supports, whatever the odds). Also returns the
    odds of a regression beyond the tolerance when they decided (the interval reached across the
    tolerance line), None when the interval alone decided."""
    decision = regression_check(candidate, baseline, noise, tolerance_pct)
    if decision is not GateDecision.AMBIGUOUS:
        return decision, None
    odds = regression_probability(candidate, baseline, noise, tolerance_pct)
    decision = decide_after_remeasure(candidate, baseline, noise, tolerance_pct)
    if compare(candidate, baseline, noise).verdict is not Direction.WORSE:
        decision = GateDecision.PASS
    return decision, odds
