"""The leaderboard: one Row per profile and settings measured on the primary config tag, the
baseline first, fastest first, the recipe starred (pure; report/data.py puts it in ReportData)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..plan.expand import RunKind
from ..results import JobResult, delta_pct
from ..verdict import choice, figures, stats, verdicts


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
    direction: str = ""  # better | worse | within_noise | unstable | … (stats.direction)
    judged: str = ""  # the direction in the words every output prints (stats.words)
    kind: RunKind | None = None  # the run's kind (baseline rows: RunKind.BASELINE)
    derived: bool = False  # TGS derived from the step time (the log printed no Tokens/s/device)
    numerics: str = ""  # same | changed | unknown | "" (baseline rows)
    departed: str = ""  # where its loss left the baseline's, when changed
    detectable_pct: float | None = None  # smallest Δ% this many runs could call better
    settings: int = 0
    overrides: str = ""  # the run's own MaxText overrides (e.g. dtype=bfloat16)
    runs: str = ""  # the runs behind tgs: `600.5 = mean of 700.5, 500.6; jobs 6, 7` (figures.py)
    unstable: bool = False  # its runs disagree beyond the noise: never the recipe

    def job_text(self) -> str:
        """The leaderboard's job cell, the same in the markdown and the HTML report: the runs
        behind the figure when there are several (`600.5 = mean of 700.5, 500.6; jobs 6, 7`),
        else the job id."""
        return self.runs if " = mean of " in self.runs else self.job_ids

    def jobs_text(self) -> str:
        """`job 5` or `jobs 5, 6`: its jobs in a sentence, listed as the runs text lists them."""
        ids = self.job_ids.split()
        return ("job " if len(ids) == 1 else "jobs ") + ", ".join(ids)

    def numerics_text(self) -> str:
        """The leaderboard's numerics cell: same | changed | — (not known) | reference (a baseline row)."""
        return NUMERICS_WORDS.get(self.numerics, self.numerics)


# The words of the leaderboard's numerics column, by Row.numerics.
NUMERICS_WORDS = {"same": "same", "changed": "changed", "unknown": "—", "": "reference"}


def flags_text(result: JobResult) -> str:
    parts = list(result.xla_flags) + [f"{k}={v}" for k, v in result.env]
    return " ".join(parts) if parts else "(deployed env, no extra flags)"


def rows(measured: Sequence[JobResult], primary: str, base: float | None) -> list[Row]:
    """The leaderboard's rows, fastest first: the primary tag's baseline (when measured), then one
    row per profile, stack, pipeline shape or restore-default and its settings."""
    board: list[Row] = []
    if base is not None:
        first = next(r for r in measured if r.kind is RunKind.BASELINE and r.config_tag == primary)
        base_fig = figures.figure(first, measured)
        ids = " ".join(base_fig.job_ids) if base_fig else ""
        board.append(
            Row(
                "baseline-deployed",
                "(deployed env)",
                base,
                _mean_step(measured, primary),
                0.0,
                ids,
                kind=RunKind.BASELINE,
                runs=base_fig.runs_text() if base_fig else "",
            )
        )
    seen: set[tuple[object, ...]] = set()
    for r in measured:
        if r.config_tag != primary or r.kind not in (
            RunKind.PROFILE,
            RunKind.STACK,
            RunKind.PIPELINE_SHAPE,
            RunKind.RESTORE_DEFAULT,
        ):
            continue
        # One row per profile and settings: a profile and its confirmation (or repeat) are one
        # measurement; two names for the same settings keep their rows, with the same figure.
        name = "baseline-no-env" if r.kind is RunKind.RESTORE_DEFAULT else r.profile
        if (figures.group_key(r), name) in seen:
            continue
        seen.add((figures.group_key(r), name))
        fig = figures.figure(r, measured)
        if fig is None:
            continue
        flags = (
            flags_text(r)
            if r.kind is not RunKind.PIPELINE_SHAPE
            else " ".join(f"{k}={v}" for k, v in r.overrides if k.startswith("num_"))
        )
        cmp = fig.comparison
        checks = [verdicts.numerics_check(p, measured) for p in figures.peers(r, measured)]
        check = next((c for c in checks if c.verdict.value == "changed"), checks[0])
        board.append(
            Row(
                name,
                flags,
                fig.tgs,
                fig.step_seconds,
                cmp.delta_pct if cmp else delta_pct(fig.tgs, base),
                " ".join(fig.job_ids),
                ci_low=cmp.ci_low_pct if cmp else None,
                ci_high=cmp.ci_high_pct if cmp else None,
                direction=stats.direction(cmp) if cmp else "",
                judged=stats.words(cmp) if cmp else "",
                kind=r.kind,
                derived=r.tgs_derived,
                numerics=check.verdict.value,
                departed=check.where(),
                detectable_pct=verdicts.detectable_effect(measured, primary),
                settings=choice.settings_count(r, measured),
                overrides=" ".join(f"{k}={v}" for k, v in r.overrides) if r.kind is not RunKind.PIPELINE_SHAPE else "",
                runs=fig.runs_text(),
                unstable=fig.unstable,
            )
        )
    board.sort(key=lambda row: row.tgs, reverse=True)
    return board


def star(rows: list[Row], chosen: JobResult | None) -> tuple[list[Row], Row | None]:
    """The rows with ⭐ on the recipe the lock holds (`chosen`, choice.deployable: a stack only
    when it beats the best single winner beyond noise; without a profile or stack, a winning
    pipeline shape), and that row; a recipe judged unstable or not better gets no star."""
    winner = next(
        (
            row
            for row in rows
            if chosen is not None
            and chosen.job_id in row.job_ids.split()
            and row.profile == chosen.profile
            and row.direction == "better"
            and not row.unstable
        ),
        None,
    )
    if winner is None:
        return rows, None
    starred = [Row(**{**row.__dict__, "winner": True}) if row is winner else row for row in rows]
    return starred, next(row for row in starred if row.winner)


def _mean_step(measured: Sequence[JobResult], config_tag: str) -> float | None:
    values = [
        r.step_seconds
        for r in measured
        if r.kind is RunKind.BASELINE and r.config_tag == config_tag and r.step_seconds is not None
    ]
    return statistics.fmean(values) if values else None
