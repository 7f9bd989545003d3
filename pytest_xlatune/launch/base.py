"""The launcher seam: the Launcher Protocol. The values that cross it (JobRequest, SubmittedJob, a
neutral JobState, the launcher errors) are the ground floor's, in jobs.py; they are named here too."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar, runtime_checkable

from ..jobs import CommandRefused, JobPhase, JobProgress, JobRequest, JobState, LauncherError, Pairs, SubmittedJob

__all__ = [
    "CommandRefused",
    "JobPhase",
    "JobProgress",
    "JobRequest",
    "JobState",
    "Launcher",
    "LauncherError",
    "Pairs",
    "ProgramDumps",
    "SubmittedJob",
    "for_image",
]

T = TypeVar("T")


class Launcher(Protocol):
    """Starts jobs, reports on all of them in one call, cancels only what it started."""

    name: str
    queue_depth: int  # jobs submitted ahead of their turn (0: one at a time)

    def check_requests(self, requests: Iterable[JobRequest]) -> None:
        """Pre-flight: refuse (PreflightError) requests this backend could never run."""
        ...

    def submit(self, request: JobRequest) -> SubmittedJob: ...

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]: ...

    def cancel(self, job_id: str) -> None: ...

    def reattach(self, job: SubmittedJob) -> bool:
        """Watch a job submitted by an earlier, killed session instead of submitting it again."""
        ...

    def find_submission(self, mark: str, job_name: str, since: float) -> SubmittedJob | None:
        """The job a submission marked `mark` (of the request named `job_name`, made at or after
        the epoch time `since`) started, now ours; None when the scheduler knows no such job.
        LauncherError when it cannot tell (the caller must then not submit the run again)."""
        ...

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        """The log's bytes from `offset` (at most `limit` of them); b"" while it is missing;
        `ended`: the job is over, this is the final read."""
        ...

    def artifacts(self, job: SubmittedJob) -> dict[str, str]: ...

    def log_source(self, job: SubmittedJob) -> str:
        """The file whose lines were read (a renamed log, a Ray worker's), else job.log_path."""
        ...

    def unusable_nodes(self) -> list[tuple[str, str]]:
        """(node, state) for each pinned node that cannot take jobs now (drained, down, …)."""
        ...

    def resume_node(self, node: str) -> None:
        """Return a drained/down pinned node to service (scontrol update … State=RESUME)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class ProgramDumps(Protocol):
    """A launcher that reads a running job's program dump back (evidence/inert.py: the inert-flag
    fingerprint at compile-done). A launcher without it has nothing to fingerprint: its candidates
    are never cut as inert."""

    def program_dump(self, job: SubmittedJob, *, stepped: bool) -> dict[str, str]:
        """File name → text of the job's train-step dump (evidence/fingerprint.program_file); {}
        while none can be read whole: none yet, or `stepped` is False (the job said it compiled,
        no step yet) and a rank other than the dumping one may have said it first."""
        ...


def for_image(own: T, others: Mapping[str, T], request: JobRequest) -> T:
    """What a launcher runs a request with: its own, or what it was given for the request's other
    image (the gate's old-image controls); an image it was given nothing for is refused."""
    if request.image is None:
        return own
    if request.image not in others:
        raise LauncherError(
            f"{request.job_name}: image: expected one of the images this session "
            f"was started for ({', '.join(map(repr, others)) or 'none'}), found {request.image!r}"
        )
    return others[request.image]
