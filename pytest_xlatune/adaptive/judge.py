"""Verdicts against the controls nearest in time (pure): per settings key, its Δ vs the drift
model with its interval, on a `Board` holding every judged key of the sweep at one moment.

Each run is compared with the baseline's level at its own time (drift.Model.reference). For m
runs of a key, Δ = mean of log(run / reference); its variance is CV²/m + the error variance of
the references' mean (the controls' noise and the drift between them) + what stopped runs miss
of their steps — `stats.compare`'s CV²·(1/m + 1/k) when every run sees the same k baselines and
nothing drifts. The interval is Student-t at the noise's degrees of freedom, as in
`stats.compare`; the noise is `stats.pooled_noise` (see `build`).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scipy import stats as _st

from ..verdict import one_run, stats
from . import drift
from .values import Key, Observation, Plan, PlanItem, Role, RunState, SweepState


@functools.lru_cache(maxsize=4096)
def quantile(probability: float, df: float) -> float:
    """Student-t quantile (cached: the same few degrees of freedom recur all sweep long)."""
    return float(_st.t.ppf(probability, df))


@functools.lru_cache(maxsize=4096)
def quantile_f(df1: float, df2: float) -> float:
    """The F quantile the instability test uses (99 %, as stats.disagree)."""
    return float(_st.f.ppf(stats.PRIOR_REJECT_CONFIDENCE, df1, df2))


@dataclass(frozen=True)
class Estimate:
    """One key's Δ vs the drift model (log units) and the interval quantities."""

    key: Key
    runs: tuple[str, ...]
    log_delta: float
    se: float
    df: float
    confidence: float
    unstable: bool = False  # its runs disagree beyond the other groups' noise: never better
    replicated: bool = True  # its runs after the first (which chose it for a repeat) win alone
    partial: bool = False  # one run, stopped early, below win_pct: never better on that alone

    @property
    def m(self) -> int:
        return len(self.runs)

    @property
    def half(self) -> float:
        return quantile((1 + self.confidence) / 2, self.df) * self.se

    @property
    def delta_pct(self) -> float:
        return math.expm1(self.log_delta) * 100

    @property
    def low_pct(self) -> float:
        return math.expm1(self.log_delta - self.half) * 100

    @property
    def high_pct(self) -> float:
        return math.expm1(self.log_delta + self.half) * 100

    @property
    def better(self) -> bool:
        return not self.unstable and self.replicated and not self.partial and self.log_delta - self.half > 0

    @property
    def worse(self) -> bool:
        return self.log_delta + self.half < 0

    def upper(self, probability: float) -> float:
        """One-sided upper bound of Δ (log units) at `probability`."""
        return self.log_delta + quantile(probability, self.df) * self.se

    def text(self) -> str:
        runs = f"{self.m} run{'s' if self.m > 1 else ''}"
        return f"{self.delta_pct:+.2f} % [{self.low_pct:+.2f}, {self.high_pct:+.2f}] vs the controls ({runs})"


Sample = tuple[str, float, float, float]  # (run id, steady mean, midpoint time, in-job variance left)


