"""Running one job to its final result: reuse, submit, re-attach, watch, retry by the playbook,
keep the queue full, cancel what this session owns, and build the stored result."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from .. import records
from ..adaptive.cache import request_for
from ..cell.model import Cell
from ..judge import numerics
from ..judge.hang import HangSettings
from ..judge.policy import Action, Policy, SweepCounters, decide
from ..judge.signatures import FailureClass, disk_full
from ..judge.steady import last_loss, steady_state
from ..judge.triage import Diagnosis, Evidence, diagnose
from ..launch.base import JobPhase, JobState, Launcher, LauncherError, SubmittedJob
from ..plan.expand import RunSpec, evidence_spec
from ..plan.request import tokens_per_device_step
from ..evidence.nccl_applied import not_applied
from ..results import JobResult, Verdict, node_minutes
from ..store import ResultStore, StoreWriteError
from .inert import inert_result, record_fingerprint, with_inert
from .nodes import check_nodes, resume
from .poller import ControllerDown, Poller, submit_through_outage
from .stopsignals import deferred
from .choices import SweepChoices
from .watch import Judge, SweepStopped, Watched, Watcher

if TYPE_CHECKING:  # a type only: engine/adaptive.py imports this module
    from .adaptive import Driver

# Verdicts worth running again on a rerun; everything else is a finished measurement. A full
# disk stopped the session: once space is freed the run is as good as never tried.
RERUN_VERDICTS = (Verdict.CANCELLED, Verdict.DISK_FULL)


@dataclass(frozen=True)
class RunOutcome:
    result: JobResult
    reused: bool


class SweepLookups(Protocol):
    """What the job mechanics ask of their Sweep (engine/sweep.py): the store lookups, the
    catalog and duplicate decisions, and the adaptive driver (queue depth, early stops)."""

    @property
    def adaptive(self) -> Driver | None: ...

    def key(self, spec: RunSpec) -> str: ...
    def stored(self, spec: RunSpec) -> JobResult | None: ...
    def results(self) -> list[JobResult]: ...
    def skip_reason(self, spec: RunSpec) -> str: ...
    def duplicate_of(self, spec: RunSpec) -> RunSpec | None: ...


@dataclass(eq=False)
class JobRunner:
    """The job mechanics of one Sweep, which holds it (`sweep.runner`) and hands it its fields."""

    sweep: SweepLookups = field(repr=False)
    cell: Cell
    store: ResultStore
    launcher: Launcher
    nodelist: str
    nodes: int
    image: str
    policy: Policy
    hang: HangSettings
    poll_interval: float
    remeasure: bool
    rerun_failed: bool
    queue_depth: int
    fixed_protocol: bool
    choices: SweepChoices
    report: Callable[[str], None]
    warn: Callable[[str], None] | None
    sleep: Callable[[float], None]
    clock: Callable[[], float]
    fetch_artifacts: Callable[[dict[str, str], str], tuple[dict[str, str], list[str]]] | None
    log_source: Callable[[SubmittedJob], str] | None
    counters: SweepCounters = field(default_factory=SweepCounters)
    upcoming: list[RunSpec] = field(default_factory=list)  # the selected runs, in execution order
    _ran_this_session: set[str] = field(default_factory=set)
    _queued: set[str] = field(default_factory=set)
    _submitted_here: set[str] = field(default_factory=set)
    _key_of_job: dict[str, str] = field(default_factory=dict)
    _jobs: dict[str, tuple[str, SubmittedJob]] = field(default_factory=dict)  # job id → (item, job)
    _seen_ahead: dict[str, Watched] = field(default_factory=dict)  # watched while a retry waited
    poller: Poller = field(init=False)
    watcher: Watcher = field(init=False)

    def __post_init__(self) -> None:
        self.poller = Poller(self.launcher, self.poll_interval, clock=self.clock, warn=self._warn)
        self.watcher = Watcher(self.launcher, self.poller, self.cell.steps, self.poll_interval,
                               self.clock, self.sleep, self.report, self.hang, self.policy,
                               warn=self._warn, controller_down_limit_s=_controller_limit_s(self.policy))

    def key(self, spec: RunSpec) -> str:
        return self.sweep.key(spec)

    def stopped_early(self, job_id: str) -> str:
        """The early stop recorded for a job (before its cancel was sent), "" for none: a session
        killed between the two re-attaches and stores the stop, never a failure or a rerun."""
        return next((str(e.get("reason", "")) for e in self.store.events_of("early_stop")
                     if str(e.get("job_id")) == job_id), "")

    def run(self, spec: RunSpec) -> RunOutcome:
        """Reuse a stored result for this exact run, or launch it and follow the playbook
        (retry, resume a node, drop, stop) until it has a final verdict."""
        key = self.key(spec)
        stored = self.store.latest_by_key().get(key)
        if stored and stored.verdict not in RERUN_VERDICTS and (
            not self.remeasure or key in self._ran_this_session
        ) and not (self.rerun_failed and not stored.measured and stored.verdict is not Verdict.OOM
                   and key not in self._ran_this_session):  # --lf: the failure's job runs again
            return RunOutcome(stored, reused=True)
        self._ran_this_session.add(key)
        if (shared := self._share(spec, key) or inert_result(self, spec, key)) is not None:
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
            judge = with_inert(self, spec, key, job, self._stop_judge(spec, key, job))
            try:
                seen = self._seen_ahead.pop(job.job_id, None) or self.watcher.watch(spec.name, job, judge)
            except BaseException:
                self.cancel_all()
                raise
            self.poller.forget(job.job_id)
            if seen.stop_reason and (inert := inert_result(self, spec, key, job.job_id)) is not None:
                cut = self._result(spec, key, job, seen, self._diagnose(seen), submitted_at, ())
                self.store.append("attempt", **replace(cut, verdict=Verdict.CANCELLED, reason=inert.reason,
                                                       log_tail="").to_dict())  # its cost counts
                return RunOutcome(inert, reused=False)  # cut after its compile (engine/inert.py)
            diagnosis = self._diagnose(seen)
            result = self._result(spec, key, job, seen, diagnosis, submitted_at, tuple(retries))
            stopped = seen.stop_reason or self.stopped_early(job.job_id)
            if stopped and result.tgs is not None:  # its partial steady state is its measurement
                result = replace(result, verdict=Verdict.STOPPED_EARLY, log_tail="",
                                 reason=f"stopped early: {stopped}")
                self.store.add_result(result)
                return RunOutcome(result, reused=False)
            decision = decide(history, diagnosis, self.counters, self.policy)
            if decision.action is Action.STOP:
                self.store.add_result(result)
                raise SweepStopped(decision.stop_reason or decision.reason,
                                   decision.failing_nodes, decision.recovery)
            if decision.action in (Action.RETRY_SAME_NODELIST, Action.RESUME_NODE_THEN_RETRY):
                self.store.write(records.Attempt(result))
                self._warn(f"{spec.name} job {job.job_id}: {decision.reason}")
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
                    self._warn(f"{spec.name}: waiting {left:.0f} s before the retry")
                    self.sleep(left)
                continue
            if result.measured:  # a source for inert candidates (engine/inert.py)
                record_fingerprint(self.store, key, job)
            if decision.action is Action.DROP_INFRA_FLAKE:
                result = replace(result, verdict=Verdict.INFRA_FLAKE, reason=decision.reason)
            self.store.add_result(result)
            return RunOutcome(result, reused=False)

    def _share(self, spec: RunSpec, key: str) -> JobResult | None:
        """Store and return `spec`'s share of its duplicate's measured result (None: not measured)."""
        source_spec = self.sweep.duplicate_of(spec)
        if source_spec is None:
            return None
        source_key = self.key(source_spec)
        source = self.store.latest_by_key().get(source_key)
        if source is None or not source.measured or (self.remeasure and source_key not in self._ran_this_session):
            return None
        shared = replace(source, key=key, item=spec.name, wave=spec.wave, profile=spec.profile,
                         kind=spec.kind, xla_flags=spec.xla_flags, env=spec.env,
                         overrides=spec.overrides, resolved_from=spec.resolved_from,
                         shared_from=source.item, retries=())
        self.store.add_result(shared)
        return shared

    def _stop_judge(self, spec: RunSpec, key: str, job: SubmittedJob) -> Judge | None:
        """What the watcher asks on each step whether to stop this job early (None: never)."""
        adaptive = self.sweep.adaptive
        return adaptive.judge(spec, key, job) if adaptive is not None else None

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
        request = replace(request_for(self.cell, spec, self.image, cache=not self.fixed_protocol),
                          mark=f"xlatune-{uuid.uuid4().hex[:16]}")
        # Before the scheduler hears of it: a kill before the job id is stored leaves this, and
        # the rerun finds the job by its mark (engine/recover.py) instead of submitting it again.
        self.store.write(records.Submitting(key=key, item=spec.name, job_name=request.job_name,
                                            mark=request.mark, compile_cache=request.compile_cache))
        try:
            job = submit_through_outage(self.poller, request, self.sleep, limit_s,
                                        record=lambda job: self._record_submission(spec, key, job, request.mark))
        except ControllerDown as error:
            raise SweepStopped(f"the Slurm controller did not take {spec.name}'s job for "
                               f"{limit_s / 60:.0f} min: {error}") from None
        except LauncherError as error:
            if disk_full(str(error)):  # every later submission would fail the same way
                raise SweepStopped(f"disk_full: {spec.name}'s job could not be submitted: {error}",
                                   recovery="free space (or fix the disk) where it says, then rerun") from None
            raise
        return job

    def _record_submission(self, spec: RunSpec, key: str, job: SubmittedJob, mark: str) -> None:
        """Recorded before anything else happens (signals wait meanwhile: stopsignals.deferred),
        so a killed session re-attaches to the job and an interrupted one cancels it."""
        try:
            self.store.write(records.Submitted(key=key, item=spec.name, job_id=job.job_id,
                                               log_path=job.log_path, job_dir=job.job_dir, handle=job.handle,
                                               mark=mark, compile_cache=job.compile_cache))
        except StoreWriteError:
            self.launcher.cancel(job.job_id)  # unrecorded, a rerun would submit it twice
            self.store.note_cancelled(job.job_id)  # the rerun, finding it by its mark, runs it again
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
        depth, adaptive = self.queue_depth, self.sweep.adaptive
        if adaptive is not None:  # the planner decides each next run: max_in_flight at once
            depth = min(depth, adaptive.plan.policy.max_in_flight - 1)
        if depth <= 0 or after not in self.upcoming:
            return
        queued = 0
        for spec in self.choices.next_runs(after, self.upcoming, self.sweep.results):
            if queued >= depth or spec.needs_resolution:
                break
            if spec.catalog and self.sweep.stored(evidence_spec(self.cell)) is None:
                break
            if self.sweep.skip_reason(spec) or self.sweep.duplicate_of(spec) is not None:
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
        finished (never any other job). A job that ended on its own before the cancel reached it
        (the last poll was older than its end) is left to the rerun, which judges its log."""
        with deferred():  # a second Ctrl-C waits: no job is left cancelled but unrecorded
            self._cancel_all()

    def _cancel_all(self) -> None:
        cancelled = []
        for job_id in sorted(self._submitted_here & self.poller.tracked):
            if self.poller.finished(job_id):
                self.poller.forget(job_id)
                continue  # it ended on its own: a rerun re-attaches and judges its log
            self.launcher.cancel(job_id)
            self.poller.forget(job_id)
            cancelled.append(job_id)
        ended = self._ended_before_the_cancel(cancelled)
        for job_id in cancelled:
            if job_id in ended:
                continue
            # A cancelled submission is not re-attached on the next run: it is submitted again.
            try:
                self.store.write(records.Cancelled(job_id=job_id, key=self._key_of_job.get(job_id, "")))
            except StoreWriteError:
                # The store is failing (a full disk): the lock file's note keeps it instead, so
                # the rerun runs it again rather than take it for a cancel by hand.
                if not self.store.note_cancelled(job_id):
                    self._warn(f"job {job_id}: cancelled, but not recorded (the store and its lock "
                              "note cannot be written): a rerun will take it for a cancel by hand")

    def _ended_before_the_cancel(self, job_ids: list[str]) -> set[str]:
        """The jobs among those just cancelled that the scheduler says ended on their own: a
        state other than cancelled, an exit other than the cancel's signal (130, 137, 143). When
        it cannot say, none (each counts as cancelled, as before)."""
        if not job_ids:
            return set()
        try:
            progress = self.launcher.poll(job_ids)
        except LauncherError:
            return set()
        return {job_id for job_id, p in progress.items()
                if p.phase is JobPhase.FINISHED and p.state not in (JobState.CANCELLED, JobState.UNKNOWN)
                and p.exit_code not in (130, 137, 143)}

    def adopt_orphans(self) -> None:
        """Take over every job an earlier (killed) session of this store left queued or running,
        so that an interrupt of this session cancels them too; their items re-attach to them."""
        for key, record in self.store.pending_submissions().items():
            job = SubmittedJob(job_id=str(record["job_id"]), log_path=str(record.get("log_path", "")),
                               job_dir=str(record.get("job_dir", "")), handle=str(record.get("handle", "")),
                               compile_cache=str(record.get("compile_cache", "")))
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
                           job_dir=record["job_dir"], handle=str(record.get("handle", "")),
                           compile_cache=str(record.get("compile_cache", "")))
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
                self._warn(f"{spec.name} job {job.job_id}: evidence not copied here: {problem}")
        return JobResult(
            key=key, item=spec.name, wave=spec.wave, profile=spec.profile,
            config_tag=spec.config_tag, kind=spec.kind, job_id=job.job_id,
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
            node_minutes=node_minutes(self.nodes, started, ended), compile_cache=job.compile_cache,
            not_applied=not_applied(spec.env, seen.log.library_lines) if verdict.measured else "",
        )



def _controller_limit_s(policy: Policy) -> float:
    """How long the controller may stay unreachable before STOP (the playbook says 15 min)."""
    minutes = policy.rule(FailureClass.CONTROLLER_UNREACHABLE).stop_after
    return float(minutes if minutes is not None else 15) * 60
