"""Stored results → the facts a report shows, as one ReportData (pure; no IO, no templates); its
leaderboard rows come from report/leaderboard.py."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..cell.values import Cell
from ..evidence.artifacts import RunEvidence
from ..plan.expand import RunKind
from ..results import JobResult, Spent, delta_pct
from ..verdict import choice, disagreements, figures, numerics, stats, verdicts
from ..verdict.numerics import Mode
from . import leaderboard
from .leaderboard import Row
from .mechanism import EvidenceView, Pipeline, Why, evidence_views, pipeline, why

TOP_ROWS = 8
BOTTOM_ROWS = 5


@dataclass(frozen=True)
class CrossRow:
    """One wave-6 check: the profile's settings re-run on another config tag, as one figure (the
    mean of its runs, as the item's failure line and the junit file give it)."""

    config_tag: str
    profile: str
    tgs: float
    delta_pct: float | None  # vs that tag's baseline-deployed
    ci_low: float | None
    ci_high: float | None
    runs: str  # `9112.9 = mean of …; jobs 14, 15, 16`, or the one job id
    # Why it passed despite >= 80 % odds of a regression (its interval includes no change), in
    # the words of the item's terminal warning and junit property ("" when it did not).
    warning: str = ""


@dataclass(frozen=True)
class Tie:
    """The recipe and the winners within the noise of the fastest."""

    recipe: str
    fastest: str
    rows: tuple[tuple[str, int, float, float, float, float], ...]  # profile, settings, TGS, Δ% vs fastest, interval


@dataclass(frozen=True)
class Power:
    """Whether the sweep could have seen an effect of bounded_pct (one run per profile)."""

    detectable_pct: float
    bound_pct: float
    runs_needed: int | None  # runs of each profile (and baseline) to detect bound_pct
    noise_pct: float = 0.0  # the noise they follow from: the baseline's spread when wider (verdicts.baseline_spread)

    @property
    def enough(self) -> bool:
        return self.detectable_pct < self.bound_pct


@dataclass(frozen=True)
class ReportData:
    cell: Cell
    date: str
    nodelist: str
    backend: str
    baseline_tgs: dict[str, float]
    noise_pct: float | None  # sample CV of the baseline repeats
    pooled_noise_pct: float | None  # what the intervals use (sample pooled with the prior)
    restore_default_delta: dict[str, float | None]
    leaderboard: list[Row]
    top: list[Row]
    bottom: list[Row]
    winner: Row | None
    negative: list[Row]
    failures: list[JobResult]
    cross_config: list[CrossRow]
    evidence: JobResult | None
    appendix: list[JobResult]
    profiles_tested: int
    evidence_runs: tuple[EvidenceView, ...] = ()
    why: Why | None = None
    pipeline: Pipeline | None = None
    numerics_mode: str = Mode.FAIL.value
    numerics_tolerance: str = numerics.DEFAULT_TOLERANCE.text
    numerics_changed: tuple[Row, ...] = ()
    baseline_spread: float | None = None  # largest |Δ loss| between baseline repeats
    tie: Tie | None = None
    power: Power | None = None
    noise: stats.Noise | None = None  # what the intervals use
    disagreements: tuple[str, ...] = ()  # identical-settings runs beyond the prior
    spent: Spent | None = None  # the sweep's node-hours (every job of the store, attempts too)
    adaptive: tuple[str, ...] = ()  # what the adaptive sweep saved, the drift its controls saw
    unconfirmed: str = ""  # why the recipe's win is not confirmed (then there is no lock)
    baseline_runs: int = 0  # the primary tag's measured baseline runs: repeats, then controls

    @property
    def baseline_controls(self) -> int:
        """Baseline runs beyond the cell's repeats (the adaptive sweep's controls, a re-run)."""
        return max(0, self.baseline_runs - self.cell.baseline_repeats)

    @property
    def primary(self) -> str:
        return self.cell.primary_config.name


