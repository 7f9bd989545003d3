"""One Sweep per cell and pytest session: reuse, submit, watch, judge and store each run."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..adaptive.fixed import PlanOrder
from ..adaptive.keys import EffectiveKey, effective_key
from ..adaptive.order import Prior
from ..adaptive.values import Budget
from ..cell.values import Cell
from ..errors import XlatuneError
from ..evidence.artifacts import evidence_facts
from ..launch.base import Launcher, SubmittedJob
from ..plan.catalog import EvidenceFacts
from ..plan.expand import RunKind, RunSpec, catalog_decisions, evidence_spec, run_key
from ..plan.resolve import current_results, resolution, unmeasured
from ..results import JobResult
from ..store import ResultStore
from ..triage.hang import HangSettings
from ..triage.playbook import DEFAULT_PLAYBOOK, Playbook
from ..verdict import choice, numerics, stats
from ..verdict.gate import image_gate
from ..verdict.lock import Lock
from .adaptive import Driver
from .choices import SweepChoices
from .outcome import Regression, RunFailed
from .poller import Poller
from .runner import JobRunner, RunOutcome

Report = Callable[[str], None]

# Runs that share an earlier run's job when their effective settings are the same (a baseline
# repeat or an evidence run never does: they are repeated or profiled on purpose).
SHAREABLE = (RunKind.PROFILE, RunKind.RESTORE_DEFAULT, RunKind.PIPELINE_SHAPE)
SHARE_SOURCES = (RunKind.BASELINE, *SHAREABLE)


class SweepInterrupted(XlatuneError):
    """The session was interrupted while a job ran; the job was cancelled."""


@dataclass
class Sweep:
    """Runs the specs of one cell through a launcher, storing every result at once (the job
    mechanics: its `runner`, engine/runner.py; the adaptive decisions: engine/adaptive.py)."""

    cell: Cell
    specs: list[RunSpec]
    store: ResultStore
    launcher: Launcher
    nodelist: str
    nodes: int = 1  # the nodes every job holds (the frozen nodelist's): node-minutes accounting
    poll_interval: float = 0.5
    remeasure: bool = False
    rerun_failed: bool = False  # --lf: a stored failure (not an OOM) is run again, once
    report: Report = lambda text: None  # progress
    warn: Report | None = None  # incidents (default: report)
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    queue_depth: int = 0
    image: str = ""
    playbook: Playbook = DEFAULT_PLAYBOOK
    hang: HangSettings = field(default_factory=HangSettings)
    numerics: numerics.Mode = numerics.Mode.FAIL  # WARN: a numerics-changed run may still win
    # Remote clusters: copy an evidence run's artifacts here (evidence.fetch); None: read in place.
    fetch_artifacts: Callable[[dict[str, str], str], tuple[dict[str, str], list[str]]] | None = None
    # The launcher's Launcher.log_source (Session passes it); None: the path known at submission.
    log_source: Callable[[SubmittedJob], str] | None = None
    choices: SweepChoices = field(default_factory=PlanOrder)  # which runs are queued next
    fixed_protocol: bool = False  # today's protocol: no sharing, no controls, repeats, early stops
    budget: Budget = field(default_factory=Budget)  # --xlatune-budget (adaptive sweeps only)
    prior: Prior = field(default_factory=Prior)  # other sweeps' effects: likely winners first
    adaptive: Driver | None = None  # set by set_upcoming unless fixed_protocol
    _pool: Driver | None = None  # the whole cell's plan: which stored runs are controls and repeats
    _facts: tuple[str, EvidenceFacts | None] | None = None  # (evidence job id, facts)
    _effective: dict[RunSpec, EffectiveKey] = field(default_factory=dict)
    runner: JobRunner = field(init=False)

    def __post_init__(self) -> None:
        self.warn = self.warn or self.report
        self.runner = JobRunner(
            self,
            self.cell,
            self.store,
            self.launcher,
            self.nodelist,
            self.nodes,
            self.image,
            self.playbook,
            self.hang,
            self.poll_interval,
            self.remeasure,
            self.rerun_failed,
            self.queue_depth,
            self.fixed_protocol,
            self.choices,
            self.report,
            self.warn,
            self.sleep,
            self.clock,
            self.fetch_artifacts,
            self.log_source,
        )
        # Whatever the selection or the protocol, stored controls count as baseline runs and
        # repeats pool into their item (so the report never depends on what was selected).
        self._pool = Driver.plan_for(self, self.specs)

    def set_upcoming(self, specs: list[RunSpec]) -> None:
        """The selected runs of this cell in execution order (for keeping the queue full)."""
        self.runner.upcoming = list(specs)
        if not self.fixed_protocol:
            self.adaptive = Driver.plan_for(self, self.runner.upcoming, self.prior)

    # ---- the job mechanics (engine/runner.py) -------------------------------------------

    def run(self, spec: RunSpec) -> RunOutcome:
        """This exact run's result: reused from the store, or launched to its final verdict."""
        return self.runner.run(spec)

    def cancel_all(self) -> None:
        """Cancel the jobs this session submitted or re-attached to and that have not finished."""
        self.runner.cancel_all()

    def adopt_orphans(self) -> None:
        """Take over the jobs a killed session of this store left queued or running."""
        self.runner.adopt_orphans()

    def stopped_early(self, job_id: str) -> str:
        """The early stop recorded for a job, "" for none."""
        return self.runner.stopped_early(job_id)

    @property
    def poller(self) -> Poller:
        return self.runner.poller

    # ---- lookups over the store -------------------------------------------------------

    def key(self, spec: RunSpec) -> str:
        return run_key(self.cell, spec, self.nodelist, self.image)

    def stored(self, spec: RunSpec) -> JobResult | None:
        return self.store.latest_by_key().get(self.key(spec))

    def results(self) -> list[JobResult]:
        """The latest result of each current spec (what the report and Δ% use); runs resolved
        from other runs (stack, winner evidence, cross-config) are found under their resolution."""
        latest = self.store.latest_by_key()
        driver = self._pool
        pool = (lambda found: driver.pooled(found, latest)) if driver is not None else None
        found = current_results(self.cell, self.specs, latest, self.key, self.numerics, pool)
        return pool(found) if pool is not None else found

    def results_here(self) -> list[JobResult]:
        """`results()`; under the image gate only the runs of this session: a gate compares the
        new image with the lock's in one time window, so an earlier gate's runs of the same image
        (latest in the store until this session runs them again) are never its figures or controls."""
        found = self.results()
        if not any(s.kind is RunKind.GATE_RECIPE for s in self.specs):
            return found
        return [r for r in found if self.runner.ran_in_session(r.key)]

    def _direct_results(self, latest: dict[str, JobResult]) -> list[JobResult]:
        return [latest[key] for spec in self.specs if not spec.needs_resolution if (key := self.key(spec)) in latest]

    def baseline_tgs(self, config_tag: str) -> float | None:
        """Mean TGS of the measured baseline-deployed repeats of a config tag."""
        values = [
            r.tgs
            for r in self.results()
            if r.kind is RunKind.BASELINE and r.config_tag == config_tag and r.measured and r.tgs is not None
        ]
        return statistics.fmean(values) if values else None

    def best_profile(self) -> JobResult | None:
        """The highest-TGS measured profile of the primary config tag (waves 2-4)."""
        latest = self.store.latest_by_key()
        return choice.best_measured(self._direct_results(latest), self.cell.primary_config.name)

    def resolve(self, spec: RunSpec) -> RunSpec | None:
        """Fill a run resolved from other runs' results; None while they do not allow it."""
        return self.resolution(spec)[0]

    def resolution(self, spec: RunSpec) -> tuple[RunSpec | None, str]:
        """(the run with its flags filled in, or None with the reason it cannot run yet)."""
        return self._resolution(spec, self.results())

    def _resolution(self, spec: RunSpec, results: list[JobResult]) -> tuple[RunSpec | None, str]:
        return resolution(self.cell, self.specs, spec, results, self.numerics)

    def unmeasured(self, spec: RunSpec) -> list[str]:
        """The profiles a resolved run reads that have no result yet (plan.resolve.unmeasured)."""
        return unmeasured(self.cell, self.specs, spec, self.results())

    # ---- duplicates -------------------------------------------------------------------

    def duplicate_of(self, spec: RunSpec) -> RunSpec | None:
        """The first run before `spec` in the cell with the same effective settings (resolved as
        XLA and the scripts do: adaptive.keys), whose job `spec` shares; None under the fixed protocol."""
        if self.fixed_protocol or spec.kind not in SHAREABLE or spec.needs_resolution or spec.repeat:
            return None
        for other in self.specs:
            if other == spec:
                return None
            if (
                other.kind in SHARE_SOURCES
                and not other.needs_resolution
                and other.config_tag == spec.config_tag
                and self._key_of(other) == self._key_of(spec)
            ):
                return other
        return None

    def _key_of(self, spec: RunSpec) -> EffectiveKey:
        if spec not in self._effective:
            self._effective[spec] = effective_key(self.cell, spec, self.image)
        return self._effective[spec]

    # ---- evidence ---------------------------------------------------------------------

    def evidence_facts(self) -> EvidenceFacts | None:
        """What the Wave 1.5 evidence run's HLO dump (and profile) show; None before it has one."""
        result = self.stored(evidence_spec(self.cell))
        job = result.job_id if result else ""
        if self._facts is None or self._facts[0] != job:
            self._facts = (job, evidence_facts(result) if result else None)
        return self._facts[1]

    def skip_reason(self, spec: RunSpec) -> str:
        """Why a catalog candidate does not run, decided with the evidence known now ("" = run)."""
        if not spec.catalog:
            return ""
        # An adaptive sweep's `max` keeps the candidates its planner would try first (the prior).
        prior = self.adaptive.ordered().prior if self.adaptive is not None else None
        gain = (lambda name: prior.gain(name).pct) if prior is not None else None
        return catalog_decisions(self.cell, self.specs, self.evidence_facts(), gain).get(spec.name, (0, ""))[1]

    # ---- the re-measure loops of the gates --------------------------------------------

    def gate_cross_config(self, spec: RunSpec, runs: list[JobResult], warn: Report) -> None:
        """Fail only when the recipe regresses the tag beyond the tolerance with confidence;
        re-measure (thresholds.remeasure times at most) while the answer is ambiguous. `warn`
        gets the line of a pass despite the odds (the item shows it and keeps it for the reports)."""
        thresholds = self.cell.thresholds
        while True:
            final = len(runs) > thresholds.remeasure
            gate = choice.regression_gate(
                [r.tgs for r in runs if r.tgs is not None],
                self.results(),
                spec.config_tag,
                thresholds.regression_pct,
                final=final,
            )
            if gate is None or gate.decision is stats.GateDecision.PASS:
                if gate is not None and (
                    why := gate.passed_on_the_interval(spec.resolved_from, spec.config_tag, [r.job_id for r in runs])
                ):
                    warn(why)
                return
            if gate.decision is stats.GateDecision.FAIL:
                recipe = choice.recipe(self.results(), self.cell.primary_config.name, self.numerics) is not None
                raise Regression(gate.message(spec.resolved_from, spec.config_tag, [r.job_id for r in runs], recipe))
            again = self.run(spec.remeasured(len(runs))).result
            if not again.measured:
                raise RunFailed(again)
            runs.append(again)

    def gate_image(self, spec: RunSpec, runs: list[JobResult], lock: Lock, warn: Report) -> None:
        """Fail when the new image broke the locked recipe, with confidence, judged against the
        same runs on the lock's image in this session; while the answer is ambiguous, measure
        the recipe and the baseline once more each, each after its old-image control
        (thresholds.remeasure times at most). `warn` gets each of the gate's warnings."""
        tag = spec.config_tag

        def measured(kind: RunKind) -> tuple[RunSpec, list[JobResult]]:
            """The first run of a kind on this tag, and its results; a control the selection
            left out (-k) is measured now, so the comparison stays in this time window."""
            first = next(s for s in self.specs if s.kind is kind and s.config_tag == tag)
            found = [r for r in self.results_here() if r.kind is kind and r.config_tag == tag]
            if not found:
                found = [self.run(first).result]
            return first, found

        baseline_spec, baselines = measured(RunKind.BASELINE)
        old_recipe_spec, old_recipes = measured(RunKind.GATE_OLD_RECIPE)
        old_baseline_spec, old_baselines = measured(RunKind.GATE_OLD_BASELINE)
        while True:
            final = len(runs) > self.cell.thresholds.remeasure
            gate = image_gate(
                runs,
                baselines,
                lock,
                self.cell.thresholds.regression_pct,
                final=final,
                mode=self.numerics,
                old_recipe_runs=old_recipes,
                old_baseline_runs=old_baselines,
            )
            for warning in gate.warnings:
                warn(warning)
            if gate.problems:
                raise Regression("\n".join(gate.problems))
            if not gate.ambiguous:
                return
            repeat = len(runs)
            for again_spec, into in (
                (old_recipe_spec, old_recipes),
                (spec, runs),
                (old_baseline_spec, old_baselines),
                (baseline_spec, baselines),
            ):
                again = self.run(again_spec.remeasured(repeat)).result
                if not again.measured:
                    raise RunFailed(again)
                into.append(again)
