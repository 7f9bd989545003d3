"""The ground floor of jobs: what a run asks for (JobRequest), the job it became (SubmittedJob), a
neutral JobState with its phase and progress, and the launcher errors. Every room may import it;
it imports only the other ground-floor modules (errors). launch/base.py's Launcher Protocol is the
seam these values cross."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from .errors import XlatuneError

Pairs = tuple[tuple[str, str], ...]


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


_FINISHED = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.OUT_OF_MEMORY,
        JobState.PREEMPTED,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
    }
)
_SPELLINGS: Mapping[str, JobState] = MappingProxyType(
    {
        # Slurm's other words for the states (JobState is named as sacct prints them):
        # compact codes (squeue %t)
        "PD": JobState.PENDING,
        "CF": JobState.CONFIGURING,
        "R": JobState.RUNNING,
        "CG": JobState.COMPLETING,
        "CD": JobState.COMPLETED,
        "F": JobState.FAILED,
        "CA": JobState.CANCELLED,
        "TO": JobState.TIMEOUT,
        "NF": JobState.NODE_FAIL,
        "OOM": JobState.OUT_OF_MEMORY,
        "PR": JobState.PREEMPTED,
        "BF": JobState.BOOT_FAIL,
        "DL": JobState.DEADLINE,
        # requeued/held jobs wait to run again; suspended/stopped ones wait to resume
        "REQUEUED": JobState.PENDING,
        "RQ": JobState.PENDING,
        "REQUEUE_HOLD": JobState.PENDING,
        "REQUEUE_FED": JobState.PENDING,
        "RESV_DEL_HOLD": JobState.PENDING,
        "SUSPENDED": JobState.PENDING,
        "S": JobState.PENDING,
        "STOPPED": JobState.PENDING,
        "ST": JobState.PENDING,
        # still holding its nodes
        "RESIZING": JobState.RUNNING,
        "SIGNALING": JobState.RUNNING,
        "STAGE_OUT": JobState.COMPLETING,
        "SO": JobState.COMPLETING,
        "SPECIAL_EXIT": JobState.FAILED,
        "SE": JobState.FAILED,
        "REVOKED": JobState.CANCELLED,
    }
)


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


class LauncherError(XlatuneError):
    """A scheduler or transport call failed; the message is one line and names the command."""


class CommandRefused(LauncherError):
    """The way to the cluster (the host-cmd policy) refused the command: nothing reached Slurm."""
