"""Read Slurm CLI output (sbatch, squeue, sacct, scontrol, sinfo) into values; pure functions."""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass
from enum import Enum

from ..errors import XlatuneError
from ..jobs import JobState
from ..shareable import cut_at_word

__all__ = [
    "INVALID_JOB_ID",
    "MARKS_FIELDS",
    "MARKS_FORMAT",
    "SACCT_FIELDS",
    "SINFO_NODES_FORMAT",
    "SQUEUE_FORMAT",
    "JobState",
    "JobStatus",
    "NodeState",
    "NodeStatus",
    "SlurmParseError",
    "parse_exit_code",
    "parse_hostnames",
    "parse_marks",
    "parse_sacct",
    "parse_sbatch_parsable",
    "parse_scontrol_show_job",
    "parse_scontrol_show_jobs",
    "parse_sinfo_nodes",
    "parse_squeue",
    "parse_submitted_batch_job",
]

# squeue -h -o SQUEUE_FORMAT: job id | long state | reason | node list | job name.
# The name goes last because it is the one user-chosen field and may itself contain "|".
SQUEUE_FORMAT = "%i|%T|%r|%N|%j"
# sacct --parsable2 --noheader -o SACCT_FIELDS
SACCT_FIELDS = "JobID,State,ExitCode,NodeList"
# squeue -h -o MARKS_FORMAT / sacct -P -n -o MARKS_FIELDS: job id | comment (a submission's mark).
MARKS_FORMAT = "%i|%k"
MARKS_FIELDS = "JobID,Comment"
# sinfo -N -h -o SINFO_NODES_FORMAT: node | long state (with flag suffixes) | partition | reason
SINFO_NODES_FORMAT = "%N|%T|%P|%E"
# stderr of squeue/scontrol/sacct for a job id slurmctld no longer (or never) knew.
INVALID_JOB_ID = "Invalid job id specified"

_JOB_ID = re.compile(r"\d+(?:_\d+|_\[[^\]]*\])?(?:\+\d+)?")


class SlurmParseError(XlatuneError, ValueError):
    """Slurm printed something this parser does not understand; the message quotes it."""


def _clip(text: str, n: int = 120) -> str:
    text = text.strip().replace("\n", "\\n")
    return text if len(text) <= n else cut_at_word(text, n - 1).rstrip() + "…"


# What sbatch/scontrol print while slurmctld is down or restarting: nothing was submitted.
CONTROLLER_DOWN = re.compile(
    r"Unable to contact slurm controller|Socket timed out on send/recv|"
    r"Connection refused|Zero Bytes were transmitted or received"
)


@dataclass(frozen=True)
class JobStatus:
    """One job as a query saw it.

    `exit_code` follows the shell convention: the script's exit code, or 128+N when it was
    killed by signal N (Slurm's `0:15` → 143); None until the job finished, and always None
    from squeue (which cannot print it).
    """

    job_id: str
    state: JobState
    exit_code: int | None
    nodes: str
    reason: str
    name: str = ""


class NodeState(Enum):
    """A node's base state as sinfo -N %T prints it, flag suffixes removed."""

    IDLE = "idle"
    MIXED = "mixed"
    ALLOCATED = "allocated"
    COMPLETING = "completing"
    DRAINING = "draining"
    DRAINED = "drained"
    DOWN = "down"
    FAIL = "fail"
    FAILING = "failing"
    RESERVED = "reserved"
    PLANNED = "planned"
    MAINT = "maint"
    REBOOT = "reboot"
    POWERED_DOWN = "powered_down"
    UNKNOWN = "unknown"

    @property
    def usable(self) -> bool:
        """True when the node takes (or runs) jobs."""
        return self in (
            NodeState.IDLE,
            NodeState.MIXED,
            NodeState.ALLOCATED,
            NodeState.COMPLETING,
            NodeState.RESERVED,
            NodeState.PLANNED,
        )


@dataclass(frozen=True)
class NodeStatus:
    """One node from sinfo -N; `responding` is False for the `*` suffix (slurmd not answering)."""

    name: str
    state: NodeState
    partition: str
    reason: str
    responding: bool
    raw_state: str


