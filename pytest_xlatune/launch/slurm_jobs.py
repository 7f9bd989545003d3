"""What every Slurm launcher shares: the frozen placement, one poll for all jobs, cancelling only
its own jobs, and the health of the pinned nodes."""

from __future__ import annotations

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
        return JobProgress(JobPhase.PENDING, "UNKNOWN")
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

    def check_requests(self, requests: Iterable[JobRequest]) -> None:
        """A plain batch script runs any request: nothing to refuse (maxtext-slurm checks its names)."""

    def log_source(self, job: SubmittedJob) -> str:
        return job.log_path

    def unusable_nodes(self) -> list[tuple[str, str]]:
        """(node, state) of each pinned node that cannot take jobs (one sinfo call)."""
        nodes = self.client.nodes(nodelist=self.placement.nodelist)
        return [(name, status.raw_state) for name, status in sorted(nodes.items())
                if not status.state.usable or not status.responding]

    def resume_node(self, node: str) -> None:
        self.client.resume(node, reason="xlatune")
