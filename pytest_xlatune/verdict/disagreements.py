"""Identical settings that disagree (pure): the groups of runs, and the evidence runs, that the
report lists under "Identical settings disagree" (verdicts.unstable says which)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..results import JobResult, RunKind
from .one_run import profiled
from .verdicts import group_of, identical_groups, pooled_evidence, settings_key, table, unstable


@dataclass(frozen=True)
class Disagreement:
    """Identical-settings runs whose spread is beyond what the other groups show."""

    runs: tuple[JobResult, ...]
    spread_pct: float  # (max − min) / mean

    def text(self) -> str:
        values = ", ".join(f"{v:.1f} (job {j})" for r in self.runs for j, v in (r.runs or ((r.job_id, r.tgs or 0.0),)))
        return f"{' = '.join(sorted({r.profile for r in self.runs}))}: {values}, spread {self.spread_pct:.1f} %"


def disagreements(results: Sequence[JobResult], config_tag: str) -> list[Disagreement]:
    """Groups of identical-settings runs that disagree beyond the others' noise (unstable),
    and evidence runs outside their group's prediction interval."""
    found = []
    for group in identical_groups(results, config_tag):
        # the group's own runs disagree (a contradicting profiled re-run is listed below, alone)
        if settings_key(group[0]) not in table(results, config_tag).unstable or len(group_of(group[0], results)) < 2:
            continue
        values = list(group_of(group[0], results))
        key = settings_key(group[0])
        joined = [r for r in results if settings_key(r) == key and pooled_evidence(r, results)]
        found.append(Disagreement((*group, *joined), (max(values) - min(values)) / (sum(values) / len(values)) * 100))
    baseline = table(results, config_tag).baseline
    for r in results:
        if (
            profiled(r)
            and not pooled_evidence(r, results)
            and r.config_tag == config_tag
            and r.measured
            and r.tgs is not None
            and unstable(r, results)
        ):
            values = [*(baseline if r.kind is RunKind.EVIDENCE else group_of(r, results)), r.tgs]
            found.append(Disagreement((r,), (max(values) - min(values)) / (sum(values) / len(values)) * 100))
    return found
