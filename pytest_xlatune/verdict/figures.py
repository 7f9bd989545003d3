"""One figure per settings (pure): the value every output shows for a run, and the runs behind it.

Runs with identical effective settings (a profile and its confirmation, a shared duplicate, the
baseline repeats) are one measurement of those settings: the terminal line, the junit properties,
the HTML and markdown reports, the CSV/JSON exports and the lock all show the mean of their runs,
its Δ % vs the baseline and the jobs behind it (`600.5 = mean of 700.5, 500.6; jobs 6, 7`).
Profiled runs (evidence) measure steps 9-14, after the profiler's window: the winner's profiled
re-run is one of its settings' runs when it agrees with them (verdicts.pooled_evidence; marked
`(profiled)` in the runs text), else it stands alone, checked against its group, as the
baseline's evidence run always does.
The comparison is verdicts.compare_result's: each side with its own spread, unstable when the
runs disagree.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..results import JobResult, RunKind
from . import one_run, stats, verdicts

# Runs shown without a Δ % vs the baseline: the baseline itself and the gate's old-image controls
# (a Δ vs the new image's baseline would say nothing about them).
UNCOMPARED = (RunKind.BASELINE, RunKind.GATE_OLD_BASELINE, RunKind.GATE_OLD_RECIPE)


@dataclass(frozen=True)
class Figure:
    """The pooled TGS of one group of identical-settings runs and how it compares."""

    tgs: float
    runs: tuple[tuple[str, float], ...]  # (job id, steady TGS) of every run behind it, by job id
    step_seconds: float | None
    comparison: stats.Comparison | None  # vs the tag's baseline; None for UNCOMPARED kinds
    profiles: tuple[str, ...] = ()  # the profile names that ran these settings
    profiled: tuple[str, ...] = ()  # the job ids among `runs` that ran with the profiler

    @property
    def job_ids(self) -> tuple[str, ...]:
        return tuple(job for job, _ in self.runs)

    @property
    def delta_pct(self) -> float | None:
        return self.comparison.delta_pct if self.comparison else None

    @property
    def interval(self) -> tuple[float, float] | None:
        c = self.comparison
        return (c.ci_low_pct, c.ci_high_pct) if c else None

    @property
    def direction(self) -> str:
        """better | worse | within_noise | unstable | … (stats.direction), "" when not compared."""
        return stats.direction(self.comparison) if self.comparison else ""

    @property
    def unstable(self) -> bool:
        return bool(self.comparison and self.comparison.unstable)

    def runs_text(self) -> str:
        """`600.5 = mean of 700.5, 500.6; jobs 6, 7`, or `700.5 (job 6)` for one run; a profiled
        run's value is marked: `500.6 (profiled)`."""
        if len(self.runs) == 1:
            return f"{self.tgs:.1f} ({jobs_text(self.job_ids)})"
        values = ", ".join(f"{tgs:.1f}{' (profiled)' if job in self.profiled else ''}" for job, tgs in self.runs)
        return f"{self.tgs:.1f} = mean of {values}; {jobs_text(self.job_ids)}"

    def text(self) -> str:
        """The whole figure on one line: TGS, Δ % and interval, direction, and the runs."""
        line = f"{self.tgs:.1f} TGS"
        if self.comparison is not None:
            c = self.comparison
            line += f" {c.delta_pct:+.2f} % [{c.ci_low_pct:+.1f}, {c.ci_high_pct:+.1f}] {stats.words(c)}"
        if len(self.runs) > 1:
            line += f" ({self.runs_text()})"
        return line


def _order(job: str) -> tuple[int, str]:
    return (int(job), "") if job.isdigit() else (0, job)


def in_job_order(job_ids: Sequence[str]) -> tuple[str, ...]:
    """The job ids once each, in job order (`3, 5, 20`, never `3, 20, 5`)."""
    return tuple(sorted(dict.fromkeys(job_ids), key=_order))


