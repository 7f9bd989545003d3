"""The adaptive sweep's driver: the planner's Plan of one cell (built once from the selected runs),
its SweepState rebuilt from the store on every call — no memory of its own, so a resumed session
decides as the killed one would — and what `planner.decide` returns carried out: controls and
repeats run in place, a win's checks on the other config tags run as their wave-6 runs (the
wave-6 items then reuse them), early stops through the watcher's judge (engine/early_stop.py),
the conclusion as skipped items."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from ..adaptive import planner
from ..adaptive.judge import build as build_board
from ..adaptive.keys import ROLES, plan_items
from ..adaptive.order import Prior
from ..adaptive.stored import CONTROL_BASE, RERUN, full_run_minutes, pooled, run_roles
from ..adaptive.values import (
    Budget,
    Conclude,
    Control,
    CrossCheck,
    Observation,
    Plan,
    PlanItem,
    Repeat,
    ReportView,
    Role,
    RunState,
    Share,
    Submit,
    SweepState,
)
from ..cell.values import Cell
from ..launch.base import SubmittedJob
from ..plan.catalog import EvidenceFacts
from ..plan.expand import RunKind, RunSpec
from ..results import JobResult, Verdict
from ..verdict import numerics, verdicts
from . import report_view
from .early_stop import stop_judge
from .prior import record_order, with_evidence
from .watch import Judge

if TYPE_CHECKING:  # a type only: the runner imports this module
    from ..store import ResultStore
    from .poller import Poller
    from .runner import RunOutcome

MAX_STEPS_PER_ITEM = 64  # actions carried out before one item at most (a guard, never reached)


class SweepView(Protocol):
    """What the driver reads of, and asks of, its engine.sweep.Sweep."""

    @property
    def cell(self) -> Cell: ...
    @property
    def image(self) -> str: ...
    @property
    def budget(self) -> Budget: ...
    @property
    def nodes(self) -> int: ...
    @property
    def numerics(self) -> numerics.Mode: ...
    @property
    def store(self) -> ResultStore: ...
    @property
    def poller(self) -> Poller: ...

    def key(self, spec: RunSpec) -> str: ...
    def skip_reason(self, spec: RunSpec) -> str: ...
    def run(self, spec: RunSpec) -> RunOutcome: ...
    def report(self, text: str) -> None: ...
    def clock(self) -> float: ...
    def stopped_early(self, job_id: str) -> str: ...
    def evidence_facts(self) -> EvidenceFacts | None: ...


@dataclass
class Driver:
    """Carries out the planner's decisions for one Sweep (`sweep`: the engine.sweep.Sweep)."""

    sweep: SweepView
    plan: Plan
    specs: dict[str, RunSpec]  # plan item → its selected run
    roles: dict[str, tuple[str, Role]]  # run key → (plan item, role): planned runs, repeats, controls
    last: str  # the last planned item in execution order
    cross: dict[str, RunSpec] = field(default_factory=dict)  # other config tag → its selected wave-6 run
    _cross_keys: dict[tuple[str, str], str] = field(default_factory=dict)
    _ordered: tuple[str, Plan] | None = None  # (evidence job id, the plan with its hints)
    _skipped_here: set[str] = field(default_factory=set)  # skipped items: final, never run later
    _report_seen: tuple[tuple[object, ...], ReportView] | None = None  # (the stored results, what the report said)

    @classmethod
    def plan_for(cls, sweep: SweepView, upcoming: Sequence[RunSpec], prior: Prior | None = None) -> Driver | None:
        """The driver of the selected runs of the primary config tag; None when there is nothing
        to plan adaptively (no baseline selected, or a gate run). `prior`: expected gains by item
        (adaptive.order): likely winners run first."""
        primary = sweep.cell.primary_config.name
        if any(s.kind.value.startswith("gate") for s in upcoming):
            return None
        planned = [s for s in upcoming if s.kind in ROLES and s.config_tag == primary]
        if not any(s.kind is RunKind.BASELINE for s in planned):
            return None
        items = plan_items(sweep.cell, planned, sweep.image)
        cross = {s.config_tag: s for s in upcoming if s.kind is RunKind.CROSS_CONFIG and s.config_tag != primary}
        plan = Plan(
            items,
            thresholds=sweep.cell.thresholds,
            budget=sweep.budget,
            steady_steps=max(3, sweep.cell.steps - 5),
            other_tags=tuple(cross),
            prior=prior or Prior(),
        )
        specs = {item.name: spec for item, spec in zip(items, planned)}
        roles = run_roles(plan, planned, sweep.key)
        return cls(sweep, plan, specs, roles, planned[-1].name, cross)

    # ---- the state, from the store ---------------------------------------------------------

    def state(
        self, now: float, running: Observation | None = None, latest: Mapping[str, JobResult] | None = None
    ) -> SweepState:
        """Every stored run of the plan as the planner sees it (and the running one); `latest`:
        the store's latest results when the caller has just read them."""
        latest = self.sweep.store.latest_by_key() if latest is None else latest
        stored = list(latest.values())
        runs, excluded = [], set()
        for key, result in latest.items():
            found = self.roles.get(key) or self._winner_evidence(result)
            if found is None or result.verdict in RERUN:
                continue
            name, role = found
            if result.shared_from:
                excluded.add(name)
                continue
            run = _observation(result, self._measured_item(name, role, result), role)
            if role is Role.PROFILE and self._never_the_recipe(result, stored):
                run = replace(run, steady=(), state=RunState.FAILED, failure="numerics_changed")
            runs.append(run)
        for name, spec in self.specs.items():  # candidates the catalog rule leaves out never run
            if self.plan.item(name).role is Role.PROFILE and self.sweep.skip_reason(spec):
                excluded.add(name)
        if running is not None:
            runs.append(running)
        runs.sort(key=lambda r: r.submitted_at)
        # Queue time so far: the runs' own (submitted to ended; the sweep is serial), so a sweep
        # resumed days later is charged its runs, not the days between its sessions.
        spent = sum((r.ended_at if r.ended_at is not None else now) - r.submitted_at for r in runs)
        checked, regressing = self._cross_checks(latest, stored)
        return SweepState(
            self.ordered(),
            tuple(runs),
            started_at=now - spent,
            shared=frozenset(excluded),
            checked=checked,
            regressing=regressing,
            report=self._report(stored),
        )

    def ordered(self) -> Plan:
        """The plan as the planner orders it now: with the evidence run's hints once it has
        ended (engine/prior.with_evidence), the plan as built before."""
        facts = self.sweep.evidence_facts()
        if facts is None:
            return self.plan
        if self._ordered is None or self._ordered[0] != facts.job_id:
            self._ordered = (facts.job_id, with_evidence(self.plan, self.specs, facts))
        return self._ordered[1]

    def _cross_check_run(self, item: str, tag: str) -> RunSpec:
        return self.cross[tag].resolve(self.specs[item])

    def _cross_checks(
        self, latest: Mapping[str, JobResult], stored: Sequence[JobResult]
    ) -> tuple[frozenset[tuple[str, str]], frozenset[str]]:
        """The candidates' ended checks on the other config tags and those that regressed one
        (report_view.cross_checks), their wave-6 runs found under the keys the wave-6 items use."""
        candidates = [name for name in self.specs if self.plan.item(name).role is Role.PROFILE]
        return report_view.cross_checks(
            latest, stored, tuple(self.cross), candidates, self._cross_key, self.sweep.cell.thresholds.regression_pct
        )

    def _cross_key(self, name: str, tag: str) -> str:
        if (name, tag) not in self._cross_keys:
            self._cross_keys[name, tag] = self.sweep.key(self._cross_check_run(name, tag))
        return self._cross_keys[name, tag]

    def _report(self, stored: Sequence[JobResult]) -> ReportView:
        """What the report says now (report_view.view), judged again only when a result changed."""
        seen = tuple((r.key, r.verdict, r.tgs, r.runs) for r in stored)
        if self._report_seen is None or self._report_seen[0] != seen:
            named = {name: spec.kind for name, spec in self.specs.items()}
            view = report_view.view(stored, self.sweep.cell.primary_config.name, self.sweep.numerics, self.roles, named)
            self._report_seen = (seen, view)
        return self._report_seen[1]

    def _never_the_recipe(self, result: JobResult, stored: Sequence[JobResult]) -> bool:
        """A measured candidate whose loss left the baseline's (fail mode): no repeat, no
        confirmation and no recipe are spent on it, as if it had failed."""
        return (
            self.sweep.numerics is numerics.Mode.FAIL and result.measured and verdicts.numerics_changed(result, stored)
        )

    def _winner_evidence(self, result: JobResult) -> tuple[str, Role] | None:
        if result.kind is not RunKind.WINNER_EVIDENCE or result.item not in self.specs:
            return None
        return result.item, Role.WINNER_EVIDENCE

    def _measured_item(self, name: str, role: Role, result: JobResult) -> PlanItem:
        """The plan item whose settings a stored run measured: a winner's evidence run measured
        the candidate it was resolved from (its steps after the profiler's window are a run of
        those settings: judge.build pools them), every other run its own item."""
        if role is Role.WINNER_EVIDENCE and result.resolved_from:
            source = next(
                (
                    item
                    for item in self.plan.items
                    if item.role is Role.PROFILE and self.specs[item.name].profile == result.resolved_from
                ),
                None,
            )
            if source is not None:
                return replace(self.plan.item(name), key=source.key)
        return self.plan.item(name)

    # ---- before and after an item ----------------------------------------------------------

    def before(self, spec: RunSpec) -> str:
        """Run the controls and repeats due before `spec`; why `spec` is skipped ("" = run it)."""
        if spec.name not in self.specs:
            return ""
        return self._drive(spec.name)

    def after(self, spec: RunSpec) -> None:
        """After the last planned item: the repeats, races and closing control still due (after
        the winner's evidence run only the control the lock still needs)."""
        if spec.name != self.last:
            return
        report = self.state(self.sweep.clock()).report
        if self.plan.item(spec.name).role is not Role.WINNER_EVIDENCE or (report is not None and report.unbracketed):
            self._drive(None)

    def _drive(self, current: str | None) -> str:
        seen = (-1, -1)
        for _ in range(MAX_STEPS_PER_ITEM):
            now = self.sweep.clock()
            state = self.state(now)
            record_order(self.sweep.store, state.plan)
            if (len(state.runs), len(state.checked)) == seen:
                return ""  # the last action added no run (e.g. it failed to resolve): go on
            seen = (len(state.runs), len(state.checked))
            # Shares are carried out by the shared item itself (Sweep.run stores its share).
            actions = planner.decide(state, now)
            if any(isinstance(a, Share) and a.item == current for a in actions):
                return ""
            action = next((a for a in actions if not isinstance(a, Share)), None)
            if isinstance(action, Control):
                self._control(state, action, current)
            elif isinstance(action, Repeat):
                self._repeat(state, action)
            elif isinstance(action, CrossCheck):
                self._cross_check(action)
            elif isinstance(action, Conclude):
                self._note(action)
                if current is not None and current in action.skipped:
                    return self._skipped(current, f"{action.reason} ({action.why.value})")
                return ""
            elif (
                isinstance(action, Submit)
                and current is not None
                and action.item != current
                and self.plan.item(current).role is Role.PROFILE
                and not any(r.item == current for r in state.runs)
                and (why := planner.search_over(state, now))
            ):
                return self._skipped(current, why)  # past a stop condition: only variants still run
            elif isinstance(action, Submit) and self._early_evidence(action, current):
                # A first win's second run: the recipe's evidence run of that candidate, now; the
                # evidence item, when the engine reaches it, reuses it if it resolves the same.
                spec = self.specs[action.item].resolve(self.specs[action.source])
                self.sweep.report(f"{action.item}: {action.source} with the profiler: {action.reason}")
                self.sweep.run(spec)
            elif isinstance(action, Submit) and self._ahead(action, current, state):
                # A likely winner listed later (plan.prior): run it now; its own item reuses the run.
                self.sweep.report(f"{action.item}: run ahead of {current}: {action.reason}")
                self.sweep.run(self.specs[action.item])
            else:  # the current item (or a share, a baseline, a stop of a job not ours): run it
                return ""
        return ""

    def _early_evidence(self, action: Submit, current: str | None) -> bool:
        """The planner asks for the recipe's evidence run of a candidate before the engine
        reaches the evidence item (a first win's confirming run: planner._confirming)."""
        return (
            bool(action.source)
            and action.item != current
            and action.item in self.specs
            and action.source in self.specs
            and self.plan.item(action.item).role is Role.WINNER_EVIDENCE
        )

    def _ahead(self, action: Submit, current: str | None, state: SweepState) -> bool:
        """The planner's next candidate is another, later-listed one by expected gain (only with
        a prior or the evidence run's hints: without them it is always the current item), whose
        item has not been skipped in this session."""
        return (
            bool(state.plan.prior.gains)
            and current is not None
            and action.item != current
            and action.item in self.specs
            and action.item not in self._skipped_here
            and self.plan.item(action.item).role is Role.PROFILE
            and not any(r.item == action.item for r in state.runs)
        )

    def _control(self, state: SweepState, action: Control, current: str | None) -> None:
        n = sum(1 for r in state.runs if r.role is Role.CONTROL)
        spec = self.specs[self.plan.baseline.name].remeasured(CONTROL_BASE + n)
        where = f"before {current}" if current else "after the last item"
        self.sweep.report(f"{spec.name}: control {n + 1} {where}: {action.reason}")
        self.sweep.run(spec)
        # What the controls have seen so far, for the report (built from the store alone).
        self.sweep.store.append("drift", text=self.drift())

    def _repeat(self, state: SweepState, action: Repeat) -> None:
        n = sum(1 for r in state.runs if r.item == action.item and r.role is Role.PROFILE)
        spec = self.specs[action.item].remeasured(n)
        self.sweep.report(f"{action.item}: run {n + 1}: {action.reason}")
        self.sweep.run(spec)

    def _cross_check(self, action: CrossCheck) -> None:
        spec = self._cross_check_run(action.item, action.config_tag)
        self.sweep.report(
            f"{spec.name}: checking {action.item} on [{action.config_tag}] before the search stops: {action.reason}"
        )
        self.sweep.run(spec)
        latest = self.sweep.store.latest_by_key()
        if action.item in self._cross_checks(latest, list(latest.values()))[1]:
            self.sweep.report(
                f"{spec.name}: {action.item} regresses [{action.config_tag}] (or fails there): "
                "it cannot end the search, which goes on"
            )

    def _note(self, action: Conclude) -> None:
        """Record the conclusion once (the summary and a rerun's reader see why items were skipped)."""
        last = next((e for e in reversed(list(self.sweep.store.events())) if e["event"] == "conclude"), None)
        record = {"why": action.why.value, "reason": action.reason, "skipped": list(action.skipped)}
        if last is None or {k: last.get(k) for k in record} != record:
            self.sweep.store.append("conclude", **record)

    def _skipped(self, current: str, why: str) -> str:
        """The skip reason of `current`, recorded once (for the summary of what was saved)."""
        self._skipped_here.add(current)
        if not any(e["event"] == "skipped" and e.get("item") == current for e in self.sweep.store.events()):
            self.sweep.store.append("skipped", item=current, reason=why)
        full = full_run_minutes(self.sweep.store.results())
        saves = f"; saves ≈ {full:.2f} node-minutes (a full run's)" if full else ""
        return f"not run: the adaptive sweep concluded: {why}{saves}"

    # ---- early stop -----------------------------------------------------------------------

    def judge(self, spec: RunSpec, key: str, job: SubmittedJob) -> Judge | None:
        """Whether the planner stops this candidate's job now (engine/early_stop.py)."""
        return stop_judge(self, spec, key, job)

    # ---- what the report and the summary see -------------------------------------------------

    def pooled(self, found: list[JobResult], latest: Mapping[str, JobResult]) -> list[JobResult]:
        """The current results with the controls and repeats (adaptive.stored.pooled)."""
        return pooled(found, latest, self.roles)

    def drift(self) -> str:
        """What the controls saw (docs/explanation/adaptive.md)."""
        now = self.sweep.clock()
        return build_board(self.state(now), now).drift_report().text()


def _observation(result: JobResult, item: PlanItem, role: Role) -> Observation:
    if result.verdict is Verdict.STOPPED_EARLY:
        state = RunState.STOPPED
    else:
        state = RunState.FINISHED if result.measured else RunState.FAILED
    steady = (result.tgs_values or ((result.tgs,) if result.tgs else ())) if result.measured else ()
    return Observation(
        result.job_id or result.key,
        item.name,
        item.key,
        role,
        result.submitted_at,
        result.started_at or None,
        result.ended_at or result.finished_at or None,
        tuple(steady),
        state,
        max(1, result.nodes),
        "" if result.measured else result.verdict.value,
    )
