"""One Sweep per cell and pytest session: reuse, submit, watch, judge and store each run."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .compose import job_request
from .launch.base import JobPhase, JobProgress, Launcher, SubmittedJob
from .poller import Poller
from .logs import SignalKind, StepLog, steady_state
from .model import Cell
from .plan import RunKind, RunSpec, run_key
from .results import JobResult, Verdict
from .store import ResultStore
from .triage import Evidence, judge

Report = Callable[[str], None]

# Verdicts worth running again on a rerun; everything else is a finished measurement.
RERUN_VERDICTS = (Verdict.CANCELLED,)


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
    poll_interval: float = 0.5
    remeasure: bool = False
    report: Report = lambda text: None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    queue_depth: int = 0
    image: str = ""
    _ran_this_session: set[str] = field(default_factory=set)
    _upcoming: list[RunSpec] = field(default_factory=list)
    _queued: set[str] = field(default_factory=set)
    _submitted_here: set[str] = field(default_factory=set)
    _key_of_job: dict[str, str] = field(default_factory=dict)
    poller: Poller = field(init=False)

    def __post_init__(self) -> None:
        self.poller = Poller(self.launcher, self.poll_interval, clock=self.clock, warn=self.report)

    def set_upcoming(self, specs: list[RunSpec]) -> None:
        """The selected runs of this cell in execution order (for keeping the queue full)."""
        self._upcoming = list(specs)

    # ---- lookups over the store -------------------------------------------------------

    def key(self, spec: RunSpec) -> str:
        return run_key(self.cell, spec, self.nodelist, self.image)

    def stored(self, spec: RunSpec) -> JobResult | None:
        return self.store.latest_by_key().get(self.key(spec))

    def results(self) -> list[JobResult]:
        """The latest result of each current spec (what the report and Δ% use)."""
        latest = self.store.latest_by_key()
        found = self._direct_results(latest)
        best = _best_profile(found, self.cell.primary_config.name)
        for spec in self.specs:
            if spec.needs_resolution and best is not None:
                if result := latest.get(self.key(spec.resolve(self._spec_of(best)))):
                    found.append(result)
        return found

    def _direct_results(self, latest: dict[str, JobResult]) -> list[JobResult]:
        return [latest[key] for spec in self.specs if not spec.needs_resolution
                if (key := self.key(spec)) in latest]

    def _spec_of(self, result: JobResult) -> RunSpec:
        return next(s for s in self.specs if s.kind is RunKind.PROFILE and s.profile == result.profile)

    def baseline_tgs(self, config_tag: str) -> float | None:
        """Mean TGS of the measured baseline-deployed repeats of a config tag."""
        values = [r.tgs for r in self.results()
                  if r.kind == RunKind.BASELINE.value and r.config_tag == config_tag
                  and r.measured and r.tgs is not None]
        return statistics.fmean(values) if values else None

    def best_profile(self) -> JobResult | None:
        """The highest-TGS measured profile of the primary config tag (waves 2-4)."""
        latest = self.store.latest_by_key()
        return _best_profile(self._direct_results(latest), self.cell.primary_config.name)

    def resolve(self, spec: RunSpec) -> RunSpec | None:
        """Fill a cross-config run with the best profile's flags; None while there is none."""
        if not spec.needs_resolution:
            return spec
        best = self.best_profile()
        return None if best is None else spec.resolve(self._spec_of(best))

    # ---- running ----------------------------------------------------------------------

    def run(self, spec: RunSpec) -> RunOutcome:
        """Reuse a stored result for this exact run, or launch it and wait for its verdict."""
        key = self.key(spec)
        stored = self.store.latest_by_key().get(key)
        if stored and stored.verdict not in RERUN_VERDICTS and (
            not self.remeasure or key in self._ran_this_session
        ):
            return RunOutcome(stored, reused=True)
        job = self._reattach(key)
        if job is None:
            job = self._submit(spec, key)
        elif key not in self._queued:
            self.report(f"{spec.name}: re-attached to job {job.job_id} of an earlier session")
        self._ran_this_session.add(key)
        submitted_at = self.clock()
        self._fill_queue(after=spec)
        try:
            log, progress, cancelled = self._watch(spec, job)
        except BaseException:
            self.cancel_all()
            raise
        self.poller.forget(job.job_id)
        result = self._result(spec, key, job, log, progress, cancelled, submitted_at)
        self.store.add_result(result)
        return RunOutcome(result, reused=False)

    def _submit(self, spec: RunSpec, key: str) -> SubmittedJob:
        job = self.launcher.submit(job_request(self.cell, spec))
        # Recorded before anything else happens, so a killed session re-attaches to it.
        self.store.append("submitted", key=key, item=spec.name, job_id=job.job_id,
                          log_path=job.log_path, job_dir=job.job_dir, handle=job.handle)
        self._submitted_here.add(job.job_id)
        self._key_of_job[job.job_id] = key
        self.poller.track(job.job_id)
        return job

    def _fill_queue(self, after: RunSpec) -> None:
        """Submit the next runs now, so the pinned nodes never wait for pytest (Slurm serialises
        them); runs whose flags depend on results not yet known wait for their turn."""
        if self.queue_depth <= 0 or after not in self._upcoming:
            return
        queued = 0
        for spec in self._upcoming[self._upcoming.index(after) + 1:]:
            if queued >= self.queue_depth or spec.needs_resolution:
                break
            key = self.key(spec)
            if not self.remeasure and key in self.store.latest_by_key():
                continue  # reused, never submitted
            if key not in self._queued and key not in self.store.pending_submissions():
                self._submit(spec, key)
            self._queued.add(key)
            queued += 1

    def cancel_all(self) -> None:
        """Cancel exactly the jobs this session submitted and that have not finished."""
        for job_id in sorted(self._submitted_here & self.poller.tracked):
            self.launcher.cancel(job_id)
            self.poller.forget(job_id)
            # A cancelled submission is not re-attached on the next run: it is submitted again.
            self.store.append("cancelled", job_id=job_id,
                              key=self._key_of_job.get(job_id, ""))

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
        return job

    def _watch(self, spec: RunSpec, job: SubmittedJob) -> tuple[StepLog, JobProgress, bool]:
        log = StepLog()
        offset = 0
        cancelled = False
        last_reported = -1
        while True:
            progress = self.poller.status(job.job_id)
            chunk = self.launcher.read_log(job, offset)
            offset += len(chunk)
            log.feed(chunk)
            if progress.phase is JobPhase.FINISHED:
                log.flush()
                return log, progress, cancelled
            if log.unknown_flag and not cancelled:
                # Do not wait for a time limit: the job cannot recover from an unknown flag.
                self.launcher.cancel(job.job_id)
                cancelled = True
            if log.last_step is not None and log.last_step != last_reported:
                last_reported = log.last_step
                latest = log.steps[log.last_step].tokens_per_s
                self.report(f"{spec.name} job {job.job_id} {progress.state} "
                            f"step {log.last_step + 1}/{self.cell.steps}"
                            + (f", {latest:.1f} TGS" if latest is not None else ""))
            self.sleep(self.poll_interval)

    def _result(self, spec: RunSpec, key: str, job: SubmittedJob, log: StepLog,
                progress: JobProgress, cancelled: bool, submitted_at: float) -> JobResult:
        verdict, reason = judge(Evidence(
            last_step=log.last_step, expected_steps=self.cell.steps, exit_code=progress.exit_code,
            unknown_flag_line=_first_line(log, SignalKind.UNKNOWN_FLAG),
            oom_line=_first_line(log, SignalKind.OOM),
            cancelled_by_us=cancelled,
        ))
        steady = steady_state(log.steps, profiler_on=spec.evidence) if verdict.measured else None
        if verdict.measured and steady is None:
            verdict, reason = Verdict.NO_STEPS, "no Tokens/s/device in the steady-state window"
        return JobResult(
            key=key, item=spec.name, wave=spec.wave, profile=spec.profile,
            config_tag=spec.config_tag, kind=spec.kind.value, job_id=job.job_id,
            verdict=verdict, reason=reason,
            xla_flags=spec.xla_flags, env=spec.env, overrides=spec.overrides,
            nodelist=self.nodelist, image=self.image or self.cell.image, backend=self.launcher.name,
            tgs=steady.tgs if steady else None,
            step_seconds=steady.step_seconds if steady else None,
            last_loss=steady.last_loss if steady else None,
            tgs_values=steady.tgs_values if steady else (),
            steps_used=steady.steps_used if steady else (),
            step_count=len(log.steps),
            log_path=job.log_path, log_tail="" if verdict.measured else log.tail_text(),
            artifacts=tuple(sorted(self.launcher.artifacts(job).items())),
            resolved_from=spec.resolved_from, exit_code=progress.exit_code,
            submitted_at=submitted_at, finished_at=self.clock(),
        )


def _best_profile(results: list[JobResult], config_tag: str) -> JobResult | None:
    candidates = [r for r in results
                  if r.kind == RunKind.PROFILE.value and r.config_tag == config_tag and r.measured]
    return max(candidates, key=lambda r: r.tgs or 0.0, default=None)


def _first_line(log: StepLog, kind: SignalKind) -> str | None:
    return next((signal.line for signal in log.signals if signal.kind is kind), None)
