"""Steady-state estimates, run-to-run noise and noise-aware verdicts (pure).

A run's steady value is the mean of its steady steps; the unit of evidence is the run, not the step.
Run-to-run noise is a coefficient of variation (CV) pooled from every group of runs with identical
settings (baseline repeats, profile repeats and confirmations, duplicates, controls): each group of n
runs adds n − 1 degrees of freedom, and those are the noise's degrees of freedom. The prior (0.8 %
over 4 pseudo-degrees of freedom, from a pinned-nodelist n=3 measurement) is used only when no
settings were run twice, and is then flagged as an assumption (`Noise.assumed`): it never shrinks
what the data show. A comparison takes the ratio of the candidate and baseline run means; each side
has its own variance, max(pooled CV², its own runs' CV²)/n (a profile noisier than the baseline gets
a wider interval), and the Student-t interval on log(ratio) uses the Welch–Satterthwaite degrees of
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

DEFAULT_PRIOR_CV_PCT = 0.8  # run-to-run CV on a pinned nodelist (std ≈ 8 TGS of ≈ 990, n=3)
DEFAULT_PRIOR_DF = 4.0  # the prior counts like five baseline repeats
PRIOR_REJECT_CONFIDENCE = 0.99  # runs disagree beyond a noise model at 99 %: unstable
DEFAULT_FAIL_PROBABILITY = 0.8  # still ambiguous after re-measuring: FAIL at ≥ 80 % odds
_MAX_AUTOCORR = 0.8  # caps the SE inflation at 3×: r from 6-10 steps is itself very noisy
_ON_THE_LINE = 1e-9  # percentage points: 990 vs 1000 is exactly -1 % despite float round-off


class Direction(Enum):
    """Whether a candidate is better than its baseline beyond the run-to-run noise."""

    BETTER = "better"
    WORSE = "worse"
    WITHIN_NOISE = "within_noise"


class Decision(Enum):
    """The outcome of a regression gate."""

    PASS = "pass"
    FAIL = "fail"
    AMBIGUOUS = "ambiguous"


@dataclass(frozen=True)
class Estimate:
    """One job's steady-state mean and its within-job uncertainty."""

    mean: float
    stderr: float  # inf when n == 1: one step says nothing about scatter
    n: int
    autocorr: float  # lag-1 autocorrelation used for the inflation, after clipping
    ci_low: float
    ci_high: float
    confidence: float


@dataclass(frozen=True)
class Noise:
    """Run-to-run noise of a run's steady mean, as a CV in percent."""

    cv_pct: float
    df: float  # degrees of freedom of cv_pct: Σ(n − 1) over the groups; the prior's when assumed
    n: int = 0  # runs behind it
    sample_cv_pct: float | None = None  # the repeats alone; None when no settings ran twice
    groups: int = 1  # groups of identical-settings runs behind it
    prior_cv_pct: float = DEFAULT_PRIOR_CV_PCT

    prior_rejected: bool = False  # the runs disagree beyond the prior (they set the noise anyway)
    assumed: bool = False  # no settings ran twice: cv_pct is the prior, an assumption

    def text(self) -> str:
        """`noise 1.20 % (df 3, 7 runs in 2 groups)` or the stated assumption."""
        if self.assumed:
            return (f"noise assumed {self.cv_pct:.2f} % (no settings ran twice; the prior, "
                    f"df {self.df:g})")
        return f"noise {self.cv_pct:.2f} % (df {self.df:g}, {self.n} runs in {self.groups} groups)"


def _contradicts(sample_cv_pct: float, data_df: int, prior_cv_pct: float) -> bool:
    """The identical-settings runs disagree beyond the prior noise model (χ² test at 99 %)."""
    if data_df < 1 or prior_cv_pct <= 0:
        return False
    statistic = data_df * (sample_cv_pct / prior_cv_pct) ** 2
    return bool(statistic > float(_st.chi2.ppf(PRIOR_REJECT_CONFIDENCE, data_df)))


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


