"""What every Slurm launcher shares: the frozen placement, one poll for all jobs, cancelling only
its own jobs, and the health of the pinned nodes."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..slurm.client import SlurmClient
from ..slurm.parsers import JobStatus
from .base import JobPhase, JobProgress, JobRequest, JobState, LauncherError, SubmittedJob


@dataclass(frozen=True)
class SlurmPlacement:
    """Where every job of the sweep goes: the frozen nodelist and its size."""

    nodelist: str
    nodes: int
    partition: str | None = None
    time_limit: str | None = None


def progress_of(status: JobStatus | None) -> JobProgress:
    """Slurm's view of a job → the launcher-neutral phase."""
    if status is None:
        return JobProgress(JobPhase.PENDING, JobState.UNKNOWN)
    if status.state.finished or status.state is JobState.UNKNOWN:
        return JobProgress(JobPhase.FINISHED, status.state, status.exit_code)
    if status.state.running:
        return JobProgress(JobPhase.RUNNING, status.state)
    return JobProgress(JobPhase.PENDING, status.state)


class SlurmJobs:
    """Base of the sbatch and maxtext-slurm launchers; `_mine` holds the job ids they may cancel."""

    client: SlurmClient
    placement: SlurmPlacement
    _mine: set[str]

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
        statuses = self.client.poll(list(job_ids))
        return {job_id: progress_of(statuses.get(job_id)) for job_id in job_ids}

    def cancel(self, job_id: str) -> None:
        if job_id not in self._mine:
            raise LauncherError(f"refusing to cancel job {job_id}: not submitted by this sweep")
        self.client.cancel(job_id)

    def find_submission(self, mark: str, job_name: str, since: float) -> SubmittedJob | None:
        """The job whose Slurm comment is the submission's mark (launch.base.Launcher). Jobs
        carrying the mark are this sweep's by construction; one the same submission started
        twice (sbatch retried after a lost answer) keeps the first, the others are cancelled."""
        # A day early: the cluster's clock and time zone need not be this host's; no older job
        # can carry a mark made now.
        found = self.client.jobs_marked(mark, time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 86400)))
        if not found:
            return None
        first, *extra = sorted(found, key=lambda j: (len(j), j))
        self._mine.update(found)
        for job_id in extra:
            self.client.cancel(job_id)
        return self._submitted_job(first, job_name)

    def _submitted_job(self, job_id: str, job_name: str) -> SubmittedJob:
        """The SubmittedJob that submit() would have returned for this job id."""
        raise NotImplementedError

    def check_requests(self, requests: Iterable[JobRequest]) -> None:
        """A plain batch script runs any request: nothing to refuse (maxtext-slurm checks its names)."""

    def log_source(self, job: SubmittedJob) -> str:
        return job.log_path

    def unusable_nodes(self) -> list[tuple[str, str]]:
        """(node, state) of each pinned node that cannot take jobs (one sinfo call)."""
        nodes = self.client.nodes(nodelist=self.placement.nodelist)
        return [
            (name, status.raw_state)
            for name, status in sorted(nodes.items())
            if not status.state.usable or not status.responding
        ]

    def resume_node(self, node: str) -> None:
        self.client.resume(node, reason="xlatune")