# sinfo appends one of these to %T: * not responding, ~ powered off, # powering up, % powering
# down, ! power-down pending, @ reboot pending, ^ reboot issued, - planned, $ maintenance.
_NODE_FLAGS = "*~#%!@^-$+"
_NODE_ALIASES = {
    "alloc": NodeState.ALLOCATED,
    "drng": NodeState.DRAINING,
    "drain": NodeState.DRAINED,
    "comp": NodeState.COMPLETING,
    "mix": NodeState.MIXED,
    "resv": NodeState.RESERVED,
    "plnd": NodeState.PLANNED,
    "unk": NodeState.UNKNOWN,
    "inval": NodeState.UNKNOWN,
    "boot": NodeState.REBOOT,
    "npc": NodeState.UNKNOWN,
    "pow_dn": NodeState.POWERED_DOWN,
    "powered_down": NodeState.POWERED_DOWN,
    "powering_down": NodeState.POWERED_DOWN,
}


def _node_state(raw: str) -> NodeState:
    base = raw.strip().rstrip(_NODE_FLAGS).lower()
    try:
        return NodeState(base)
    except ValueError:
        return _NODE_ALIASES.get(base, NodeState.UNKNOWN)


def _none(value: str) -> str:
    """Slurm's spellings of "nothing" → ""."""
    value = value.strip()
    return "" if value in ("None", "none", "(null)", "None assigned", "n/a") else value


def parse_exit_code(text: str) -> int | None:
    """`3:0` → 3, `0:15` → 143 (signal N → 128+N), `` → None."""
    m = re.fullmatch(r"\s*(\d+)(?::(\d+))?\s*", text)
    if not m:
        return None
    code, sig = int(m.group(1)), int(m.group(2) or 0)
    return 128 + sig if code == 0 and sig else code