def _values(values: Sequence[float], what: str) -> npt.NDArray[np.float64]:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{what}: need at least one value, got {list(values)!r}")
    if not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise ValueError(f"{what}: values must be finite and > 0, got {list(values)!r}")
    return array


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def job_estimate(tgs_values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """Estimate one job's steady mean from its per-step values (e.g. TGS of steps 5-14)."""
    _check_confidence(confidence)
    x = _values(tgs_values, "job_estimate")
    n, mean = x.size, float(x.mean())
    if n == 1:
        return Estimate(mean, math.inf, 1, 0.0, -math.inf, math.inf, confidence)
    centred = x - mean
    ss = float(centred @ centred)
    r = 0.0
    if n >= 3 and ss > 0.0:
        r = min(max(float(centred[:-1] @ centred[1:]) / ss, 0.0), _MAX_AUTOCORR)
    stderr = math.sqrt(ss / (n - 1) / n * (1 + r) / (1 - r))
    half = float(_st.t.ppf((1 + confidence) / 2, n - 1)) * stderr
    return Estimate(mean, stderr, n, r, mean - half, mean + half, confidence)


def run_noise(baseline_means: Sequence[float], prior_cv_pct: float = DEFAULT_PRIOR_CV_PCT,
              prior_df: float = DEFAULT_PRIOR_DF) -> Noise:
    """The CV of repeated baseline run means (`pooled_noise` of one group).

    Two or more repeats: their own CV, with k − 1 degrees of freedom (no prior shrinks it). One
    run: the prior, flagged `assumed`; prior_df=0 then raises (nothing to go on).
    """
    x = _values(baseline_means, "run_noise")
    if prior_df <= 0 and x.size < 2:
        raise ValueError("run_noise: one baseline run and no prior (prior_df=0) cannot estimate noise")
    noise = pooled_noise([list(x)], prior_cv_pct, prior_df)
    return noise if x.size >= 2 else Noise(noise.cv_pct, noise.df, 1, None, 0, prior_cv_pct, assumed=True)


def _group_ss(values: npt.NDArray[np.float64]) -> float:
    """(n − 1)·CV² of one group, in %² (CV of the run means)."""
    return float((values.size - 1) * (values.std(ddof=1) / values.mean() * 100) ** 2)


def pooled_noise(groups: Sequence[Sequence[float]], prior_cv_pct: float = DEFAULT_PRIOR_CV_PCT,
                 prior_df: float = DEFAULT_PRIOR_DF) -> Noise:
    """Pool the CV of several groups of identical-settings run means.

    Each group of n runs adds n−1 degrees of freedom: CV² = Σ(n−1)·cv² / Σ(n−1), with Σ(n−1)
    degrees of freedom. The prior (prior_cv_pct over prior_df pseudo-degrees of freedom) is used
    only when no group has two runs, and is then flagged `assumed`; `prior_rejected` says the runs
    disagree beyond it (χ² at 99 %). Groups of one run carry no information about noise.
    """
    if prior_cv_pct < 0 or prior_df < 0:
        raise ValueError(f"prior_cv_pct and prior_df must be >= 0, got {prior_cv_pct!r}, {prior_df!r}")
    arrays = [_values(g, "pooled_noise") for g in groups if len(g) >= 2]
    runs = sum(a.size for a in arrays)
    data_df = runs - len(arrays)
    if data_df <= 0:
        if prior_df <= 0:
            raise ValueError("pooled_noise: no repeated settings and no prior (prior_df=0) cannot "
                             "estimate noise")
        return Noise(cv_pct=prior_cv_pct, df=prior_df, n=runs, groups=len(arrays),
                     prior_cv_pct=prior_cv_pct, assumed=True)
    sample = math.sqrt(sum(_group_ss(a) for a in arrays) / data_df)
    return Noise(cv_pct=sample, df=float(data_df), n=runs, sample_cv_pct=sample, groups=len(arrays),
                 prior_cv_pct=prior_cv_pct, prior_rejected=_contradicts(sample, data_df, prior_cv_pct))


def without(noise: Noise, values: Sequence[float]) -> Noise:
    """The pooled noise less one of its groups (`values`): what the other groups show."""
    x = _values(values, "without")
    if noise.assumed or x.size < 2:
        return noise
    rest_df = noise.df - (x.size - 1)
    if rest_df < 1:
        return Noise(noise.prior_cv_pct, DEFAULT_PRIOR_DF, 0, None, 0, noise.prior_cv_pct, assumed=True)
    ss = max(0.0, noise.cv_pct**2 * noise.df - _group_ss(x))
    cv = math.sqrt(ss / rest_df)
    return Noise(cv, rest_df, noise.n - x.size, cv, noise.groups - 1, noise.prior_cv_pct)


def disagree(values: Sequence[float], reference: Noise, confidence: float = PRIOR_REJECT_CONFIDENCE,
             floor_se: float = 0.0) -> bool:
    """Runs of identical settings spread beyond `reference` (F test, one-sided at `confidence`;
    an assumed reference counts with its pseudo-degrees of freedom). `floor_se`: the runs' own
    relative standard error from their steps: run means never agree better than that."""
    x = _values(values, "disagree")
    if x.size < 2:
        return False
    own = float(x.std(ddof=1) / x.mean())
    scale = (reference.cv_pct / 100) ** 2 + floor_se**2
    if scale <= 0:
        return False  # runs that never differ (a scripted stand-in) give no scale to test against
    return bool(own**2 / scale > float(_st.f.ppf(confidence, x.size - 1, reference.df)))


def outlier(value: float, group: Sequence[float], noise: Noise,
            confidence: float = PRIOR_REJECT_CONFIDENCE, own_se: float = 0.0) -> bool:
    """One run outside the `confidence` prediction interval of a group of identical settings;
    `own_se`: the run's own relative standard error (its steps), e.g. a profiled run's fewer steps."""
    x = _values(group, "outlier")
    cv = max(noise.cv_pct, x.std(ddof=1) / x.mean() * 100 if x.size >= 2 else 0.0) / 100
    se = math.sqrt(cv**2 * (1 + 1 / x.size) + own_se**2)
    if not math.isfinite(se):
        return False  # one step says nothing about where the run's mean could be
    if se == 0:
        return value != float(x.mean())
    return abs(math.log(value / float(x.mean()))) > float(_st.t.ppf((1 + confidence) / 2, noise.df)) * se


def detectable_effect(noise: Noise, m: int, k: int, confidence: float = 0.95,
                      power: float = 0.8) -> float:
    """The smallest true Δ% that m candidate and k baseline runs call *better* with `power`.

    The verdict needs the whole interval above 0, i.e. log-ratio > t·se; a true effect of
    (t_{(1+confidence)/2} + t_{power})·se clears that line with probability `power`.
    """
    _check_confidence(confidence)
    if not 0.0 < power < 1.0 or m < 1 or k < 1:
        raise ValueError(f"need 0 < power < 1 and m, k >= 1, got {power!r}, {m!r}, {k!r}")
    se = noise.cv_pct / 100 * math.sqrt(1 / m + 1 / k)
    quantiles = float(_st.t.ppf((1 + confidence) / 2, noise.df)) + float(_st.t.ppf(power, noise.df))
    return math.expm1(quantiles * se) * 100


def runs_to_detect(noise: Noise, effect_pct: float, k: int, limit: int = 50,
                   confidence: float = 0.95, power: float = 0.8) -> int | None:
    """How many runs of each profile (and of the baseline, at least k) would make an effect
    of effect_pct detectable; None when `limit` runs are not enough."""
    for n in range(1, limit + 1):
        grown = Noise(noise.cv_pct, noise.df + max(0, n - k), noise.n, noise.sample_cv_pct)
        if detectable_effect(grown, n, max(k, n), confidence, power) < effect_pct:
            return n
    return None


def _side(values: npt.NDArray[np.float64], noise: Noise) -> tuple[float, float]:
    """One side's variance of log(mean) and its degrees of freedom: the pooled CV², or the
    side's own when its runs spread more (then with n − 1 degrees of freedom)."""
    own = float(values.std(ddof=1) / values.mean()) if values.size >= 2 else 0.0
    pooled = noise.cv_pct / 100
    if own > pooled:
        return own**2 / values.size, float(values.size - 1)
    return pooled**2 / values.size, noise.df


def welch(var_c: float, df_c: float, var_b: float, df_b: float) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of two variance estimates."""
    denominator = var_c**2 / df_c + var_b**2 / df_b
    return (var_c + var_b) ** 2 / denominator if denominator > 0 else min(df_c, df_b)


def _log_ratio(candidate: Sequence[float], baseline: Sequence[float],
               noise: Noise) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float, float, float]:
    c, b = _values(candidate, "candidate"), _values(baseline, "baseline")
    if noise.cv_pct < 0 or noise.df <= 0:
        raise ValueError(f"noise needs cv_pct >= 0 and df > 0, got {noise!r}")
    log_ratio = math.log(float(c.mean()) / float(b.mean()))
    (var_c, df_c), (var_b, df_b) = _side(c, noise), _side(b, noise)
    if df_c == df_b == noise.df:  # one pooled estimate on both sides: its own df, not twice it
        return c, b, log_ratio, math.sqrt(var_c + var_b), noise.df
    return c, b, log_ratio, math.sqrt(var_c + var_b), welch(var_c, df_c, var_b, df_b)


def compare(candidate: Sequence[float], baseline: Sequence[float], noise: Noise,
            confidence: float = 0.95, higher_is_better: bool = True,
            unstable: bool = False) -> Comparison:
    """Compare per-run steady means of a candidate and its baseline under run-to-run noise;
    an `unstable` candidate is never better (nor worse): its runs say nothing settled."""
    _check_confidence(confidence)
    c, b, log_ratio, se, df = _log_ratio(candidate, baseline, noise)
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
    return Comparison(delta_pct=math.expm1(log_ratio) * 100, ci_low_pct=low, ci_high_pct=high,
                      confidence=confidence, verdict=verdict, candidate_mean=float(c.mean()),
                      baseline_mean=float(b.mean()), n_candidate=c.size, n_baseline=b.size,
                      higher_is_better=higher_is_better, unstable=unstable)


def direction(comparison: Comparison) -> str:
    """The verdict as every output spells it: better | worse | within_noise | unstable | not_applied."""
    if comparison.not_applied:
        return "not_applied"
    return "unstable" if comparison.unstable else comparison.verdict.value


def regression_check(candidate: Sequence[float], baseline: Sequence[float], noise: Noise,
                     tolerance_pct: float, higher_is_better: bool = True,
                     confidence: float = 0.95) -> Decision:
    """Gate a regression: FAIL/PASS only when the whole interval is past/inside the tolerance.

    A regression is Δ < −tolerance when higher is better (TGS), Δ > +tolerance when lower is
    better (step seconds). An interval ending exactly on the tolerance line counts as inside.
    """
    if tolerance_pct < 0:
        raise ValueError(f"tolerance_pct must be >= 0, got {tolerance_pct!r}")
    cmp = compare(candidate, baseline, noise, confidence, higher_is_better)
    # Express both directions as "how much worse, in %": positive is a regression.
    worse_low, worse_high = ((-cmp.ci_high_pct, -cmp.ci_low_pct) if higher_is_better
                             else (cmp.ci_low_pct, cmp.ci_high_pct))
    if worse_low > tolerance_pct + _ON_THE_LINE:
        return Decision.FAIL
    if worse_high <= tolerance_pct + _ON_THE_LINE:
        return Decision.PASS
    return Decision.AMBIGUOUS


def regression_probability(candidate: Sequence[float], baseline: Sequence[float], noise: Noise,
                           tolerance_pct: float, higher_is_better: bool = True) -> float:
    """Return P(true regression beyond the tolerance), Student-t on the log ratio."""
    _, _, log_ratio, se, df = _log_ratio(candidate, baseline, noise)
    line = math.log1p(-tolerance_pct / 100) if higher_is_better else math.log1p(tolerance_pct / 100)
    beyond = log_ratio - line if not higher_is_better else line - log_ratio  # > 0: past the line
    if se == 0.0:
        return 1.0 if beyond > 0 else 0.0
    return float(_st.t.cdf(beyond / se, df))


def decide_after_remeasure(candidate: Sequence[float], baseline: Sequence[float], noise: Noise,
                           tolerance_pct: float, higher_is_better: bool = True,
                           confidence: float = 0.95,
                           fail_probability: float = DEFAULT_FAIL_PROBABILITY) -> Decision:
    """Decide PASS or FAIL with all runs, once re-measuring is over; never AMBIGUOUS.

    The interval rule of `regression_check` first; if still ambiguous, FAIL when the probability
    that the regression exceeds the tolerance is >= fail_probability (0.5 is "point estimate vs
    tolerance"; the default 0.8 spares good recipes, since 1 % is barely above one run's noise).
    """
    if not 0.0 < fail_probability < 1.0:
        raise ValueError(f"fail_probability must be in (0, 1), got {fail_probability!r}")
    decision = regression_check(candidate, baseline, noise, tolerance_pct, higher_is_better,
                                confidence)
    if decision is not Decision.AMBIGUOUS:
        return decision
    p = regression_probability(candidate, baseline, noise, tolerance_pct, higher_is_better)
    return Decision.FAIL if p >= fail_probability else Decision.PASS
