"""The jobs a session owns: those it submitted and those an earlier, killed session of the same
store left queued or running (adopted, or re-attached when their item's turn comes). An
interrupt cancels exactly these, never any other job, waits (SETTLE_S in all) for their final
states, and records each cancel so a rerun submits the run again instead of re-attaching to it;
a job that ended on its own meanwhile, or whose log shows its last step, is left to the rerun."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from .. import records
from ..launch.base import JobPhase, JobState, Launcher, LauncherError, SubmittedJob
from ..store import StoreWriteError
from ..triage.logs import StepLog
from .inert import store_lost_cuts
from .watch import log_end

if TYPE_CHECKING:  # a type only: engine/runner.py imports this module
    from .runner import JobRunner


# After the cancels, how long to wait (in all, not per job) for the scheduler to report each
# cancelled job's final state, and the waits between its answers: a job that ended on its own
# while the cancel was on its way still reads RUNNING or COMPLETING at first. Ctrl-C waits this
# long at most; a job with no final state by then counts as cancelled unless its log says it trained.
SETTLE_S = 5.0
SETTLE_POLLS_S = (0.1, 0.2, 0.4, 0.8)  # then every second
# How much of a log's end is read to see whether the trainer logged its last step.
TRAINED_TAIL = 1 << 20


def cancel_owned(runner: JobRunner) -> None:
    """Cancel this session's unfinished jobs and record each cancel (JobRunner.cancel_all holds
    signals off meanwhile)."""
    cancelled = []
    # In submission order (job 99 before job 100): the running job, the oldest, first.
    for job_id in sorted(runner._submitted_here & runner.poller.tracked, key=lambda j: (len(j), j)):
        if runner.poller.finished(job_id):
            runner.poller.forget(job_id)
            continue  # it ended on its own: a rerun re-attaches and judges its log
        runner.launcher.cancel(job_id)
        runner.poller.forget(job_id)
        cancelled.append(job_id)
    ended = ended_before_the_cancel(runner.launcher, cancelled, runner.clock, runner.sleep)
    jobs = _submitted_jobs(runner)
    for job_id in cancelled:
        if job_id in ended or (job_id in jobs and trained(runner.launcher, jobs[job_id], runner.cell.steps)):
            continue  # it ran to its end: the rerun re-attaches and stores its result
        # A cancelled submission is not re-attached on the next run: it is submitted again.
        try:
            runner.store.write(records.Cancelled(job_id=job_id, key=runner._key_of_job.get(job_id, "")))
        except StoreWriteError:
            # The store is failing (a full disk): the lock file's note keeps it instead, so
            # the rerun runs it again rather than take it for a cancel by hand.
            if not runner.store.note_cancelled(job_id):
                runner._warn(
                    f"job {job_id}: cancelled, but not recorded (the store and its lock "
                    "note cannot be written): a rerun will take it for a cancel by hand"
                )


def ended_before_the_cancel(
    launcher: Launcher, job_ids: list[str], clock: Callable[[], float], sleep: Callable[[float], None]
) -> set[str]:
    """The jobs among those just cancelled that ended on their own: the scheduler's final state
    is not cancelled and the exit is not the cancel's signal (130, 137, 143). Asks until each
    job has a final state, SETTLE_S in all; a job with none by then, or when the scheduler
    cannot say, is not among them."""
    waiting, ended = set(job_ids), set()
    deadline, pauses = clock() + SETTLE_S, iter(SETTLE_POLLS_S)
    while waiting:
        try:
            progress = launcher.poll(sorted(waiting))
        except LauncherError:
            break
        for job_id, p in progress.items():
            if job_id in waiting and p.phase is JobPhase.FINISHED:
                waiting.discard(job_id)
                if p.state not in (JobState.CANCELLED, JobState.UNKNOWN) and p.exit_code not in (130, 137, 143):
                    ended.add(job_id)
        left = deadline - clock()
        if not waiting or left <= 0:
            break
        sleep(min(next(pauses, 1.0), left))
    return ended


def trained(launcher: Launcher, job: SubmittedJob, steps: int) -> bool:
    """Whether the job's log shows the trainer's last step (triage's rule: a log that does holds
    the whole measurement, whatever the scheduler says of the job's end). Reads the log's end."""
    try:
        tail = launcher.read_log(job, 0, TRAINED_TAIL, ended=True)
        if len(tail) == TRAINED_TAIL:  # a longer log: its last TRAINED_TAIL bytes, from a line's start
            start = max(0, log_end(launcher, job, TRAINED_TAIL) - TRAINED_TAIL // 2)
            tail = launcher.read_log(job, start, TRAINED_TAIL, ended=True)
            tail = tail[tail.find(b"\n") + 1 :]
    except (LauncherError, OSError):
        return False  # cannot tell: counted cancelled, as a job with no log is
    log = StepLog()
    log.feed(tail)
    log.flush()
    return log.last_step is not None and log.last_step >= steps - 1


def _submitted_jobs(runner: JobRunner) -> dict[str, SubmittedJob]:
    """Job id → the job, for the store's submissions without a result (this session's own too)."""
    return {str(r["job_id"]): submitted_job(r) for r in runner.store.pending_submissions().values()}


def submitted_job(record: Mapping[str, object]) -> SubmittedJob:
    """The job a `submitted` record names."""
    return SubmittedJob(
        job_id=str(record["job_id"]),
        log_path=str(record.get("log_path", "")),
        job_dir=str(record.get("job_dir", "")),
        handle=str(record.get("handle", "")),
        compile_cache=str(record.get("compile_cache", "")),
    )


def adopt_orphans(runner: JobRunner) -> None:
    """Take over every job an earlier (killed) session of this store left queued or running,
    so that an interrupt of this session cancels them too; their items re-attach to them."""
    for key, record in runner.store.pending_submissions().items():
        job = submitted_job(record)
        if runner.launcher.reattach(job):
            runner.poller.track(job.job_id)
            runner._submitted_here.add(job.job_id)
            runner._key_of_job[job.job_id] = key
    store_lost_cuts(runner)  # an inert cut stored, its job's record not: the session was killed between


def reattach(runner: JobRunner, key: str) -> SubmittedJob | None:
    """A job an earlier (killed) session submitted for this run and never recorded a result of."""
    record = runner.store.pending_submissions().get(key)
    if record is None or runner.remeasure:
        return None
    job = submitted_job(record)
    if not runner.launcher.reattach(job):
        return None
    runner.poller.track(job.job_id)
    runner._submitted_here.add(job.job_id)  # ours now: an interrupt cancels it too
    runner._key_of_job[job.job_id] = key
    return job
