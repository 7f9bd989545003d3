"""Stored results → the rows and facts a report shows (pure; no IO, no templates)."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from ..evidence.artifacts import RunEvidence
from ..model import Cell
from ..plan import RunKind
from .. import verdicts
from ..results import JobResult, delta_pct
from .mechanism import EvidenceView, Pipeline, Why, evidence_views, pipeline, why

TOP_ROWS = 8
BOTTOM_ROWS = 5


@dataclass(frozen=True)
class Row:
    """One leaderboard line."""

    profile: str
    flags: str
    tgs: float
    step_seconds: float | None
    delta_pct: float | None
    job_ids: str
    winner: bool = False
    ci_low: float | None = None
    ci_high: float | None = None
    direction: str = ""  # better | worse | within_noise (stats.Direction values)
    kind: str = ""  # the RunKind value of the run (baseline rows: "baseline")
    derived: bool = False  # TGS derived from the step time (the log printed no Tokens/s/device)


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
    cross_config: list[tuple[JobResult, float | None]]
    evidence: JobResult | None
    appendix: list[JobResult]
    profiles_tested: int
    evidence_runs: tuple[EvidenceView, ...] = ()
    why: Why | None = None
    pipeline: Pipeline | None = None

    @property
    def primary(self) -> str:
        return self.cell.primary_config.name


def flags_text(result: JobResult) -> str:
    parts = list(result.xla_flags) + [f"{k}={v}" for k, v in result.env]
    return " ".join(parts) if parts else "(deployed env, no extra flags)"


def _job_number(result: JobResult) -> tuple[int, str]:
    return (int(result.job_id), "") if result.job_id.isdigit() else (0, result.job_id)


def _measured_on(results: list[JobResult]) -> dt.date:
    """The date of the last job of the report (so re-rendering the same results is a no-op)."""
    last = max((r.finished_at for r in results if r.finished_at), default=0.0)
    return dt.datetime.fromtimestamp(last).date() if last else dt.date.today()


def build(cell: Cell, results: list[JobResult], nodelist: str, backend: str,
          today: dt.date | None = None,
          loaded: Mapping[str, RunEvidence] | None = None) -> ReportData:
    """Everything the tuning report needs, computed from the latest result of each run;
    `loaded` holds what the evidence runs' artifacts show, by job id (read by the caller)."""
    measured = [r for r in results if r.measured and r.tgs is not None]
    baselines: dict[str, list[float]] = {}
    for r in measured:
        if r.kind == RunKind.BASELINE.value:
            baselines.setdefault(r.config_tag, []).append(r.tgs or 0.0)
    baseline_tgs = {tag: statistics.fmean(values) for tag, values in baselines.items()}
    primary_values = baselines.get(cell.primary_config.name, [])
    noise = (statistics.stdev(primary_values) / statistics.fmean(primary_values) * 100
             if len(primary_values) >= 2 else None)
    pooled = verdicts.noise(measured, cell.primary_config.name).cv_pct if primary_values else None

    restore = {r.config_tag: delta_pct(r.tgs, baseline_tgs.get(r.config_tag))
               for r in measured if r.kind == RunKind.RESTORE_DEFAULT.value}

    primary = cell.primary_config.name
    base = baseline_tgs.get(primary)
    rows = []
    if base is not None:
        ids = " ".join(r.job_id for r in measured
                       if r.kind == RunKind.BASELINE.value and r.config_tag == primary)
        rows.append(Row("baseline-deployed", "(deployed env)", base,
                        _mean_step(measured, primary), 0.0, ids, kind=RunKind.BASELINE.value))
    for r in measured:
        if r.config_tag != primary or r.kind not in (
            RunKind.PROFILE.value, RunKind.STACK.value, RunKind.PIPELINE_SHAPE.value,
            RunKind.RESTORE_DEFAULT.value,
        ):
            continue
        name = "baseline-no-env" if r.kind == RunKind.RESTORE_DEFAULT.value else r.profile
        flags = flags_text(r) if r.kind != RunKind.PIPELINE_SHAPE.value else " ".join(
            f"{k}={v}" for k, v in r.overrides if k.startswith("num_"))
        cmp = verdicts.compare([r.tgs or 0.0], measured, primary)
        rows.append(Row(name, flags, r.tgs or 0.0, r.step_seconds, delta_pct(r.tgs, base), r.job_id,
                        ci_low=cmp.ci_low_pct if cmp else None, ci_high=cmp.ci_high_pct if cmp else None,
                        direction=cmp.verdict.value if cmp else "", kind=r.kind,
                        derived=r.tgs_derived))
    rows.sort(key=lambda row: row.tgs, reverse=True)

    # ⭐ marks the recipe (what the lock and wave 6 use: a stack only when it beats the best
    # single winner beyond noise); without one, the fastest better row (a pipeline shape).
    chosen = verdicts.recipe(measured, primary)
    winner = next((row for row in rows if chosen is not None and row.job_ids == chosen.job_id
                   and row.profile == chosen.profile), None) or next(
        (row for row in rows if row.profile not in ("baseline-deployed", "baseline-no-env")
         and row.direction == "better"), None)
    if winner is not None:
        rows = [Row(**{**row.__dict__, "winner": True}) if row is winner else row for row in rows]
        winner = next(row for row in rows if row.winner)
    top = rows[:TOP_ROWS]
    bottom = [row for row in rows[TOP_ROWS:]][-BOTTOM_ROWS:]
    negative = [row for row in rows if row.direction == "worse"]

    cross = [(r, delta_pct(r.tgs, baseline_tgs.get(r.config_tag)))
             for r in measured if r.kind == RunKind.CROSS_CONFIG.value]
    evidence = next((r for r in results if r.kind == RunKind.EVIDENCE.value), None)
    profiles_tested = len({r.profile for r in results if r.kind == RunKind.PROFILE.value})
    views = evidence_views(results, loaded)
    return ReportData(
        cell=cell, date=(today or _measured_on(results)).isoformat(), nodelist=nodelist, backend=backend,
        baseline_tgs=baseline_tgs, noise_pct=noise, pooled_noise_pct=pooled,
        restore_default_delta=restore,
        leaderboard=rows, top=top, bottom=bottom, winner=winner, negative=negative,
        failures=[r for r in results if not r.measured], cross_config=cross, evidence=evidence,
        appendix=sorted(results, key=_job_number), profiles_tested=profiles_tested,
        evidence_runs=tuple(views), why=why(views), pipeline=pipeline(cell, measured, base,
                                                           verdicts.noise(measured, primary)),
    )


def _mean_step(measured: list[JobResult], config_tag: str) -> float | None:
    values = [r.step_seconds for r in measured if r.kind == RunKind.BASELINE.value
              and r.config_tag == config_tag and r.step_seconds is not None]
    return statistics.fmean(values) if values else None