@dataclass(frozen=True)
class Board:
    """Every judged key of a sweep at one moment, and what the judging used."""

    plan: Plan
    points: tuple[drift.Point, ...]
    noise: stats.Noise  # of the verdicts
    drift_noise: stats.Noise  # of back-to-back identical runs: what the controls' movement is tested against
    walk_rate: float
    step_var: float  # relative variance of one steady step's TGS (AR(1)-inflated), pooled over runs
    samples: tuple[tuple[Key, tuple[Sample, ...]], ...]  # measured candidate runs per key
    estimates: tuple[Estimate, ...] = ()
    failed: frozenset[Key] = frozenset()  # candidate keys whose every ended run failed
    flagged: frozenset[Key] = frozenset()  # keys whose profiled re-run disagrees with their runs: unstable
    tested: int = 0  # distinct candidate keys with an ended run
    # key → the relative variance of one run's mean that its ended runs' own steps show (their
    # mean square): a run with a stall or a co-tenant mid-run is no more certain than its steps
    # say, as in the verdicts (verdict.stats.Spread.step_var)
    floors: tuple[tuple[Key, float], ...] = ()

    def get(self, key: Key) -> Estimate | None:
        return next((e for e in self.estimates if e.key == key), None)

    def drift_report(self) -> drift.DriftReport:
        return drift.report(self.points, self.drift_noise.cv_pct)

    def stopped_var(self, steps: int) -> float:
        """What a run stopped after `steps` steady steps adds to its value's variance (relative²)."""
        return _stopped_var(self.step_var, steps, self.plan.steady_steps)

    @functools.cached_property
    def model(self) -> drift.Model:
        return drift.Model(self.points, self.walk_rate, self.noise.cv_pct / 100)

    def estimate(self, key: Key, runs: Sequence[Sample]) -> Estimate | None:
        """Δ of `key` from its runs against this board's drift model (None before any control):
        CV²/m for the runs' noise (their own spread when it is larger: Welch–Satterthwaite df),
        the drift model's error of their references, and what stopped runs miss of their steps.
        Runs that disagree beyond the other groups' noise (F test at 99 %) make it unstable."""
        reference = self.model.reference([t for _, _, t, _ in runs])
        if reference is None:
            return None
        levels, ref_var = reference
        m = len(runs)
        residuals = [math.log(value) - level for (_, value, _, _), level in zip(runs, levels, strict=True)]
        delta = sum(residuals) / m
        pooled = (self.noise.cv_pct / 100) ** 2
        own = sum((r - delta) ** 2 for r in residuals) / (m - 1) if m >= 2 else 0.0
        rest = stats.without(self.noise, [value for _, value, _, _ in runs]) if m >= 2 else self.noise
        scale = (rest.cv_pct / 100) ** 2 + self.step_var / self.plan.steady_steps  # never below the steps' SE
        unstable = key in self.flagged or (m >= 2 and scale > 0 and own / scale > quantile_f(m - 1, rest.df))
        extra = ref_var + sum(r[3] for r in runs) / m**2
        unit, df = (
            (own, stats.welch(own / m, float(m - 1), extra, self.noise.df)) if own > pooled else (pooled, self.noise.df)
        )
        if (floor := dict(self.floors).get(key, 0.0)) > unit:
            unit, df = floor, self.noise.df
        confidence = self.plan.rules.confidence
        # A repeat runs because the first run looked good: that run is a biased witness, so the
        # runs after it must show the win on their own (a replication), with the error rate
        # shared (Bonferroni) among the replications the sweep tests — the keys run twice or
        # more: the runs after the first are no witness of the selection — while the noise is
        # as its prior expects; among every candidate tested when the data reject that prior
        # (a noisier cluster than the model: bench/replay.py's stressors).
        family = self.tested if self.noise.prior_rejected else 1 + sum(len(v) >= 2 for k, v in self.samples if k != key)
        alpha = (1 - confidence) / 2 / max(1, family)
        replicated = m < 2 or (
            sum(residuals[1:]) / (m - 1) - quantile(1 - alpha, df) * math.sqrt(unit / (m - 1) + extra) > 0
        )
        # One partial run is no "better" verdict below win_pct (a futile or settled stop never
        # makes a small win out of a few steps); at or above it a confirming run follows anyway.
        partial = m == 1 and runs[0][3] > 0 and delta < math.log1p(self.plan.thresholds.win_pct / 100)
        return Estimate(
            key,
            tuple(r[0] for r in runs),
            delta,
            math.sqrt(unit / m + extra),
            df,
            confidence,
            unstable,
            replicated,
            partial,
        )

    def with_value(self, run: Observation, value: float, now: float, steps: int | None = None) -> Estimate | None:
        """The run's key as it would stand if the running `run` ended now at `value` (`steps`:
        after that many steady steps; None: after all of them)."""
        own = [s for s in dict(self.samples).get(run.key, ()) if s[0] != run.run]
        in_job = self.stopped_var(steps) if steps is not None else 0.0
        return self.estimate(run.key, [*own, (run.run, value, run.midpoint(now), in_job)])

    def leader(self, excluding: Key = None) -> Estimate | None:
        """The fastest key better than the baseline beyond the noise (other than `excluding`)."""
        winners = [e for e in self.estimates if e.better and e.key != excluding]
        return max(winners, key=lambda e: e.log_delta, default=None)

    def ranked(self) -> list[Estimate]:
        """Keys better than the baseline, fastest first."""
        return sorted((e for e in self.estimates if e.better), key=lambda e: -e.log_delta)


def _stopped_var(step_var: float, steps: int, total: int) -> float:
    return step_var * max(0.0, 1 / steps - 1 / total)


@functools.lru_cache(maxsize=8192)
def step_variance(steady: tuple[float, ...]) -> float:
    """One run's relative per-step variance, AR(1)-inflated (one_run.step_variance, cached)."""
    return one_run.step_variance(steady)