def jobs_text(job_ids: Sequence[str]) -> str:
    """`job 5` or `jobs 3, 5, 20`: jobs in a sentence, in job order, as every output lists them."""
    ids = in_job_order(job_ids)
    return ("job " if len(ids) == 1 else "jobs ") + ", ".join(ids)


def odds_text(comparison: stats.Comparison, odds: float | None) -> str:
    """What a regression gate's failure line adds when the odds decided it (`stats.decide_final`:
    its interval excluded no change but reached across the tolerance line); "" otherwise."""
    if odds is None:
        return ""
    return (
        f"; the interval reaches across the tolerance line: decided on the odds after "
        f"{comparison.n_candidate} run(s), {odds * 100:.0f} % that it regresses beyond the tolerance"
    )


def group_key(result: JobResult) -> tuple[object, ...]:
    """What makes two runs one measurement: identical effective settings, profiled or not."""
    return (one_run.profiled(result), verdicts.settings_key(result))


def _member_key(result: JobResult, results: Sequence[JobResult]) -> tuple[object, ...]:
    """`group_key`, with the winner's profiled re-run that joined its group (pooled_evidence)
    counted as a plain run of its settings."""
    alone = one_run.profiled(result) and not verdicts.pooled_evidence(result, results)
    return (alone, verdicts.settings_key(result))


def peers(result: JobResult, results: Sequence[JobResult]) -> list[JobResult]:
    """The measured runs behind `result`'s figure (a shared duplicate: its source's runs)."""
    if (source := verdicts.source_of(result, results)) is not None:
        return peers(source, results)
    if one_run.profiled(result) and not verdicts.pooled_evidence(result, results):
        # a profiled run outside its group's interval (or too short) is checked against it, alone
        return [result] if result.measured and result.tgs is not None else []
    key = _member_key(result, results)
    found = [
        r
        for r in results
        if r.measured
        and r.tgs is not None
        and not r.shared_from
        and r.config_tag == result.config_tag
        and _member_key(r, results) == key
    ]
    if not found and result.measured and result.tgs is not None:
        found = [result]
    return sorted({r.job_id: r for r in found}.values(), key=lambda r: _order(r.job_id))


def figure(result: JobResult, results: Sequence[JobResult]) -> Figure | None:
    """The figure of a measured run among `results`; None for a run without a measurement."""
    runs = peers(result, results)
    if not runs:
        return None
    # Every run behind each result (a pooled adaptive result holds its repeats): the values the
    # comparison's candidate mean is taken over, so the TGS shown and its Δ % agree.
    each = sorted(
        {job: (job, tgs) for r in runs for job, tgs in (r.runs or ((r.job_id, r.tgs or 0.0),))}.values(),
        key=lambda run: _order(run[0]),
    )
    steps = [r.step_seconds for r in runs if r.step_seconds is not None]
    comparison = None if result.kind in UNCOMPARED else verdicts.compare_result(result, results)
    return Figure(
        tgs=statistics.fmean(v for _, v in each),
        runs=tuple(each),
        step_seconds=statistics.fmean(steps) if steps else None,
        comparison=comparison,
        profiles=tuple(dict.fromkeys(r.profile for r in runs if len(runs) == 1 or not one_run.profiled(r))),
        profiled=tuple(r.job_id for r in runs if one_run.profiled(r) and len(runs) > 1),
    )


def by_item(results: Sequence[JobResult]) -> dict[str, Figure]:
    """Every measured run's figure by its item name (spec name), computed once per group."""
    cache: dict[tuple[object, ...], Figure | None] = {}
    out: dict[str, Figure] = {}
    for r in results:
        key = (r.config_tag, r.kind in UNCOMPARED, _member_key(r, results))
        if key not in cache:
            cache[key] = figure(r, results)
        found = cache[key]
        if found is not None and (r.measured or r.shared_from):
            out[r.item] = found
    return out
