"""Failure signatures of MaxText, RCCL, XLA and Slurm log lines, as one ordered table (pure data)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from .logs import is_noise


class FailureClass(Enum):
    """Why a job ended as it did: job-log-triage's classes, at the grain the playbook acts on."""

    SUCCESS = "success"
    SOFT_SUCCESS = "soft_success"  # FAILED / exit 143 with `completed step: T-1`: data intact
    OOM = "oom"
    DISK_FULL = "disk_full"  # no space, quota, I/O error: the next job fails the same way
    UNKNOWN_FLAG = "unknown_flag"
    RCCL_INIT_FLAKE = "rccl_init_flake"
    COORDINATION_TIMEOUT = "coordination_timeout"
    HEARTBEAT_TIMEOUT = "heartbeat_timeout"
    NCCL_TIMEOUT = "nccl_timeout"
    XLA_COMPILE_FAIL = "xla_compile_fail"
    PYTHON_EXCEPTION = "python_exception"
    NODE_FAIL = "node_fail"
    GPU_RUNTIME_ERROR = "gpu_runtime_error"
    NIC_FAULT = "nic_fault"
    HANG = "hang"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"
    # Seen by the poller or sinfo, never in a job's log; members so that the playbook is one table.
    NODE_DOWN = "node_down"
    CONTROLLER_UNREACHABLE = "controller_unreachable"


class Tier(Enum):
    """How much a matching line says about the root cause."""

    FATAL = "fatal"  # the earliest fatal line is the root cause (job-log-triage "Multi-failure jobs")
    WEAK = "weak"  # a consequence or a hint (traceback header, NODE_EXIT): only when nothing is fatal


class When(Enum):
    """Where in the job a line must sit for its signature to count."""

    ANY = "any"
    BEFORE_STEPS = "before_steps"  # the job never completed a step
    DURING_STEPS = "during_steps"  # a step had completed before the line


@dataclass(frozen=True)
class Signature:
    """One recognisable line: its class, job-log-triage's finer label, and when it counts."""

    failure: FailureClass
    label: str
    pattern: re.Pattern[str]
    tier: Tier = Tier.FATAL
    when: When = When.ANY


def _sig(failure: FailureClass, label: str, pattern: str, tier: Tier = Tier.FATAL,
         when: When = When.ANY) -> Signature:
    return Signature(failure, label, re.compile(pattern), tier, when)


F = FailureClass
# RCCL/NCCL errors, as opposed to warnings. NCCL prints `host:pid:tid [dev] file.cc:line NCCL WARN`.
_NCCL_ERROR = (r"NCCL WARN\b.*\b[Tt]ime(?:d )?out|Timeout waiting for|\bnccl(?:System|Remote|Internal)"
               r"Error\b|\bNCCL error\b")