def build(state: SweepState, now: float) -> Board:
    """Judge every ended run of the sweep as of `now` (running runs are left out).

    The verdicts' noise: control runs back to back (the wave-1 pair) and successive single
    controls, pooled with the prior (drift between successive controls counts as noise here as
    well as in the drift model: wider intervals, never narrower). The drift is tested against
    the back-to-back runs alone. Every candidate key with two or more runs (repeats,
    confirmations) counts as well: a repeat runs *because* its first run looked good, so the
    pair may disagree by more than the noise (regression to the mean), which only widens the
    intervals; shared duplicates never run twice. No prior unless nothing ran twice."""
    plan, runs = state.plan, state.runs
    pts = drift.points(runs, now)
    floor = drift.prior_rate(plan.rules.prior_drift_pct_per_sqrt_h)
    baseline_key = plan.baseline.key
    full = [
        step_variance(r.steady)
        for r in runs
        if r.state is RunState.FINISHED
        and len(r.steady) >= 3
        and r.role is not Role.EVIDENCE
        and r.role is not Role.WINNER_EVIDENCE
    ]
    step_var = sum(full) / len(full) if full else 0.0
    by_key: dict[Key, list[Sample]] = {}
    own: dict[Key, list[float]] = {}  # each ended run's own error of its mean, squared
    ended: set[Key] = set()
    profiled: list[tuple[Key, Sample, float]] = []
    for run in runs:
        if run.role is Role.WINNER_EVIDENCE and run.measured and len(run.steady) >= one_run.POOLED_MIN_STEPS:
            # Its steps after the profiler's window (9-14): fewer than a plain run's, so the
            # steps it misses count as a stopped run's do.
            in_job = _stopped_var(step_var, len(run.steady), plan.steady_steps)
            own_se = math.sqrt(step_variance(run.steady) / len(run.steady))  # its steps' own error
            profiled.append((run.key, (run.run, run.value or 1.0, run.midpoint(now), in_job), own_se))
        if run.role is not Role.PROFILE or run.state.active:
            continue
        ended.add(run.key)
        if run.measured and run.key != baseline_key:
            in_job = (
                _stopped_var(step_var, len(run.steady), plan.steady_steps) if run.state is RunState.STOPPED else 0.0
            )
            by_key.setdefault(run.key, []).append((run.run, run.value or 1.0, run.midpoint(now), in_job))
            if len(run.steady) >= 2:
                own.setdefault(run.key, []).append(step_variance(run.steady) / len(run.steady))
    clusters = [_values(runs, p) for p in pts if p.n >= 2]
    successive = [[math.exp(a.level), math.exp(b.level)] for a, b in itertools.pairwise(pts) if a.n == b.n == 1]
    flagged = _join_profiled(by_key, profiled, stats.pooled_noise(clusters + successive + _repeats(by_key)))
    repeats = _repeats(by_key)
    back_to_back = stats.pooled_noise(clusters)
    walk = drift.rate(pts, back_to_back.cv_pct, floor)
    board = Board(
        plan,
        pts,
        stats.pooled_noise(clusters + successive + repeats),
        back_to_back,
        walk,
        step_var,
        tuple((k, tuple(v)) for k, v in by_key.items()),
        (),
        frozenset(ended - set(by_key) - {baseline_key}),
        flagged,
        len(ended - {baseline_key}),
        tuple((k, sum(v) / len(v)) for k, v in own.items()),
    )
    estimates = tuple(e for k, v in by_key.items() if (e := board.estimate(k, v)) is not None)
    return replace(board, estimates=estimates)


def _repeats(by_key: dict[Key, list[Sample]]) -> list[list[float]]:
    return [[value for _, value, _, _ in v] for v in by_key.values() if len(v) >= 2]


def _join_profiled(
    by_key: dict[Key, list[Sample]], profiled: list[tuple[Key, Sample, float]], noise: stats.Noise
) -> frozenset[Key]:
    """The winner's profiled re-runs join their key's plain runs (in time order), as a repeat
    would; one outside the plain runs' 99 % prediction interval (stats.outlier, as the verdicts
    flag it) makes its key unstable — never better — rather than leaving the key to another draw.
    Returns the keys so flagged."""
    flagged = set()
    for key, sample, own_se in profiled:
        plain = [value for _, value, _, _ in by_key.get(key, ())]
        if not plain:
            continue
        if stats.outlier(sample[1], plain, noise, own_se=own_se):
            flagged.add(key)
        by_key[key] = sorted([*by_key[key], sample], key=lambda s: s[2])
    return frozenset(flagged)


def _values(runs: Sequence[Observation], point: drift.Point) -> list[float]:
    wanted = set(point.runs)
    return [r.value or 1.0 for r in runs if r.run in wanted]


def item_of(plan: Plan, key: Key) -> PlanItem | None:
    """The first candidate item with these settings (the one repeats and shares run as)."""
    return next((i for i in plan.items if i.key == key and i.role is Role.PROFILE), None)
