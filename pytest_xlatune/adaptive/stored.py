"""Which stored runs of a cell are the adaptive sweep's controls and repeats, and the results
with them pooled (pure): a control is a baseline run, a repeat joins its item's result."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..cell.values import Cell
from ..plan.expand import RunKind, RunSpec
from ..results import JobResult, Verdict
from .keys import ROLES, plan_items
from .values import Budget, Plan, Role

CONTROL_BASE = 1000  # control n is the baseline's run remeasured(CONTROL_BASE + n): its own key
MAX_CONTROLS = 100
RERUN = (Verdict.CANCELLED, Verdict.DISK_FULL)  # engine.runner.RERUN_VERDICTS: not yet a run

Roles = dict[str, tuple[str, Role]]  # run key → (plan item, role)


def run_roles(plan: Plan, planned: Sequence[RunSpec], key: Callable[[RunSpec], str]) -> Roles:
    """The keys of the planned runs, of their possible repeats and of the controls."""
    roles: Roles = {}
    knobs = plan.rules
    for item, spec in zip(plan.items, planned):
        roles[key(spec)] = (item.name, item.role)
        if item.role is Role.PROFILE:
            for n in range(1, knobs.repeat_cap + knobs.race_cap + 1):
                roles[key(spec.remeasured(n))] = (item.name, Role.PROFILE)
    base = planned[[i.name for i in plan.items].index(plan.baseline.name)]
    for n in range(MAX_CONTROLS):
        roles[key(base.remeasured(CONTROL_BASE + n))] = (plan.baseline.name, Role.CONTROL)
    return roles


def cell_roles(cell: Cell, specs: Sequence[RunSpec], key: Callable[[RunSpec], str], image: str) -> Roles:
    """The roles of a whole cell's plan (the primary tag's plannable runs); {} without a baseline."""
    primary = cell.primary_config.name
    if any(s.kind.value.startswith("gate") for s in specs):
        return {}
    planned = [s for s in specs if s.kind in ROLES and s.config_tag == primary]
    if not any(s.kind is RunKind.BASELINE for s in planned):
        return {}
    plan = Plan(plan_items(cell, planned, image), budget=Budget(queue_hours=None))
    return run_roles(plan, planned, key)


def pooled(found: list[JobResult], latest: Mapping[str, JobResult], roles: Roles) -> list[JobResult]:
    """The current results with the controls added (baseline runs: the report pools them with
    the baseline) and each candidate's repeats pooled into its result (mean of the runs)."""
    extra: dict[str, list[JobResult]] = {}
    controls = []
    known = {r.key for r in found}
    for key, result in latest.items():
        found_role = roles.get(key)
        if found_role is None or result.verdict in RERUN or key in known:
            continue
        name, role = found_role
        if role is Role.CONTROL:
            controls.append(result)
        elif result.measured:
            extra.setdefault(name, []).append(result)
    out = []
    for result in found:
        repeats = extra.get(result.item, [])
        out.append(_pool([result, *repeats]) if repeats and result.measured and not result.shared_from else result)
    return out + sorted(controls, key=lambda r: r.submitted_at)


def pool_stored(
    cell: Cell,
    specs: Sequence[RunSpec],
    latest: Mapping[str, JobResult],
    key: Callable[[RunSpec], str],
    image: str,
    found: list[JobResult],
) -> list[JobResult]:
    """`pooled` for a reader of the store alone (python -m pytest_xlatune.report)."""
    roles = cell_roles(cell, specs, key, image)
    return pooled(found, latest, roles) if roles else found


def _pool(runs: list[JobResult]) -> JobResult:
    measured = [r for r in runs if r.measured and r.tgs is not None]
    steps = [r.step_seconds for r in measured if r.step_seconds is not None]
    jobs = ", ".join(r.job_id for r in measured)
    return replace(
        runs[0],
        tgs=statistics.fmean(r.tgs or 0.0 for r in measured),
        tgs_values=tuple(v for r in measured for v in r.tgs_values),
        step_seconds=statistics.fmean(steps) if steps else runs[0].step_seconds,
        runs=tuple((r.job_id, r.tgs or 0.0) for r in measured),
        reason=(runs[0].reason + "; " if runs[0].reason else "") + f"mean of {len(measured)} runs (jobs {jobs})",
    )


def full_run_minutes(results: Sequence[JobResult]) -> float:
    """What one full run costs (the fixed plan's estimate): the median node-minutes of the runs
    that ran to their end (0 before any did)."""
    full = [
        r.node_minutes
        for r in results
        if r.node_minutes and r.verdict.measured and r.verdict is not Verdict.STOPPED_EARLY and not r.shared_from
    ]
    return statistics.median(full) if full else 0.0


def savings(results: Sequence[JobResult], events: Sequence[Mapping[str, Any]]) -> str:
    """One line: what early stops, shared duplicates and skipped items saved ("" for nothing)."""
    full = full_run_minutes(results)
    latest = {r.key: r for r in results}.values()
    stopped = [r for r in latest if r.verdict is Verdict.STOPPED_EARLY and not r.shared_from]
    shared = [r for r in latest if r.shared_from]
    conclude = next((e for e in reversed(events) if e.get("event") == "conclude"), None)
    skipped = {str(e.get("item")) for e in events if e.get("event") == "skipped"}
    skipped |= set(conclude.get("skipped", [])) if conclude else set()
    if not (stopped or shared or skipped):
        return ""
    stop_saved = sum(max(0.0, full - (r.node_minutes or 0.0)) for r in stopped)
    parts = [
        f"{len(stopped)} early stop(s) {stop_saved:.2f}",
        f"{len(shared)} shared duplicate(s) {full * len(shared):.2f}",
        f"{len(skipped)} skipped item(s) {full * len(skipped):.2f}",
    ]
    last_skip = next((e for e in reversed(events) if e.get("event") == "skipped"), None)
    # Why items were skipped, as recorded when they were (a Conclude noted later, e.g. by a rerun
    # that ran nothing, must not change the line); nothing skipped, no reason.
    reason = last_skip["reason"] if last_skip else conclude["reason"] if conclude and skipped else ""
    why = f" ({reason})" if reason else ""
    return "saved node-minutes: " + ", ".join(parts) + why


def summary_lines(results: Sequence[JobResult], events: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """What an adaptive sweep's summary and report say of it: what was saved, the drift its
    controls saw (the last `drift` record) and the order its candidates were tried in where it
    was not the list's (the last `order` record); () for a sweep that did none of these."""
    drift, order = (
        next((str(e.get("text", "")) for e in reversed(events) if e.get("event") == event), "")
        for event in ("drift", "order")
    )
    return tuple(line for line in (savings(results, events), drift, order) if line)
