"""Run-to-run noise (pure): how much a run's steady mean moves between identical runs.

Run-to-run noise is a coefficient of variation (CV) pooled from every group of runs with identical
settings (baseline repeats, profile repeats and confirmations, duplicates, controls): each group of n
runs adds n − 1 degrees of freedom, and those are the noise's degrees of freedom. The prior (0.8 %
over 4 pseudo-degrees of freedom, from a pinned-nodelist n=3 measurement) is used only when no
settings were run twice, and is then flagged as an assumption (`Noise.assumed`): it never shrinks
what the data show. Runs of identical settings that spread beyond the others' noise disagree (F test
at 99 %); one run outside a group's prediction interval is an outlier. The smallest effect a number
of runs can detect follows from the noise. verdict/stats.py compares runs under it (and its callers
read these names as stats.X). See docs/explanation/noise.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
from scipy import stats as _st

DEFAULT_PRIOR_CV_PCT = 0.8  # run-to-run CV on a pinned nodelist (std ≈ 8 TGS of ≈ 990, n=3)
DEFAULT_PRIOR_DF = 4.0  # the prior counts like five baseline repeats
PRIOR_REJECT_CONFIDENCE = 0.99  # runs disagree beyond a noise model at 99 %: unstable


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
    floored: bool = False  # cv_pct is the runs' own step error, above what their repeats showed (`floored`)

    def text(self) -> str:
        """`noise 1.20 % (df 3, 7 runs in 2 groups)` or the stated assumption."""
        if self.assumed:
            return f"noise assumed {self.cv_pct:.2f} % (no settings ran twice; the prior, df {self.df:g})"
        if self.floored:
            return f"noise {self.cv_pct:.2f} % (the runs' own steps; their repeats showed less, df {self.df:g})"
        return f"noise {self.cv_pct:.2f} % (df {self.df:g}, {self.n} runs in {self.groups} groups)"


def floored(noise: Noise, step_cv_pct: float) -> Noise:
    """The noise, no smaller than `step_cv_pct`: the error of one run's mean that the runs' own
    steady steps show (their typical standard error, autocorrelation counted). A run whose
    steps shift mid-run (a burst of load on the nodes) is no more certain than its steps say,
    however well two such runs happen to agree."""
    if not step_cv_pct >= 0.0:
        raise ValueError(f"step_cv_pct must be >= 0, got {step_cv_pct!r}")
    return noise if step_cv_pct <= noise.cv_pct else replace(noise, cv_pct=step_cv_pct, floored=True)


def _contradicts(sample_cv_pct: float, data_df: int, prior_cv_pct: float) -> bool:
    """The identical-settings runs disagree beyond the prior noise model (χ² test at 99 %)."""
    if data_df < 1 or prior_cv_pct <= 0:
        return False
    statistic = data_df * (sample_cv_pct / prior_cv_pct) ** 2
    return bool(statistic > float(_st.chi2.ppf(PRIOR_REJECT_CONFIDENCE, data_df)))


def finite_positive(values: Sequence[float], what: str) -> npt.NDArray[np.float64]:
    """The values as an array; a ValueError naming `what` unless all are finite and > 0."""
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{what}: need at least one value, got {list(values)!r}")
    if not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise ValueError(f"{what}: values must be finite and > 0, got {list(values)!r}")
    return array


def check_confidence(confidence: float) -> None:
    """A ValueError unless 0 < confidence < 1."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def run_noise(
    baseline_means: Sequence[float], prior_cv_pct: float = DEFAULT_PRIOR_CV_PCT, prior_df: float = DEFAULT_PRIOR_DF
) -> Noise:
    """The CV of repeated baseline run means (`pooled_noise` of one group).

    Two or more repeats: their own CV, with k − 1 degrees of freedom (no prior shrinks it). One
    run: the prior, flagged `assumed`; prior_df=0 then raises (nothing to go on).
    """
    x = finite_positive(baseline_means, "run_noise")
    if prior_df <= 0 and x.size < 2:
        raise ValueError("run_noise: one baseline run and no prior (prior_df=0) cannot estimate noise")
    noise = pooled_noise([list(x)], prior_cv_pct, prior_df)
    return noise if x.size >= 2 else Noise(noise.cv_pct, noise.df, 1, None, 0, prior_cv_pct, assumed=True)


def _group_ss(values: npt.NDArray[np.float64]) -> float:
    """(n − 1)·CV² of one group, in %² (CV of the run means)."""
    return float((values.size - 1) * (values.std(ddof=1) / values.mean() * 100) ** 2)


def pooled_noise(
    groups: Sequence[Sequence[float]], prior_cv_pct: float = DEFAULT_PRIOR_CV_PCT, prior_df: float = DEFAULT_PRIOR_DF
) -> Noise:
    """Pool the CV of several groups of identical-settings run means.

    Each group of n runs adds n−1 degrees of freedom: CV² = Σ(n−1)·cv² / Σ(n−1), with Σ(n−1)
    degrees of freedom. The prior (prior_cv_pct over prior_df pseudo-degrees of freedom) is used
    only when no group has two runs, and is then flagged `assumed`; `prior_rejected` says the runs
    disagree beyond it (χ² at 99 %). Groups of one run carry no information about noise.
    """
    if prior_cv_pct < 0 or prior_df < 0:
        raise ValueError(f"prior_cv_pct and prior_df must be >= 0, got {prior_cv_pct!r}, {prior_df!r}")
    arrays = [finite_positive(g, "pooled_noise") for g in groups if len(g) >= 2]
    runs = sum(a.size for a in arrays)
    data_df = runs - len(arrays)
    if data_df <= 0:
        if prior_df <= 0:
            raise ValueError("pooled_noise: no repeated settings and no prior (prior_df=0) cannot estimate noise")
        return Noise(
            cv_pct=prior_cv_pct, df=prior_df, n=runs, groups=len(arrays), prior_cv_pct=prior_cv_pct, assumed=True
        )
    sample = math.sqrt(sum(_group_ss(a) for a in arrays) / data_df)
    return Noise(
        cv_pct=sample,
        df=float(data_df),
        n=runs,
        sample_cv_pct=sample,
        groups=len(arrays),
        prior_cv_pct=prior_cv_pct,
        prior_rejected=_contradicts(sample, data_df, prior_cv_pct),
    )