def _job_number(result: JobResult) -> tuple[int, str]:
    return (int(result.job_id), "") if result.job_id.isdigit() else (0, result.job_id)


def _measured_on(results: list[JobResult]) -> dt.date:
    """The date of the last job of the report (so re-rendering the same results is a no-op)."""
    last = max((r.finished_at for r in results if r.finished_at), default=0.0)
    return dt.datetime.fromtimestamp(last).date() if last else dt.date.today()


def build(
    cell: Cell,
    results: list[JobResult],
    nodelist: str,
    backend: str,
    today: dt.date | None = None,
    loaded: Mapping[str, RunEvidence] | None = None,
    mode: Mode = Mode.FAIL,
    spent: Spent | None = None,
    adaptive: tuple[str, ...] = (),
    jobs: Sequence[JobResult] = (),
) -> ReportData:
    """Everything the tuning report needs, computed from the latest result of each run;
    `loaded` holds what the evidence runs' artifacts show, by job id (read by the caller);
    `jobs` every job of the cell's store (retried attempts, superseded results) for the appendix."""
    measured = [r for r in results if r.measured and r.tgs is not None]
    baselines: dict[str, list[float]] = {}
    for r in measured:
        if r.kind is RunKind.BASELINE:
            baselines.setdefault(r.config_tag, []).append(r.tgs or 0.0)
    baseline_tgs = {tag: statistics.fmean(values) for tag, values in baselines.items()}
    primary_values = baselines.get(cell.primary_config.name, [])
    noise = (
        statistics.stdev(primary_values) / statistics.fmean(primary_values) * 100 if len(primary_values) >= 2 else None
    )
    pooled = verdicts.noise(measured, cell.primary_config.name).cv_pct if primary_values else None

    # Each tag's restore_default as one figure over all its runs, as the leaderboard and TL;DR give it.
    restore: dict[str, float | None] = {}
    for r in measured:
        if r.kind is RunKind.RESTORE_DEFAULT:
            fig = figures.figure(r, measured)
            shown = fig.delta_pct if fig is not None else None
            restore[r.config_tag] = shown if shown is not None else delta_pct(r.tgs, baseline_tgs.get(r.config_tag))

    primary = cell.primary_config.name
    base = baseline_tgs.get(primary)
    picked = choice.choose(measured, primary, mode)
    chosen = choice.deployable(measured, primary, mode)
    rows, winner = leaderboard.star(leaderboard.rows(measured, primary, base), chosen)
    top = rows[:TOP_ROWS]
    bottom = rows[TOP_ROWS:][-BOTTOM_ROWS:]
    negative = [row for row in rows if row.direction == "worse"]

    cross = _cross_rows(measured, baseline_tgs, cell)
    evidence = next((r for r in results if r.kind is RunKind.EVIDENCE), None)
    profiles_tested = len({r.profile for r in results if r.kind is RunKind.PROFILE})
    views = evidence_views(results, loaded, jobs, chosen.profile if chosen else None)
    tag_noise = verdicts.noise(measured, primary) if base is not None else None
    power = None
    if tag_noise is not None and (detectable := verdicts.detectable_effect(measured, primary)):
        k = len(verdicts.baseline_values(measured, primary))
        wider = verdicts.baseline_spread(measured, primary)
        power = Power(
            detectable,
            cell.thresholds.bounded_pct,
            stats.runs_to_detect(tag_noise, cell.thresholds.bounded_pct, k, baseline=wider),
            (wider or tag_noise).cv_pct,
        )
    references = [
        (r.job_id, r.loss_fields())
        for r in measured
        if r.kind is RunKind.BASELINE and r.config_tag == primary and r.losses
    ]
    spread = numerics.agreement(references)
    return ReportData(
        cell=cell,
        date=(today or _measured_on(results)).isoformat(),
        nodelist=nodelist,
        backend=backend,
        baseline_tgs=baseline_tgs,
        noise_pct=noise,
        baseline_runs=len(primary_values),
        pooled_noise_pct=pooled,
        restore_default_delta=restore,
        leaderboard=rows,
        top=top,
        bottom=bottom,
        winner=winner,
        negative=negative,
        failures=[r for r in results if not r.measured],
        cross_config=cross,
        evidence=evidence,
        appendix=every_job(results, jobs),
        profiles_tested=profiles_tested,
        evidence_runs=tuple(views),
        why=why(views),
        pipeline=pipeline(cell, measured, base, verdicts.noise(measured, primary)),
        numerics_mode=mode.value,
        numerics_changed=tuple(row for row in rows if row.numerics == "changed"),
        baseline_spread=spread.max_abs if spread else None,
        tie=_tie(picked, measured) if picked and len(picked.tied) > 1 else None,
        power=power,
        noise=tag_noise,
        disagreements=tuple(d.text() for d in disagreements.disagreements(measured, primary)),
        unconfirmed=verdicts.confirmation(chosen, measured) if chosen is not None else "",
        spent=spent,
        adaptive=tuple(adaptive),
    )


