"""The jobs a session owns: those it submitted and those an earlier, killed session of the same
store left queued or running (adopted, or re-attached when their item's turn comes). An
interrupt cancels exactly these, never any other job, and records each cancel so a rerun
submits the run again instead of re-attaching to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import records
from ..launch.base import JobPhase, JobState, Launcher, LauncherError, SubmittedJob
from ..store import StoreWriteError
from .inert import store_lost_cuts

if TYPE_CHECKING:  # a type only: engine/runner.py imports this module
    from .runner import JobRunner


def cancel_owned(runner: JobRunner) -> None:
    """Cancel this session's unfinished jobs and record each cancel (JobRunner.cancel_all holds
    signals off meanwhile)."""
    cancelled = []
    for job_id in sorted(runner._submitted_here & runner.poller.tracked):
        if runner.poller.finished(job_id):
            runner.poller.forget(job_id)
            continue  # it ended on its own: a rerun re-attaches and judges its log
        runner.launcher.cancel(job_id)
        runner.poller.forget(job_id)
        cancelled.append(job_id)
    ended = ended_before_the_cancel(runner.launcher, cancelled)
    for job_id in cancelled:
        if job_id in ended:
            continue
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


def ended_before_the_cancel(launcher: Launcher, job_ids: list[str]) -> set[str]:
    """The jobs among those just cancelled that the scheduler says ended on their own: a
    state other than cancelled, an exit other than the cancel's signal (130, 137, 143). When
    it cannot say, none (each counts as cancelled, as before)."""
    if not job_ids:
        return set()
    try:
        progress = launcher.poll(job_ids)
    except LauncherError:
        return set()
    return {
        job_id
        for job_id, p in progress.items()
        if p.phase is JobPhase.FINISHED
        and p.state not in (JobState.CANCELLED, JobState.UNKNOWN)
        and p.exit_code not in (130, 137, 143)
    }


def adopt_orphans(runner: JobRunner) -> None:
    """Take over every job an earlier (killed) session of this store left queued or running,
    so that an interrupt of this session cancels them too; their items re-attach to them."""
    for key, record in runner.store.pending_submissions().items():
        job = SubmittedJob(
            job_id=str(record["job_id"]),
            log_path=str(record.get("log_path", "")),
            job_dir=str(record.get("job_dir", "")),
            handle=str(record.get("handle", "")),
            compile_cache=str(record.get("compile_cache", "")),
        )
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
    job = SubmittedJob(
        job_id=str(record["job_id"]),
        log_path=record["log_path"],
        job_dir=record["job_dir"],
        handle=str(record.get("handle", "")),
        compile_cache=str(record.get("compile_cache", "")),
    )
    if not runner.launcher.reattach(job):
        return None
    runner.poller.track(job.job_id)
    runner._submitted_here.add(job.job_id)  # ours now: an interrupt cancels it too
    runner._key_of_job[job.job_id] = key
    return job