def without(noise: Noise, values: Sequence[float]) -> Noise:
    """The pooled noise less one of its groups (`values`): what the other groups show."""
    x = finite_positive(values, "without")
    if noise.assumed or x.size < 2:
        return noise
    rest_df = noise.df - (x.size - 1)
    if rest_df < 1:
        return Noise(noise.prior_cv_pct, DEFAULT_PRIOR_DF, 0, None, 0, noise.prior_cv_pct, assumed=True)
    ss = max(0.0, noise.cv_pct**2 * noise.df - _group_ss(x))
    cv = math.sqrt(ss / rest_df)
    return Noise(cv, rest_df, noise.n - x.size, cv, noise.groups - 1, noise.prior_cv_pct)


def disagree(
    values: Sequence[float], reference: Noise, confidence: float = PRIOR_REJECT_CONFIDENCE, floor_se: float = 0.0
) -> bool:
    """Runs of identical settings spread beyond `reference` (F test, one-sided at `confidence`;
    an assumed reference counts with its pseudo-degrees of freedom). `floor_se`: the runs' own
    relative standard error from their steps: run means never agree better than that."""
    x = finite_positive(values, "disagree")
    if x.size < 2:
        return False
    own = float(x.std(ddof=1) / x.mean())
    scale = (reference.cv_pct / 100) ** 2 + floor_se**2
    if scale <= 0:
        return False  # runs that never differ (a scripted stand-in) give no scale to test against
    return bool(own**2 / scale > float(_st.f.ppf(confidence, x.size - 1, reference.df)))


def outlier(
    value: float,
    group: Sequence[float],
    noise: Noise,
    confidence: float = PRIOR_REJECT_CONFIDENCE,
    own_se: float = 0.0,
    floor_se: float = 0.0,
) -> bool:
    """One run outside the `confidence` prediction interval of a group of identical settings;
    `own_se`: the run's own relative standard error (its steps), e.g. a profiled run's fewer steps;
    `floor_se`: the group's runs' own (verdicts' step floor): their spread is never below it."""
    x = finite_positive(group, "outlier")
    cv = max(noise.cv_pct / 100, x.std(ddof=1) / x.mean() if x.size >= 2 else 0.0, floor_se)
    se = math.sqrt(cv**2 * (1 + 1 / x.size) + own_se**2)
    if not math.isfinite(se):
        return False  # one step says nothing about where the run's mean could be
    if se == 0:
        return value != float(x.mean())
    return abs(math.log(value / float(x.mean()))) > float(_st.t.ppf((1 + confidence) / 2, noise.df)) * se


def detectable_effect(
    noise: Noise, m: int, k: int, confidence: float = 0.95, power: float = 0.8, baseline: Noise | None = None
) -> float:
    """The smallest true Δ% that m candidate and k baseline runs call *better* with `power`.

    The verdict needs the whole interval above 0, i.e. log-ratio > t·se; a true effect of
    (t_{(1+confidence)/2} + t_{power})·se clears that line with probability `power`. `baseline`:
    the baseline side's own spread when it is wider than `noise` (Welch–Satterthwaite df then).
    """
    check_confidence(confidence)
    if not 0.0 < power < 1.0 or m < 1 or k < 1:
        raise ValueError(f"need 0 < power < 1 and m, k >= 1, got {power!r}, {m!r}, {k!r}")
    var_c, var_b = (noise.cv_pct / 100) ** 2 / m, ((baseline or noise).cv_pct / 100) ** 2 / k
    se = math.sqrt(var_c + var_b)
    df = noise.df
    if baseline is not None and var_c**2 / noise.df + var_b**2 / baseline.df > 0:
        df = (var_c + var_b) ** 2 / (var_c**2 / noise.df + var_b**2 / baseline.df)
    quantiles = float(_st.t.ppf((1 + confidence) / 2, df)) + float(_st.t.ppf(power, df))
    return math.expm1(quantiles * se) * 100


def runs_to_detect(
    noise: Noise,
    effect_pct: float,
    k: int,
    limit: int = 50,
    confidence: float = 0.95,
    power: float = 0.8,
    baseline: Noise | None = None,
) -> int | None:
    """How many runs of each profile (and of the baseline, at least k) would make an effect
    of effect_pct detectable; None when `limit` runs are not enough."""
    for n in range(1, limit + 1):
        grown = Noise(noise.cv_pct, noise.df + max(0, n - k), noise.n, noise.sample_cv_pct)
        side = Noise(baseline.cv_pct, baseline.df + max(0, n - k)) if baseline is not None else None
        if detectable_effect(grown, n, max(k, n), confidence, power, side) < effect_pct:
            return n
    return None
