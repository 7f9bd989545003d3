"""Build argv lists for the Slurm CLIs; pure, and every value is checked against a strict grammar."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..cell.grammar import NODELIST, SLURM_TIME, SLURM_TIME_FORMS
from .parsers import MARKS_FIELDS, MARKS_FORMAT, SACCT_FIELDS, SINFO_NODES_FORMAT, SQUEUE_FORMAT

__all__ = [
    "SUBMISSION_MARK",
    "sacct",
    "sacct_marks",
    "sbatch",
    "scancel",
    "scontrol_show_hostnames",
    "scontrol_show_job",
    "scontrol_show_jobs",
    "scontrol_update_node",
    "sinfo_nodes",
    "squeue",
    "squeue_marks",
    "submission_mark",
    "validate_job_id",
    "validate_nodelist",
]

# 123, 123_4 (array task), 123+1 (het component)
_JOB_ID = re.compile(r"[0-9]+(?:_[0-9]+)?(?:\+[0-9]+)?")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+@%=,\-]*")  # job/partition names, no spaces
_NODE_STATES = ("RESUME", "DRAIN", "DOWN", "UNDRAIN", "IDLE")
# The mark a submission carries in Slurm's job comment (`--comment`), written to the store before
# sbatch runs: a rerun after a kill between the two finds the job by it (and only its own jobs).
SUBMISSION_MARK = re.compile(r"xlatune-[0-9a-f]{16}")


def validate_job_id(job_id: str | int) -> str:
    """Return the id as text, or raise ValueError unless it is N, N_M or N+M."""
    text = str(job_id)
    if not _JOB_ID.fullmatch(text):
        raise ValueError(f"invalid Slurm job id {text!r} (want digits, optionally _N or +N)")
    return text


def validate_nodelist(nodelist: str) -> str:
    """Return a hostlist expression like `node[01-04]`, or raise ValueError."""
    if not NODELIST.matches(nodelist):
        raise ValueError(f"invalid Slurm node list {nodelist!r}")
    return nodelist


def _job_ids(job_ids: Iterable[str | int]) -> list[str]:
    ids = list(dict.fromkeys(validate_job_id(j) for j in job_ids))
    if not ids:
        raise ValueError("no job ids given")
    return ids


def _name(kind: str, value: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError(f"invalid {kind} {value!r} (letters, digits and ._:+@%=,- only)")
    return value


def _path(kind: str, value: str) -> str:
    # sbatch expands %j etc. itself; a newline or NUL would corrupt the #SBATCH-equivalent option
    if not value or any(c in value for c in "\n\r\0"):
        raise ValueError(f"invalid {kind} path {value!r}")
    return value


def sbatch(
    script: str | None = None,
    *,
    script_args: Sequence[str] = (),
    wrap: str | None = None,
    job_name: str | None = None,
    partition: str | None = None,
    nodes: int | None = None,
    nodelist: str | None = None,
    exclude: str | None = None,
    time_limit: str | None = None,
    output: str | None = None,
    error: str | None = None,
    chdir: str | None = None,
    exclusive: bool = False,
    requeue: bool | None = None,
    export: str | None = None,
    comment: str | None = None,
    extra: Sequence[str] = (),
    parsable: bool = True,
) -> list[str]:
    """Build `sbatch [options] SCRIPT [ARGS]` (or `--wrap CMD`); parse stdout with parse_sbatch_parsable.

    `requeue=False` adds --no-requeue: by default Slurm requeues a batch job whose node dies
    (it goes RUNNING → PENDING, Restarts=1) instead of ending in NODE_FAIL.
    """
    if (script is None) == (wrap is None):
        raise ValueError("give exactly one of script or wrap")
    argv = ["sbatch"]
    if parsable:
        argv.append("--parsable")
    if job_name is not None:
        argv.append(f"--job-name={_name('job name', job_name)}")
    if partition is not None:
        argv.append(f"--partition={_name('partition', partition)}")
    if nodes is not None:
        if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
            raise ValueError(f"invalid node count {nodes!r}")
        argv.append(f"--nodes={nodes}")
    if nodelist is not None:
        argv.append(f"--nodelist={validate_nodelist(nodelist)}")
    if exclude is not None:
        argv.append(f"--exclude={validate_nodelist(exclude)}")
    if time_limit is not None:
        if not SLURM_TIME.matches(time_limit):
            raise ValueError(f"invalid time limit {time_limit!r} (want {SLURM_TIME_FORMS})")
        argv.append(f"--time={time_limit}")
    for flag, value in (("--output", output), ("--error", error), ("--chdir", chdir)):
        if value is not None:
            argv.append(f"{flag}={_path(flag[2:], value)}")
    if exclusive:
        argv.append("--exclusive")
    if requeue is not None:
        argv.append("--requeue" if requeue else "--no-requeue")
    if export is not None:
        argv.append(f"--export={_path('export', export)}")
    if comment is not None:
        argv.append(f"--comment={submission_mark(comment)}")
    for arg in extra:
        if not arg.startswith("-") or any(c in arg for c in "\n\r\0"):
            raise ValueError(f"extra sbatch arguments must be options: {arg!r}")
        argv.append(arg)
    if wrap is not None:
        return [*argv, f"--wrap={wrap}"]
    assert script is not None
    return [*argv, _path("script", script), *script_args]


def squeue(job_ids: Iterable[str | int]) -> list[str]:
    """Build ONE `squeue` call for many jobs, finished ones included; parse with parse_squeue.

    Slurm 22.05 quirks this works around: without --states=all a finished job is not listed even
    when asked for by id; and with a single unknown id squeue exits 1 (`Invalid job id
    specified`) while a list with unknown ids exits 0 and lists the known ones — so a single id
    is passed twice.
    """
    ids = _job_ids(job_ids)
    if len(ids) == 1:
        ids = ids * 2
    return ["squeue", "--noheader", "--states=all", f"--jobs={','.join(ids)}", f"--format={SQUEUE_FORMAT}"]


def submission_mark(mark: str) -> str:
    """Return the mark, or raise ValueError unless it is `xlatune-` and 16 hex digits."""
    if not SUBMISSION_MARK.fullmatch(mark):
        raise ValueError(f"invalid submission mark {mark!r} (want xlatune- and 16 hex digits)")
    return mark


def squeue_marks() -> list[str]:
    """Build `squeue` listing every job slurmctld knows (finished ones for MinJobAge) with its
    comment; parse with parse_marks."""
    return ["squeue", "--noheader", "--states=all", f"--format={MARKS_FORMAT}"]


def sacct_marks(since: str) -> list[str]:
    """Build `sacct` of the jobs since a time (`YYYY-MM-DDTHH:MM:SS`) with their comments (stored
    when slurmdbd has AccountingStoreFlags=job_comment); parse with parse_marks."""
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", since):
        raise ValueError(f"invalid sacct start time {since!r} (want YYYY-MM-DDTHH:MM:SS)")
    return [
        "sacct",
        "--parsable2",
        "--noheader",
        "--allocations",
        "--allusers",
        f"--starttime={since}",
        f"--format={MARKS_FIELDS}",
    ]


def sacct(job_ids: Iterable[str | int]) -> list[str]:
    """Build `sacct` for many jobs (needs accounting storage); parse with parse_sacct."""
    return ["sacct", "--parsable2", "--noheader", f"--jobs={','.join(_job_ids(job_ids))}", f"--format={SACCT_FIELDS}"]


def scontrol_show_job(job_id: str | int) -> list[str]:
    """Build `scontrol show job ID`; parse with parse_scontrol_show_job (exit 1 once purged)."""
    return ["scontrol", "show", "job", validate_job_id(job_id)]


def scontrol_show_jobs() -> list[str]:
    """Build `scontrol -o show job`: every job slurmctld remembers, with exit codes, one per line."""
    return ["scontrol", "--oneliner", "show", "job"]


def sinfo_nodes(partition: str | None = None, nodelist: str | None = None) -> list[str]:
    """Build `sinfo -N` with one line per node; parse with parse_sinfo_nodes."""
    argv = ["sinfo", "--Node", "--noheader", f"--format={SINFO_NODES_FORMAT}"]
    if partition is not None:
        argv.append(f"--partition={_name('partition', partition)}")
    if nodelist is not None:
        argv.append(f"--nodes={validate_nodelist(nodelist)}")
    return argv


def scontrol_show_hostnames(nodelist: str) -> list[str]:
    """Build `scontrol show hostnames LIST`; parse with parse_hostnames."""
    return ["scontrol", "show", "hostnames", validate_nodelist(nodelist)]


def scontrol_update_node(node: str, state: str, reason: str | None = None) -> list[str]:
    """Build `scontrol update NodeName=N State=S [Reason=R]` (DRAIN and DOWN need a reason).

    RESUME on a node that is not drained/down exits 1 with `Invalid node state specified`.
    """
    if not NODELIST.matches(node):
        raise ValueError(f"invalid node name {node!r}")
    state = state.upper()
    if state not in _NODE_STATES:
        raise ValueError(f"invalid node state {state!r} (one of {', '.join(_NODE_STATES)})")
    if state in ("DRAIN", "DOWN") and not reason:
        raise ValueError(f"State={state} needs a reason")
    argv = ["scontrol", "update", f"NodeName={node}", f"State={state}"]
    if reason:
        if any(c in reason for c in "\n\r\0"):
            raise ValueError(f"invalid reason {reason!r}")
        argv.append(f"Reason={reason}")
    return argv


def scancel(job_id: str | int) -> list[str]:
    """Build `scancel ID` for exactly one job id (never a name, user or pattern).

    Slurm 22.05 exits 0 and prints nothing for an unknown or finished job id.
    """
    return ["scancel", validate_job_id(job_id)]