def every_job(results: Sequence[JobResult], jobs: Sequence[JobResult]) -> list[JobResult]:
    """Every job of the store and of the results, once each (by backend and job id, the current
    result first), sorted by job id."""
    by_job: dict[tuple[str, str], JobResult] = {}
    stored = {(r.backend, r.job_id): r for r in jobs}
    for r in [*jobs, *results]:
        if r.job_id and not r.shared_from:  # a shared duplicate is its source's job again
            # a pooled result (adaptive repeats) carries the mean of its runs: the job's own row
            by_job[(r.backend, r.job_id)] = stored.get((r.backend, r.job_id), r) if r.runs else r
    return sorted(by_job.values(), key=_job_number)


def _tie(picked: choice.Choice, measured: Sequence[JobResult]) -> Tie:
    """The tied winners as the TL;DR names them: each settings' figure (the mean of its runs, as
    the leaderboard shows it) and how many settings it deploys."""
    return Tie(
        picked.recipe.profile,
        picked.fastest.profile,
        tuple(
            (
                r.profile,
                choice.settings_count(r, measured),
                choice.mean_tgs(r, measured),
                c.delta_pct,
                c.ci_low_pct,
                c.ci_high_pct,
            )
            for r, c in picked.tied
        ),
    )


def _cross_rows(measured: Sequence[JobResult], baseline_tgs: Mapping[str, float], cell: Cell) -> list[CrossRow]:
    """The wave-6 checks, one row per config tag and settings: a check measured again before it
    decided is one figure, not a row per job; with the warning of a check its runs passed on the
    interval, judged as the item judged them (choice.regression_gate, final after the re-measures)."""
    rows: dict[tuple[str, tuple[str, ...]], CrossRow] = {}
    thresholds = cell.thresholds
    for r in measured:
        if r.kind is not RunKind.CROSS_CONFIG or (fig := figures.figure(r, measured)) is None:
            continue
        if (r.config_tag, fig.job_ids) in rows:
            continue
        c = fig.comparison
        name = r.resolved_from or r.profile
        gate = choice.regression_gate(
            [tgs for _, tgs in fig.runs],
            measured,
            r.config_tag,
            thresholds.regression_pct,
            final=len(fig.runs) > thresholds.remeasure,
        )
        rows[(r.config_tag, fig.job_ids)] = CrossRow(
            r.config_tag,
            name,
            fig.tgs,
            delta_pct(fig.tgs, baseline_tgs.get(r.config_tag)),
            c.ci_low_pct if c else None,
            c.ci_high_pct if c else None,
            fig.runs_text() if len(fig.runs) > 1 else r.job_id,
            gate.passed_on_the_interval(name, r.config_tag, fig.job_ids) if gate else "",
        )
    return list(rows.values())
