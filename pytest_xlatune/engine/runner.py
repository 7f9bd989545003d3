"""Running one job to its final result: reuse, submit, re-attach, watch, retry by the playbook,
keep the queue full, and build the stored result. Which jobs this session owns (adopted,
re-attached, cancelled on an interrupt) is engine/owned_jobs.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from .. import records
from ..adaptive.cache import request_for
from ..cell.values import Cell
from ..launch.base import Launcher, LauncherError, SubmittedJob
from ..plan.expand import RunSpec, evidence_spec
from ..results import JobResult, Verdict
from ..store import ResultStore, StoreWriteError
from ..triage.diagnosis import Diagnosis
from ..triage.hang import HangSettings
from ..triage.playbook import Playbook, Remedy, SweepCounters, decide
from ..triage.signatures import FailureClass, disk_full
from .choices import SweepChoices
from .inert import inert_result, record_fingerprint, with_inert
from .job_result import diagnose_watched, job_result, shared_result
from .owned_jobs import adopt_orphans, cancel_owned, reattach
from .pinned_nodes import check_nodes, resume
from .poller import ControllerDown, Poller, submit_through_outage
from .stopsignals import deferred
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
    playbook: Playbook
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
        self.watcher = Watcher(
            self.launcher,
            self.poller,
            self.cell.steps,
            self.poll_interval,
            self.clock,
            self.sleep,
            self.report,
            self.hang,
            self.playbook,
            warn=self._warn,
            controller_down_limit_s=_controller_limit_s(self.playbook),
        )

    def key(self, spec: RunSpec) -> str:
        return self.sweep.key(spec)

    def stopped_early(self, job_id: str) -> str:
        """The early stop recorded for a job (before its cancel was sent), "" for none: a session
        killed between the two re-attaches and stores the stop, never a failure or a rerun."""
        return next(
            (str(e.get("reason", "")) for e in self.store.events_of("early_stop") if str(e.get("job_id")) == job_id), ""
        )

    def ran_in_session(self, key: str) -> bool:
        """Whether this session ran (or shared) the run of this key itself, e.g. a candidate the
        adaptive planner ran ahead of the item at hand: its result is no earlier session's."""
        return key in self._ran_this_session

    def run(self, spec: RunSpec) -> RunOutcome:
        """Reuse a stored result for this exact run, or launch it and follow the playbook
        (retry, resume a node, drop, stop) until it has a final verdict."""
        key = self.key(spec)
        stored = self.store.latest_by_key().get(key)
        if (
            stored
            and stored.verdict not in RERUN_VERDICTS
            and (not self.remeasure or key in self._ran_this_session)
            and not (
                self.rerun_failed
                and not stored.measured
                and stored.verdict is not Verdict.OOM
                and key not in self._ran_this_session
            )
        ):  # --lf: the failure's job runs again
            return RunOutcome(stored, reused=True)
        self._ran_this_session.add(key)
        if (shared := self._share(spec, key) or inert_result(self, spec, key)) is not None:
            return RunOutcome(shared, reused=False)
        self._check_nodes()
        history: list[Diagnosis] = []
        retries: list[str] = []
        job = reattach(self, key)
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
                cut = job_result(self, spec, key, job, seen, diagnose_watched(seen, self.cell.steps), submitted_at, ())
                self.store.append(
                    "attempt", **replace(cut, verdict=Verdict.CANCELLED, reason=inert.reason, log_tail="").to_dict()
                )  # its cost counts
                return RunOutcome(inert, reused=False)  # cut after its compile (engine/inert.py)
            diagnosis = diagnose_watched(seen, self.cell.steps)
            result = job_result(self, spec, key, job, seen, diagnosis, submitted_at, tuple(retries))
            stopped = seen.stop_reason or self.stopped_early(job.job_id)
            if stopped and result.tgs is not None:  # its partial steady state is its measurement
                result = replace(result, verdict=Verdict.STOPPED_EARLY, log_tail="", reason=f"stopped early: {stopped}")
                self.store.add_result(result)
                return RunOutcome(result, reused=False)
            decision = decide(history, diagnosis, self.counters, self.playbook)
            if decision.action is Remedy.STOP:
                self.store.add_result(result)
                raise SweepStopped(decision.stop_reason or decision.reason, decision.failing_nodes, decision.recovery)
            if decision.action in (Remedy.RETRY_SAME_NODELIST, Remedy.RESUME_NODE_THEN_RETRY):
                self.store.write(records.Attempt(result))
                self._warn(f"{spec.name} job {job.job_id}: {decision.reason}")
                if decision.action is Remedy.RESUME_NODE_THEN_RETRY:
                    self._resume(decision.failing_nodes)
                history.append(diagnosis)
                retries.append(f"job {job.job_id}: {diagnosis.failure.value}: {diagnosis.reason}")
                job = None
                waited_from = self.clock()
                self._watch_queue_ahead()
                # The rule's pause before the resubmission (a GPU runtime error: 90 s for the
                # device to recover); time spent watching queued jobs counts.
                if (
                    decision.action is Remedy.RETRY_SAME_NODELIST
                    and (left := decision.wait_s - (self.clock() - waited_from)) > 0
                ):
                    self._warn(f"{spec.name}: waiting {left:.0f} s before the retry")
                    self.sleep(left)
                continue
            if result.measured:  # a source for inert candidates (engine/inert.py)
                record_fingerprint(self.store, key, job, self.launcher)
            if decision.action is Remedy.DROP_INFRA_FLAKE:
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
        shared = shared_result(source, key, spec)
        self.store.add_result(shared)
        return shared

    def _stop_judge(self, spec: RunSpec, key: str, job: SubmittedJob) -> Judge | None:
        """What the watcher asks on each step whether to stop this job early (None: never)."""
        adaptive = self.sweep.adaptive
        return adaptive.judge(spec, key, job) if adaptive is not None else None

    def _check_nodes(self) -> None:
        self.counters = check_nodes(self.launcher, self.store, self.counters, self.playbook, self._warn, self.sleep)

    def _resume(self, nodes: tuple[str, ...]) -> None:
        self.counters = resume(self.launcher, self.store, nodes, self.counters, self.playbook, self._warn, self.sleep)

    def _warn(self, text: str) -> None:
        (self.warn or self.report)(text)

    def _submit(self, spec: RunSpec, key: str) -> SubmittedJob:
        limit_s = _controller_limit_s(self.playbook)
        request = replace(
            request_for(self.cell, spec, self.image, cache=not self.fixed_protocol),
            mark=f"xlatune-{uuid.uuid4().hex[:16]}",
        )
        # Before the scheduler hears of it: a kill before the job id is stored leaves this, and
        # the rerun finds the job by its mark (engine/recover.py) instead of submitting it again.
        self.store.write(
            records.Submitting(
                key=key,
                item=spec.name,
                job_name=request.job_name,
                mark=request.mark,
                compile_cache=request.compile_cache,
            )
        )
        try:
            job = submit_through_outage(
                self.poller,
                request,
                self.sleep,
                limit_s,
                record=lambda job: self._record_submission(spec, key, job, request.mark),
            )
        except ControllerDown as error:
            raise SweepStopped(
                f"the Slurm controller did not take {spec.name}'s job for {limit_s / 60:.0f} min: {error}"
            ) from None
        except LauncherError as error:
            if disk_full(str(error)):  # every later submission would fail the same way
                raise SweepStopped(
                    f"disk_full: {spec.name}'s job could not be submitted: {error}",
                    recovery="free space (or fix the disk) where it says, then rerun",
                ) from None
            raise
        return job

    def _record_submission(self, spec: RunSpec, key: str, job: SubmittedJob, mark: str) -> None:
        """Recorded before anything else happens (signals wait meanwhile: stopsignals.deferred),
        so a killed session re-attaches to the job and an interrupted one cancels it."""
        try:
            self.store.write(
                records.Submitted(
                    key=key,
                    item=spec.name,
                    job_id=job.job_id,
                    log_path=job.log_path,
                    job_dir=job.job_dir,
                    handle=job.handle,
                    mark=mark,
                    compile_cache=job.compile_cache,
                )
            )
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
            depth = min(depth, adaptive.plan.rules.max_in_flight - 1)
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
        finished (never any other job). A job that ended on its own while the cancel was on its
        way (its final state, waited for a few seconds at most, or its log's last step says so) is
        left to the rerun, which re-attaches and judges its log."""
        with deferred():  # a second Ctrl-C waits: no job is left cancelled but unrecorded
            cancel_owned(self)

    def adopt_orphans(self) -> None:
        """Take over every job an earlier (killed) session of this store left queued or running,
        so that an interrupt of this session cancels them too; their items re-attach to them."""
        adopt_orphans(self)


def _controller_limit_s(playbook: Playbook) -> float:
    """How long the controller may stay unreachable before STOP (the playbook says 15 min)."""
    minutes = playbook.rule(FailureClass.CONTROLLER_UNREACHABLE).stop_after
    return float(minutes if minutes is not None else 15) * 60