def parse_sbatch_parsable(text: str) -> str:
    """Return the job id from `sbatch --parsable` stdout (`123` or `123;cluster`)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    last = lines[-1].split(";", 1)[0] if lines else ""
    if not _JOB_ID.fullmatch(last):
        raise SlurmParseError(f"no job id in sbatch --parsable output: {_clip(text)!r}")
    return last


def parse_submitted_batch_job(text: str) -> str:
    """Return the job id from `Submitted batch job N` (sbatch without --parsable, submit.sh)."""
    ids: list[str] = re.findall(r"Submitted batch job (\d+)", text)
    if not ids:
        raise SlurmParseError(f"no 'Submitted batch job N' line in: {_clip(text[-400:])!r}")
    return ids[-1]


def parse_squeue(text: str) -> dict[str, JobStatus]:
    """Parse `squeue -h -o SQUEUE_FORMAT` lines into {job_id: JobStatus} (exit_code None)."""
    jobs: dict[str, JobStatus] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", 4)
        if len(parts) != 5 or not _JOB_ID.fullmatch(parts[0].strip()):
            raise SlurmParseError(f"unexpected squeue line (want {SQUEUE_FORMAT!r}): {_clip(line)!r}")
        job_id, state, reason, nodes, name = parts
        jobs[job_id.strip()] = JobStatus(job_id.strip(), JobState.parse(state), None, _none(nodes), _none(reason), name)
    return jobs


def parse_marks(text: str) -> dict[str, list[str]]:
    """Parse `job id|comment` lines (squeue MARKS_FORMAT, sacct MARKS_FIELDS) into {comment:
    [job ids]}; jobs without a comment (`(null)`, empty) and job steps are left out."""
    marks: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        job_id, sep, comment = line.partition("|")
        job_id, comment = job_id.strip(), comment.strip()
        if not sep or not _JOB_ID.fullmatch(job_id):
            if "." in job_id and _JOB_ID.fullmatch(job_id.split(".", 1)[0]):
                continue  # a step (12.batch): its job's line carries the comment
            raise SlurmParseError(f"unexpected line (want {MARKS_FORMAT!r}): {_clip(line)!r}")
        if comment and comment != "(null)":
            marks.setdefault(comment, [])
            if job_id not in marks[comment]:
                marks[comment].append(job_id)
    return marks


def parse_sacct(text: str) -> dict[str, JobStatus]:
    """Parse `sacct --parsable2 --noheader -o SACCT_FIELDS` into {job_id: JobStatus}; steps skipped."""
    jobs: dict[str, JobStatus] = {}
    batch_codes: dict[str, int | None] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != 4:
            raise SlurmParseError(f"unexpected sacct line (want {SACCT_FIELDS}): {_clip(line)!r}")
        job_id, state, exit_code, nodes = (p.strip() for p in parts)
        if "." in job_id:  # 12.batch, 12.extern, 12.0: steps of job 12
            if job_id.endswith(".batch"):
                batch_codes[job_id[: -len(".batch")]] = parse_exit_code(exit_code)
            continue
        st = JobState.parse(state)
        jobs[job_id] = JobStatus(job_id, st, parse_exit_code(exit_code) if st.finished else None, _none(nodes), "")
    # sacct gives a cancelled or timed-out job `0:0` and its batch step `0:15`; take the step's
    # code so sacct agrees with scontrol (ExitCode=0:15 → 143).
    for job_id, status in jobs.items():
        step = batch_codes.get(job_id)
        if status.exit_code == 0 and status.state is not JobState.COMPLETED and step:
            if status.state in _SIGNALLED_BY_SLURM and step in _SIGNALS_MOD_128:
                # The batch shell outlived its killed child and exited 128 + the signal, which
                # slurmdbd stores modulo 128 (`15:0`, not `0:15`): seen under load in CI.
                step += 128
            jobs[job_id] = dataclasses.replace(status, exit_code=step)
    return jobs


# States in which Slurm sent the job a signal itself, and the signals it sends (SIGTERM, SIGKILL).
_SIGNALLED_BY_SLURM = frozenset({JobState.CANCELLED, JobState.TIMEOUT, JobState.PREEMPTED, JobState.DEADLINE})
_SIGNALS_MOD_128 = frozenset({15, 9})


# A key starts a line or follows whitespace; values run to the next key, so a value may hold
# spaces ("Reason=ReqNodeNotAvail, UnavailableNodes:node01") and be empty ("NodeList= Sched…").
_SCONTROL_KEY = re.compile(r"(?:(?<=\s)|^)([A-Za-z][\w:/.]*)=", re.M)


def _scontrol_fields(record: str) -> dict[str, str]:
    keys = list(_SCONTROL_KEY.finditer(record))
    fields: dict[str, str] = {}
    for m, nxt in zip(keys, [*keys[1:], None], strict=True):
        fields.setdefault(m.group(1), record[m.end() : nxt.start() if nxt else len(record)].strip())
    return fields


def parse_scontrol_show_jobs(text: str) -> dict[str, JobStatus]:
    """Parse `scontrol [-o] show job [ID]` (one or many records) into {job_id: JobStatus}."""
    jobs: dict[str, JobStatus] = {}
    bounds = [m.start() for m in re.finditer(r"^\s*JobId=", text, re.M)] + [len(text)]
    for a, b in itertools.pairwise(bounds):
        f = _scontrol_fields(text[a:b])
        if "JobState" not in f:
            raise SlurmParseError(f"scontrol record without JobState: {_clip(text[a:b])!r}")
        job_id = f["JobId"]
        if f.get("ArrayTaskId") and f.get("ArrayJobId"):
            job_id = f"{f['ArrayJobId']}_{f['ArrayTaskId']}"
        st = JobState.parse(f["JobState"])
        code = parse_exit_code(f.get("ExitCode", "")) if st.finished else None
        # scontrol prints spaces in Reason as "_" (squeue %r keeps them); left as printed.
        jobs[job_id] = JobStatus(
            job_id, st, code, _none(f.get("NodeList", "")), _none(f.get("Reason", "")), f.get("JobName", "")
        )
    return jobs


def parse_scontrol_show_job(text: str) -> JobStatus:
    """Parse `scontrol show job ID` (exactly one record) into a JobStatus."""
    jobs = parse_scontrol_show_jobs(text)
    if len(jobs) != 1:
        raise SlurmParseError(f"expected one job record, found {len(jobs)}: {_clip(text)!r}")
    return next(iter(jobs.values()))


def parse_sinfo_nodes(text: str) -> dict[str, NodeStatus]:
    """Parse `sinfo -N -h -o SINFO_NODES_FORMAT` into {node: NodeStatus} (first partition wins)."""
    nodes: dict[str, NodeStatus] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", 3)
        if len(parts) != 4:
            raise SlurmParseError(f"unexpected sinfo line (want {SINFO_NODES_FORMAT!r}): {_clip(line)!r}")
        name, raw, partition, reason = (p.strip() for p in parts)
        nodes.setdefault(
            name, NodeStatus(name, _node_state(raw), partition.rstrip("*"), _none(reason), "*" not in raw, raw)
        )
    return nodes


def parse_hostnames(text: str) -> list[str]:
    """Parse `scontrol show hostnames LIST` (one name per line) into a list, order kept."""
    return [ln.strip() for ln in text.splitlines() if ln.strip()]
