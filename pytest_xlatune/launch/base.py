"""The launcher seam: the Launcher Protocol and the values that cross it (JobRequest, a neutral JobState)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Protocol, TypeVar

from ..errors import XlatuneError

Pairs = tuple[tuple[str, str], ...]
T = TypeVar("T")


@dataclass(frozen=True)
class JobRequest:
    """Everything a launcher needs to start one job; every string already passed the grammar."""

    job_name: str
    profile: str
    passthrough: tuple[str, ...]
    xla_flags: tuple[str, ...] = ()
    env: Pairs = ()
    unset_env: tuple[str, ...] = ()
    evidence: bool = False
    config_tag: str = ""
    resolved_from: str = ""  # the profile a winner/cross-config run took its flags from
    image: str | None = None  # another image than the launcher's (the gate's old-image controls; "" = none)
    # This submission's own mark (Slurm: the job comment), recorded in the store before the job
    # is submitted, so that a rerun after a kill in between finds the job instead of submitting
    # it again; "" = unmarked.
    mark: str = ""
    # The JAX compilation cache this run shares with every run of its effective settings,
    # relative to the backend's cache root (adaptive.cache); "" = none (jaxcache.py).
    compile_cache: str = ""


@dataclass(frozen=True)
class SubmittedJob:
    """A job as the store records it; `handle` is launcher-specific (a pid for local jobs)."""

    job_id: str
    log_path: str
    job_dir: str
    handle: str = ""
    compile_cache: str = ""  # the JAX compilation cache directory the job was given ("" = none)


class JobState(str, Enum):
    """Where a job is, neutral across backends (named as Slurm prints them; a str, so == "RUNNING" holds)."""

    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    UNKNOWN = "UNKNOWN"

    @property
    def finished(self) -> bool:
        """True once the job will not run (again) by itself."""
        return self in _FINISHED

    @property
    def running(self) -> bool:
        """Running, or finishing (Slurm's COMPLETING: the job's processes are being reaped)."""
        return self in (JobState.RUNNING, JobState.COMPLETING)

    @classmethod
    def parse(cls, text: str) -> JobState:
        """Map a state word (`CANCELLED by 0`, sacct's `+`, Slurm's compact codes and other words) to a JobState."""
        word = text.strip().split(" ", 1)[0].rstrip("+").upper()
        if word in cls.__members__:
            return cls[word]
        return _SPELLINGS.get(word, cls.UNKNOWN)


_FINISHED = frozenset({
    JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.NODE_FAIL,
    JobState.OUT_OF_MEMORY, JobState.PREEMPTED, JobState.BOOT_FAIL, JobState.DEADLINE,
})
_SPELLINGS: Mapping[str, JobState] = MappingProxyType({
    # Slurm's other words for the states (JobState is named as sacct prints them):
    # compact codes (squeue %t)
    "PD": JobState.PENDING, "CF": JobState.CONFIGURING, "R": JobState.RUNNING,
    "CG": JobState.COMPLETING, "CD": JobState.COMPLETED, "F": JobState.FAILED,
    "CA": JobState.CANCELLED, "TO": JobState.TIMEOUT, "NF": JobState.NODE_FAIL,
    "OOM": JobState.OUT_OF_MEMORY, "PR": JobState.PREEMPTED, "BF": JobState.BOOT_FAIL,
    "DL": JobState.DEADLINE,
    # requeued/held jobs wait to run again; suspended/stopped ones wait to resume
    "REQUEUED": JobState.PENDING, "RQ": JobState.PENDING, "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING, "RESV_DEL_HOLD": JobState.PENDING,
    "SUSPENDED": JobState.PENDING, "S": JobState.PENDING, "STOPPED": JobState.PENDING,
    "ST": JobState.PENDING,
    # still holding its nodes
    "RESIZING": JobState.RUNNING, "SIGNALING": JobState.RUNNING, "STAGE_OUT": JobState.COMPLETING,
    "SO": JobState.COMPLETING,
    "SPECIAL_EXIT": JobState.FAILED, "SE": JobState.FAILED, "REVOKED": JobState.CANCELLED,
})


class JobPhase(Enum):
    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(frozen=True)
class JobProgress:
    phase: JobPhase
    state: JobState
    exit_code: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.state, JobState):  # a word from a scheduler's output
            object.__setattr__(self, "state", JobState.parse(str(self.state)))


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

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *,
                 ended: bool = False) -> bytes:
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


class LauncherError(XlatuneError):
    """A scheduler or transport call failed; the message is one line and names the command."""


def for_image(own: T, others: Mapping[str, T], request: JobRequest) -> T:
    """What a launcher runs a request with: its own, or what it was given for the request's other
    image (the gate's old-image controls); an image it was given nothing for is refused."""
    if request.image is None:
        return own
    if request.image not in others:
        raise LauncherError(f"{request.job_name}: image: expected one of the images this session "
                            f"was started for ({', '.join(map(repr, others)) or 'none'}), found {request.image!r}")
    return others[request.image]


class CommandRefused(LauncherError):
    """The way to the cluster (the host-cmd policy) refused the command: nothing reached Slurm."""
