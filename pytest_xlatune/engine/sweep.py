"""One Sweep per cell and pytest session: reuse, submit, watch, judge and store each run."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..judge import numerics, verdicts
from ..plan.catalog import EvidenceFacts
from ..plan.request import job_request, tokens_per_device_step
from ..evidence.artifacts import evidence_facts
from ..judge.hang import HangSettings
from ..launch.base import Launcher, LauncherError, SubmittedJob
from ..judge.policy import DEFAULT_POLICY, Action, Policy, SweepCounters, decide
from .choices import PlanOrder, SweepChoices
from .nodes import check_nodes, resume
from .poller import ControllerDown, Poller, submit_through_outage
from ..judge.signatures import FailureClass, disk_full
from .watch import SweepStopped, Watched, Watcher
from ..judge.steady import last_loss, steady_state
from ..cell.model import Cell
from ..plan.resolve import current_results, resolution
from ..plan.expand import RunKind, RunSpec, catalog_decisions, evidence_spec, run_key
from ..adaptive.keys import EffectiveKey, effective_key
from ..results import JobResult, Verdict, node_minutes
from ..store import ResultStore, StoreWriteError
from ..judge.triage import Diagnosis, Evidence, diagnose

Report = Callable[[str], None]

# Verdicts worth running again on a rerun; everything else is a finished measurement. A full
# disk stopped the session: once space is freed the run is as good as never tried.
RERUN_VERDICTS = (Verdict.CANCELLED, Verdict.DISK_FULL)


# Runs that share an earlier run's job when their effective settings are the same (a baseline
# repeat or an evidence run never does: they are repeated or profiled on purpose).
SHAREABLE = (RunKind.PROFILE, RunKind.RESTORE_DEFAULT, RunKind.PIPELINE_SHAPE)
SHARE_SOURCES = (RunKind.BASELINE, *SHAREABLE)


@dataclass(frozen=True)
class RunOutcome:
    result: JobResult
    reused: bool


class SweepInterrupted(Exception):
    """The session was interrupted while a job ran; the job was cancelled."""


@dataclass
class Sweep:
    """Runs the specs of one cell through a launcher, storing every result at once."""

    cell: Cell
    specs: list[RunSpec]
    store: ResultStore
    launcher: Launcher
    nodelist: str
    nodes: int = 1  # the nodes every job holds (the frozen nodelist's): node-minutes accounting
    poll_interval: float = 0.5
    remeasure: bool = False
    report: Report = lambda text: None  # progress
    warn: Report | None = None  # incidents (default: report)
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    queue_depth: int = 0
    image: str = ""
    policy: Policy = DEFAULT_POLICY
    hang: HangSettings = field(default_factory=HangSettings)
    numerics: numerics.Mode = numerics.Mode.FAIL  # WARN: a numerics-changed run may still win
    # Remote clusters: copy an evidence run's artifacts here (evidence.fetch); None: read in place.
    fetch_artifacts: Callable[[dict[str, str], str], tuple[dict[str, str], list[str]]] | None = None
    # The launcher's Launcher.log_source (Runtime passes it); None: the path known at submission.
    log_source: Callable[[SubmittedJob], str] | None = None
    choices: SweepChoices = field(default_factory=PlanOrder)  # which runs are queued next
    fixed_protocol: bool = False  # every item its own job (no sharing of duplicates)
    counters: SweepCounters = field(default_factory=SweepCounters)
    _ran_this_session: set[str] = field(default_factory=set)
    _upcoming: list[RunSpec] = field(default_factory=list)
    _queued: set[str] = field(default_factory=set)
    _submitted_here: set[str] = field(default_factory=set)
    _key_of_job: dict[str, str] = field(default_factory=dict)
    _jobs: dict[str, tuple[str, SubmittedJob]] = field(default_factory=dict)  # job id → (item, job)
    _seen_ahead: dict[str, Watched] = field(default_factory=dict)  # watched while a retry waited
    _facts: tuple[str, EvidenceFacts | None] | None = None  # (evidence job id, facts)
    _effective: dict[RunSpec, EffectiveKey] = field(default_factory=dict)
    poller: Poller = field(init=False)
    watcher: Watcher = field(init=False)

    def __post_init__(self) -> None:
        self.warn = self.warn or self.report
        self.poller = Poller(self.launcher, self.poll_interval, clock=self.clock, warn=self.warn)
        self.watcher = Watcher(self.launcher, self.poller, self.cell.steps, self.poll_interval,
                               self.clock, self.sleep, self.report, self.hang, self.policy,
                               warn=self.warn,
                               controller_down_limit_s=_controller_limit_s(self.policy))

    def set_upcoming(self, specs: list[RunSpec]) -> None:
        """The selected runs of this cell in execution order (for keeping the queue full)."""
        self._upcoming = list(specs)

    # ---- lookups over the store -------------------------------------------------------

    def key(self, spec: RunSpec) -> str:
        return run_key(self.cell, spec, self.nodelist, self.image)

    def stored(self, spec: RunSpec) -> JobResult | None:
        return self.store.latest_by_key().get(self.key(spec))

    def results(self) -> list[JobResult]:
        """The latest result of each current spec (what the report and Δ% use); runs resolved
        from other runs (stack, winner evidence, cross-config) are found under their resolution."""
        return current_results(self.cell, self.specs, self.store.latest_by_key(), self.key, self.numerics)

    def _direct_results(self, latest: dict[str, JobResult]) -> list[JobResult]:
        return [latest[key] for spec in self.specs if not spec.needs_resolution
                if (key := self.key(spec)) in latest]

    def baseline_tgs(self, config_tag: str) -> float | None:
        """Mean TGS of the measured baseline-deployed repeats of a config tag."""
        values = [r.tgs for r in self.results()
                  if r.kind == RunKind.BASELINE.value and r.config_tag == config_tag
                  and r.measured and r.tgs is not None]
        return statistics.fmean(values) if values else None

    def best_profile(self) -> JobResult | None:
        """The highest-TGS measured profile of the primary config tag (waves 2-4)."""
        latest = self.store.latest_by_key()
        return verdicts.best_measured(self._direct_results(latest), self.cell.primary_config.name)

    def resolve(self, spec: RunSpec) -> RunSpec | None:
        """Fill a run resolved from other runs' results; None while they do not allow it."""
        return self.resolution(spec)[0]

    def resolution(self, spec: RunSpec) -> tuple[RunSpec | None, str]:
        """(the run with its flags filled in, or None with the reason it cannot run yet)."""
        return self._resolution(spec, self.results())

    def _resolution(self, spec: RunSpec, results: list[JobResult]) -> tuple[RunSpec | None, str]:
        return resolution(self.cell, self.specs, spec, results, self.numerics)


    # ---- duplicates -------------------------------------------------------------------

    def duplicate_of(self, spec: RunSpec) -> RunSpec | None:
        """The first run before `spec` in the cell with the same effective settings (resolved as
        XLA and the scripts do: adaptive.keys), whose job `spec` shares; None under the fixed protocol."""
        if self.fixed_protocol or spec.kind not in SHAREABLE or spec.needs_resolution:
            return None
        for other in self.specs:
            if other == spec:
                return None
            if other.kind in SHARE_SOURCES and not other.needs_resolution and \
                    other.config_tag == spec.config_tag and self._key_of(other) == self._key_of(spec):
                return other
        return None

    def _key_of(self, spec: RunSpec) -> EffectiveKey:
        if spec not in self._effective:
            self._effective[spec] = effective_key(self.cell, spec, self.image)
        return self._effective[spec]

    def _share(self, spec: RunSpec, key: str) -> JobResult | None:
        """Store and return `spec`'s share of its duplicate's measured result (None: not measured)."""
        source_spec = self.duplicate_of(spec)
        if source_spec is None:
            return None
        source_key = self.key(source_spec)
        source = self.store.latest_by_key().get(source_key)
        if source is None or not source.measured or (self.remeasure and source_key not in self._ran_this_session):
            return None
        shared = replace(source, key=key, item=spec.name, wave=spec.wave, profile=spec.profile,
                         kind=spec.kind.value, xla_flags=spec.xla_flags, env=spec.env,
                         overrides=spec.overrides, resolved_from=spec.resolved_from,
                         shared_from=source.item, retries=())
        self.store.add_result(shared)
        return shared

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
        return catalog_decisions(self.cell, self.specs, self.evidence_facts()).get(spec.name, (0, ""))[1]

    # ---- running ----------------------------------------------------------------------

    def run(self, spec: RunSpec) -> RunOutcome:
        """Reuse a stored result for this exact run, or launch it and follow the playbook
        (retry, resume a node, drop, stop) until it has a final verdict."""
        key = self.key(spec)
        stored = self.store.latest_by_key().get(key)
        if stored and stored.verdict not in RERUN_VERDICTS and (
            not self.remeasure or key in self._ran_this_session
        ):
            return RunOutcome(stored, reused=True)
        self._ran_this_session.add(key)
        if (shared := self._share(spec, key)) is not None:
            return RunOutcome(shared, reused=False)
        self._check_nodes()
        history: list[Diagnosis] = []
        retries: list[str] = []
        job = self._reattach(key)
        if job is not None and key not in self._queued:
            self.report(f"{spec.name}: re-attached to job {job.job_id} of an earlier session")
        while True:
            job = job or self._submit(spec, key)
            submitted_at = self.clock()
            self._fill_queue(after=spec)
            try:
                seen = self._seen_ahead.pop(job.job_id, None) or self.watcher.watch(spec.name, job)
            except BaseException:
                self.cancel_all()
                raise
            self.poller.forget(job.job_id)
            diagnosis = self._diagnose(seen)
            result = self._result(spec, key, job, seen, diagnosis, submitted_at, tuple(retries))
            decision = decide(history, diagnosis, self.counters, self.policy)
            if decision.action is Action.STOP:
                self.store.add_result(result)
                raise SweepStopped(decision.stop_reason or decision.reason,
                                   decision.failing_nodes, decision.recovery)
            if decision.action in (Action.RETRY_SAME_NODELIST, Action.RESUME_NODE_THEN_RETRY):
                self.store.append("attempt", **result.to_dict())
                self.warn(f"{spec.name} job {job.job_id}: {decision.reason}")
                if decision.action is Action.RESUME_NODE_THEN_RETRY:
                    self._resume(decision.failing_nodes)
                history.append(diagnosis)
                retries.append(f"job {job.job_id}: {diagnosis.failure.value}: {diagnosis.reason}")
                job = None
                waited_from = self.clock()
                self._watch_queue_ahead()
                # The rule's pause before the resubmission (a GPU runtime error: 90 s for the
                # device to recover); time spent watching queued jobs counts.
                if decision.action is Action.RETRY_SAME_NODELIST and \
                        (left := decision.wait_s - (self.clock() - waited_from)) > 0:
                    self.warn(f"{spec.name}: waiting {left:.0f} s before the retry")
                    self.sleep(left)
                continue
            if decision.action is Action.DROP_INFRA_FLAKE:
                result = replace(result, verdict=Verdict.INFRA_FLAKE, reason=decision.reason)
            self.store.add_result(result)
            return RunOutcome(result, reused=False)

    def _diagnose(self, seen: Watched) -> Diagnosis:
        return diagnose(Evidence.from_log(
            seen.log, self.cell.steps, exit_code=seen.progress.exit_code,
            cancelled_by_us=bool(seen.cancelled_for), scheduler_state=seen.progress.state,
            hang_phase=seen.hang_phase,
        ))

    def _check_nodes(self) -> None:
        self.counters = check_nodes(self.launcher, self.store, self.counters, self.policy,
                                    self._warn, self.sleep)

    def _resume(self, nodes: tuple[str, ...]) -> None:
        self.counters = resume(self.launcher, self.store, nodes, self.counters, self.policy,
                               self._warn, self.sleep)

    def _warn(self, text: str) -> None:
        (self.warn or self.report)(text)

    def _submit(self, spec: RunSpec, key: str) -> SubmittedJob:
        limit_s = _controller_limit_s(self.policy)
        try:
            job = submit_through_outage(self.poller, job_request(self.cell, spec), self.sleep, limit_s,
                                        record=lambda job: self._record_submission(spec, key, job))
        except ControllerDown as error:
            raise SweepStopped(f"the Slurm controller did not take {spec.name}'s job for "
                               f"{limit_s / 60:.0f} min: {error}") from None
        except LauncherError as error:
            if disk_full(str(error)):  # every later submission would fail the same way
                raise SweepStopped(f"disk_full: {spec.name}'s job could not be submitted: {error}",
                                   recovery="free space (or fix the disk) where it says, then rerun") from None
            raise
        return job

    def _record_submission(self, spec: RunSpec, key: str, job: SubmittedJob) -> None:
        """Recorded before anything else happens (signals wait meanwhile: stopsignals.deferred),
        so a killed session re-attaches to the job and an interrupted one cancels it."""
        try:
            self.store.append("submitted", key=key, item=spec.name, job_id=job.job_id,
                              log_path=job.log_path, job_dir=job.job_dir, handle=job.handle)
        except StoreWriteError:
            self.launcher.cancel(job.job_id)  # unrecorded, a rerun would submit it twice
            raise
        self._submitted_here.add(job.job_id)
        self._key_of_job[job.job_id] = key
        self._jobs[job.job_id] = (spec.name, job)
        self.poller.track(job.job_id)

    def _watch_queue_ahead(self) -> None:
        """Before a retry: watch the jobs already queued for later items to their end. Slurm
        runs them first on the exclusive nodelist, so a hang among them would hold the retry
        until its time limit; their items use what was seen here when their turn comes."""
        for job_id, (name, job) in list(self._jobs.items()):  # in submission order
            if job_id in self.poller.tracked and job_id not in self._seen_ahead:
                self._seen_ahead[job_id] = self.watcher.watch(name, job)
                self.poller.forget(job_id)

    def _fill_queue(self, after: RunSpec) -> None:
        """Submit the next runs now, so the pinned nodes never wait for pytest (Slurm serialises
        them); runs whose flags depend on results not yet known wait for their turn, and so do
        catalog candidates until the evidence run (which decides whether they run) has ended."""
        if self.queue_depth <= 0 or after not in self._upcoming:
            return
        queued = 0
        for spec in self.choices.next_runs(after, self._upcoming, self.results):
            if queued >= self.queue_depth or spec.needs_resolution:
                break
            if spec.catalog and self.stored(evidence_spec(self.cell)) is None:
                break
            if self.skip_reason(spec) or self.duplicate_of(spec) is not None:
                continue  # skipped or shared at run time: never submitted
            key = self.key(spec)
            if not self.remeasure and key in self.store.latest_by_key():
                continue  # reused, never submitted
            if key not in self._queued and key not in self.store.pending_submissions():
                self._submit(spec, key)
            self._queued.add(key)
            queued += 1

    def cancel_all(self) -> None:
        """Cancel exactly the jobs this session submitted or re-attached to and that have not
        finished (never any other job)."""
        for job_id in sorted(self._submitted_here & self.poller.tracked):
            if self.poller.finished(job_id):
                self.poller.forget(job_id)
                continue  # it ended on its own: a rerun re-attaches and judges its log
            self.launcher.cancel(job_id)
            self.poller.forget(job_id)
            # A cancelled submission is not re-attached on the next run: it is submitted again.
            try:
                self.store.append("cancelled", job_id=job_id, key=self._key_of_job.get(job_id, ""))
            except StoreWriteError:
                # The store is failing (a full disk): the lock file's note keeps it instead, so
                # the rerun runs it again rather than take it for a cancel by hand.
                if not self.store.note_cancelled(job_id):
                    self.warn(f"job {job_id}: cancelled, but not recorded (the store and its lock "
                              "note cannot be written): a rerun will take it for a cancel by hand")

    def adopt_orphans(self) -> None:
        """Take over every job an earlier (killed) session of this store left queued or running,
        so that an interrupt of this session cancels them too; their items re-attach to them."""
        for key, record in self.store.pending_submissions().items():
            job = SubmittedJob(job_id=str(record["job_id"]), log_path=str(record.get("log_path", "")),
                               job_dir=str(record.get("job_dir", "")), handle=str(record.get("handle", "")))
            if self.launcher.reattach(job):
                self.poller.track(job.job_id)
                self._submitted_here.add(job.job_id)
                self._key_of_job[job.job_id] = key

    def _reattach(self, key: str) -> SubmittedJob | None:
        """A job an earlier (killed) session submitted for this run and never recorded a result of."""
        record = self.store.pending_submissions().get(key)
        if record is None or self.remeasure:
            return None
        job = SubmittedJob(job_id=str(record["job_id"]), log_path=record["log_path"],
                           job_dir=record["job_dir"], handle=str(record.get("handle", "")))
        if not self.launcher.reattach(job):
            return None
        self.poller.track(job.job_id)
        self._submitted_here.add(job.job_id)  # ours now: an interrupt cancels it too
        self._key_of_job[job.job_id] = key
        return job

    def _log_source(self, job: SubmittedJob) -> str:
        """The file whose lines were parsed (maxtext-slurm: maybe a renamed file or a Ray worker
        log), else the path known at submission."""
        return (self.log_source(job) if self.log_source else None) or job.log_path

    def _result(self, spec: RunSpec, key: str, job: SubmittedJob, seen: Watched,
                diagnosis: Diagnosis, submitted_at: float, retries: tuple[str, ...]) -> JobResult:
        verdict, reason = diagnosis.verdict, diagnosis.reason
        steady = steady_state(seen.log.steps, profiler_on=spec.evidence,
                              tokens_per_step=tokens_per_device_step(self.cell, spec))
        if verdict.measured and (steady is None or steady.tgs is None):
            verdict, reason = Verdict.NO_STEPS, "no Tokens/s/device in the steady-state window" + (
                f" ({len(seen.log.steps)} steps completed; their lines carry no seconds either)"
                if steady is None else f" (mean step {steady.step_seconds:.3f} s; tokens per device "
                "per step unknown: set pdbs and overrides.max_target_length to derive TGS)")
        ended = seen.ended_at if seen.ended_at is not None else self.clock()
        started = seen.started_at if seen.started_at is not None else ended
        artifacts = self.launcher.artifacts(job)
        losses, extra_losses = numerics.trajectories(seen.log.steps)
        if spec.evidence and artifacts and self.fetch_artifacts is not None:
            artifacts, problems = self.fetch_artifacts(artifacts, job.job_id)
            for problem in problems:
                self.warn(f"{spec.name} job {job.job_id}: evidence not copied here: {problem}")
        return JobResult(
            key=key, item=spec.name, wave=spec.wave, profile=spec.profile,
            config_tag=spec.config_tag, kind=spec.kind.value, job_id=job.job_id,
            verdict=verdict, reason=reason,
            xla_flags=spec.xla_flags, env=spec.env, overrides=spec.overrides,
            nodelist=self.nodelist, image=self.image if spec.image is None else spec.image,
            backend=self.launcher.name,
            tgs=steady.tgs if steady else None, tgs_derived=bool(steady and steady.derived),
            step_seconds=steady.step_seconds if steady else None,
            last_loss=last_loss(seen.log.steps),
            losses=losses, extra_losses=extra_losses,
            tgs_values=steady.tgs_values if steady else (),
            steps_used=steady.steps_used if steady else (),
            step_count=len(seen.log.steps),
            log_path=self._log_source(job), log_tail="" if verdict.measured else seen.log.tail_text(),
            artifacts=tuple(sorted(artifacts.items())),
            resolved_from=spec.resolved_from, exit_code=seen.progress.exit_code,
            submitted_at=submitted_at, finished_at=self.clock(), retries=retries,
            nodes=self.nodes, started_at=started, ended_at=ended,
            node_minutes=node_minutes(self.nodes, started, ended),
        )


def _controller_limit_s(policy: Policy) -> float:
    """How long the controller may stay unreachable before STOP (the playbook says 15 min)."""
    minutes = policy.rule(FailureClass.CONTROLLER_UNREACHABLE).stop_after
    return float(minutes if minutes is not None else 15) * 60