# First match on a line wins, so the specific patterns come before the generic ones.
SIGNATURES: tuple[Signature, ...] = (
    _sig(F.UNKNOWN_FLAG, "unknown-flag",
         r"Unknown flags?(?: in XLA_FLAGS)?:\s*(?P<flag>-{1,2}[A-Za-z_][\w.-]*)"),
    # Before OOM: XLA says `RESOURCE_EXHAUSTED: ... No space left on device` when an HLO dump
    # or a checkpoint fills the disk; that is no memory problem and never an OOM.
    _sig(F.DISK_FULL, "disk-full", r"No space left on device|Disk quota exceeded|\bENOSPC\b"
         r"|\bEDQUOT\b|Input/output error|\[Errno (?:5|28|122)\]"),
    _sig(F.OOM, "oom-host", r"\boom-kill\b|\boom_kill_process\b|Out of memory: Killed process"
         r"|Memory cgroup out of memory"),
    # Also the BFC allocator's `ran out of memory` (its benign retry variant is noise, below).
    _sig(F.OOM, "oom-gpu", r"RESOURCE_EXHAUSTED|\b[Oo]ut of memory\b|\bOUT_OF_MEMORY\b"
         r"|\bResourceExhausted|hipErrorOutOfMemory"),
    _sig(F.COORDINATION_TIMEOUT, "coordination-timeout",
         r"DEADLINE_EXCEEDED\b.*\b(?:GetKeyValue\(\)|Barrier) timed out"),
    _sig(F.HEARTBEAT_TIMEOUT, "heartbeat-timeout",
         r"stopped sending heartbeats|The tasks have crashed|tasks are unhealthy"),
    _sig(F.GPU_RUNTIME_ERROR, "gpu-runtime-error",
         r"(?P<code>HSA_STATUS_ERROR\w*)|rocdevice\.cpp\b.*\b[Aa]bort"),
    _sig(F.NIC_FAULT, "nic-fault", r"ionic_comp_msn\b.*\bcqe with error"),
    _sig(F.NODE_FAIL, "slurm-node-failure", r"srun: error: Node failure on (?P<host>[^\s:]+)"),
    _sig(F.XLA_COMPILE_FAIL, "xla-compile-fail", r"Failed to compile\b|XLA compilation failed"),
    # RCCL sets up its communicators at the first collective, i.e. before step 0 completes.
    _sig(F.RCCL_INIT_FLAKE, "rccl-init-flake", _NCCL_ERROR, when=When.BEFORE_STEPS),
    _sig(F.NCCL_TIMEOUT, "nccl-timeout", _NCCL_ERROR, when=When.DURING_STEPS),
    _sig(F.RCCL_INIT_FLAKE, "rccl-init-flake", r"NCCL WARN", Tier.WEAK, When.BEFORE_STEPS),
    _sig(F.NCCL_TIMEOUT, "nccl-timeout", r"NCCL WARN", Tier.WEAK, When.DURING_STEPS),
    # Infrastructure failures without a class of their own: named by the label.
    _sig(F.UNKNOWN, "container-pull-fail",
         r"\[ERROR\] (?:Pull failed for|Authenticated pull failed|Login to .* failed)"),
    _sig(F.UNKNOWN, "container-load-fail", r"\[ERROR\] Unable to determine image name"),
    _sig(F.UNKNOWN, "no-gpu", r"WARNING: No GPU devices detected"),
    _sig(F.UNKNOWN, "nccl-nic-fail", r"Failed to auto-detect NCCL_SOCKET_IFNAME"),
    _sig(F.UNKNOWN, "port-fail", r"FATAL: Could not find a free port"),
    _sig(F.UNKNOWN, "model-not-found", r"!!! (?:Unknown model:|Model name resolution failed)"),
    _sig(F.UNKNOWN, "patch-branch-fail", r"\[FAIL\] Failed to check out|RPC failed; HTTP 5\d\d"
         r"|remote: Internal Server Error"),
    _sig(F.UNKNOWN, "stage-timeout", r"== (?:Preflight|Docker pull|ECC check) TIMEOUT"),
    _sig(F.UNKNOWN, "checkpoint-fs-error", r"Training stopped: Checkpointing failed"),
    _sig(F.PYTHON_EXCEPTION, "python-exception", r"Traceback \(most recent call last\):", Tier.WEAK),
    _sig(F.NODE_FAIL, "node-fail", r"NODE_EXIT host=(?P<host>\S+) exit=(?!130\b)(?P<code>-?[1-9]\d*)\b",
         Tier.WEAK),
    _sig(F.UNKNOWN, "signal-kill", r"Training subprocess killed by", Tier.WEAK),
    _sig(F.HANG, "train-timeout", r"== Train(?:ing)? TIMEOUT", Tier.WEAK),
)

# Alarming lines the skills call harmless that logs.KNOWN_NOISE does not already drop.
EXTRA_NOISE: tuple[str, ...] = (
    # The BFC allocator retries after this warning; it is not the OOM that kills a job.
    r"The caller indicates that this is not a failure",
    r"\[exec\] docker exec failed .*falling back to host-level kill",
    r"srun: (?:launch/slurm: _step_signal: )?Terminating StepId=",
)
_EXTRA_NOISE_RE = re.compile("|".join(EXTRA_NOISE))


def harmless(line: str) -> bool:
    """Say whether a line is a known false positive (both skills' lists)."""
    return is_noise(line) or _EXTRA_NOISE_RE.search(line) is not None


def match_line(line: str, *, steps_done: bool, after_step: bool) -> tuple[Signature, re.Match[str]] | None:
    """The first signature a (noise-free) line matches where it sits in the job, if any."""
    for sig in SIGNATURES:
        if sig.when is When.BEFORE_STEPS and steps_done:
            continue  # training got past RCCL init: its warnings were survived
        if sig.when is When.DURING_STEPS and not after_step:
            continue
        m = sig.pattern.search(line)
        if m is not None:
            return sig, m
    return None


def disk_full(text: str) -> bool:
    """Whether an error message says the disk is full or failing (a refused write, submission)."""
    return any(sig.failure is FailureClass.DISK_FULL and sig.pattern.search(text) for sig in SIGNATURES)
