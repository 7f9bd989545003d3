"""Failure signatures of MaxText, RCCL, XLA and Slurm log lines, as one ordered table (pure data)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from ..results import FailureClass  # noqa: F401  (defined with Verdict, read here)
from .lines import is_noise


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
    streamed: bool = True  # kept from anywhere in the log (StepLog.evidence), not only the tail


def _sig(failure: FailureClass, label: str, pattern: str, tier: Tier = Tier.FATAL,
         when: When = When.ANY, streamed: bool = True) -> Signature:
    return Signature(failure, label, re.compile(pattern), tier, when, streamed)


F = FailureClass
# RCCL/NCCL errors, as opposed to warnings. NCCL prints `host:pid:tid [dev] file.cc:line NCCL WARN`.
_NCCL_ERROR = (r"[NR]CCL WARN\b.*\b[Tt]ime(?:d )?out|Timeout waiting for|\bnccl(?:System|Remote|Internal"
               r"|UnhandledCuda|InvalidUsage|InvalidArgument)Error\b|\bNCCL error\b"
               r"|\bnccl[A-Z]\w*(?:\([^)]*\))? failed\b|Watchdog caught collective operation timeout")
_IB_COMPLETION = r"NET/IB ?: Got completion from peer"
# A Python exception line: `ValueError: ...`, `jaxlib.xla_extension.XlaRuntimeError: ...`, at the
# start of the line or right after a log prefix (srun `0: `, absl `…] `, Ray `(Actor pid=1) `,
# `[1784] `, mpirun `<stderr>:`); a name mid-sentence (`retrying after TransientError`) is not one.
# SystemExit / KeyboardInterrupt follow a cancel: not here.
EXCEPTION_LINE = (r"(?:^\s*(?:\d+:\s*)?|[\]\)>]:?\s*)"
                  r"(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Failure))(?::\s.*|:)?$")

# First match on a line wins, so the specific patterns come before the generic ones.
SIGNATURES: tuple[Signature, ...] = (
    _sig(F.UNKNOWN_FLAG, "unknown-flag",
         r"Unknown flags?(?: in XLA_FLAGS)?:\s*(?P<flag>[-\u2013\u2014]{1,2}[A-Za-z_][\w.-]*)"),
    # Before OOM: XLA says `RESOURCE_EXHAUSTED: ... No space left on device` when an HLO dump
    # or a checkpoint fills the disk; that is no memory problem and never an OOM.
    _sig(F.DISK_FULL, "disk-full", r"No space left on device|Disk quota exceeded|\bENOSPC\b"
         r"|\bEDQUOT\b|Input/output error|\[Errno (?:5|28|122)\]"),
    # The kernel's and Slurm's words (`Detected 1 oom-kill event(s)`, newer `2 oom_kill events`, srun's
    # `task 0: Out Of Memory`).
    _sig(F.OOM, "oom-host", r"\boom[-_]kill\b|\boom_kill_process\b|Out of memory: Killed process"
         r"|Memory cgroup out of memory|\btasks? [\d,-]+: Out Of Memory\b|\bOOM Killed\b"),
    # Also the BFC allocator's `ran out of memory` (its benign retry variant is noise, below).
    _sig(F.OOM, "oom-gpu", r"RESOURCE_EXHAUSTED|\b[Oo]ut of memory\b|\bOUT_OF_MEMORY\b"
         r"|\bResourceExhausted|hipErrorOutOfMemory"),
    _sig(F.COORDINATION_TIMEOUT, "coordination-timeout",
         r"DEADLINE_EXCEEDED\b.*(?:\b(?:GetKeyValue\(\)|Barrier|[Tt]ask) timed out|[Dd]eadline [Ee]xceeded)"),
    _sig(F.HEARTBEAT_TIMEOUT, "heartbeat-timeout",
         r"stopped sending heartbeats|The tasks have crashed|tasks are unhealthy|\bheartbeat timeout\b"),
    _sig(F.GPU_RUNTIME_ERROR, "gpu-runtime-error",
         r"(?P<code>HSA_STATUS_ERROR\w*)|rocdevice\.cpp\b.*\b[Aa]bort|(?P<cuda>CUDA_ERROR_(?:ILLEGAL_ADDRESS"
         r"|LAUNCH_FAILED|ECC_UNCORRECTABLE|HARDWARE_STACK_ERROR|ILLEGAL_INSTRUCTION))"
         r"|an illegal memory access was encountered|\bhipErrorIllegalAddress\b|GPU Hang\b"
         r"|Memory access fault by GPU node|unspecified launch failure"
         # CUDA's cudaErrorECCUncorrectable text; the kernel's Xid report (a job log holds dmesg in
         # maxtext-slurm's post-mortem) and the GPU dropping off PCIe.
         r"|\buncorrectable ECC error\b|NVRM: Xid \(|\bfallen off the bus\b"),
    # AMD's ionic RDMA driver; NCCL's own `NET/IB : Got completion from peer … with error` stays an
    # NCCL error (the collective fails; tests/data/triage/nccl_timeout.log).
    _sig(F.NIC_FAULT, "nic-fault", r"ionic_comp_msn\b.*\bcqe with error"),
    _sig(F.NODE_FAIL, "slurm-node-failure", r"\b[a-z]*(?:run|alloc|batch): error: Node failure on (?P<host>[^\s:]+)"
         r"|\*\*\* (?:JOB|STEP) \S+ (?:ON (?P<on>\S+) )?CANCELLED AT \S+ DUE TO NODE FAIL"),
    # The assembler's exit or the fusion it failed on is the evidence, "Failed to compile" or not.
    _sig(F.XLA_COMPILE_FAIL, "xla-compile-fail", r"Failed to compile\b|XLA compilation failed"
         r"|\bptxas exited with non-zero error code\b|\bptxas (?:fatal|error)\s*:|\bptxas returned an error\b"
         r"|Failure occurr?ed when "
         r"compiling fusion|LLVM (?:Fatal Error|ERROR)\b|Error during compilation of ptx"
         r"|CUDA_ERROR_INVALID_PTX|\bld\.lld: error\b|\bHIP compil\w* fail|\bnvlink (?:fatal|error)\s*:"
         r"|\bnvlink exited with non-zero error code\b"),
    # RCCL sets up its communicators at the first collective, i.e. before step 0 completes.
    _sig(F.RCCL_INIT_FLAKE, "rccl-init-flake", _NCCL_ERROR, when=When.BEFORE_STEPS),
    _sig(F.NCCL_TIMEOUT, "nccl-timeout", _NCCL_ERROR, when=When.DURING_STEPS),
    _sig(F.RCCL_INIT_FLAKE, "rccl-init-flake", _IB_COMPLETION, Tier.WEAK, When.BEFORE_STEPS),
    _sig(F.NCCL_TIMEOUT, "nccl-timeout", _IB_COMPLETION, Tier.WEAK, When.DURING_STEPS),
    # Other NCCL WARN lines are hints from the tail only: RCCL prints dozens of them at init.
    _sig(F.RCCL_INIT_FLAKE, "rccl-init-flake", r"[NR]CCL WARN", Tier.WEAK, When.BEFORE_STEPS, streamed=False),
    _sig(F.NCCL_TIMEOUT, "nccl-timeout", r"[NR]CCL WARN", Tier.WEAK, When.DURING_STEPS, streamed=False),
    # Infrastructure failures without a class of their own: named by the label. maxtext-slurm's own
    # stage lines end the job within a few lines, so the tail holds them (not streamed).
    _sig(F.UNKNOWN, "container-pull-fail",
         r"\[ERROR\] (?:Pull failed for|Authenticated pull failed|Login to .* failed)", streamed=False),
    _sig(F.UNKNOWN, "container-load-fail", r"\[ERROR\] Unable to determine image name", streamed=False),
    _sig(F.UNKNOWN, "no-gpu", r"WARNING: No GPU devices detected", streamed=False),
    _sig(F.UNKNOWN, "nccl-nic-fail", r"Failed to auto-detect NCCL_SOCKET_IFNAME", streamed=False),
    _sig(F.UNKNOWN, "port-fail", r"FATAL: Could not find a free port", streamed=False),
    _sig(F.UNKNOWN, "model-not-found", r"!!! (?:Unknown model:|Model name resolution failed)", streamed=False),
    _sig(F.UNKNOWN, "patch-branch-fail", r"\[FAIL\] Failed to check out|RPC failed; HTTP 5\d\d"
         r"|remote: Internal Server Error", streamed=False),
    _sig(F.UNKNOWN, "stage-timeout", r"== (?:Preflight|Docker pull|ECC check) TIMEOUT", streamed=False),
    _sig(F.UNKNOWN, "checkpoint-fs-error", r"Training stopped: Checkpointing failed", streamed=False),
    _sig(F.PYTHON_EXCEPTION, "python-exception-line", EXCEPTION_LINE),
    _sig(F.PYTHON_EXCEPTION, "python-exception", r"Traceback \(most recent call last\):", Tier.WEAK,
         streamed=False),  # its exception line is streamed
    # XLA announces a collective stuck at a rendezvous long before any time limit.
    _sig(F.HANG, "rendezvous-stuck", r"This thread has been waiting for .* and may be stuck"
         r"|Termination timeout for .* exceeded", Tier.WEAK),
    _sig(F.HEARTBEAT_TIMEOUT, "coordination-death", r"Terminating process because the JAX distributed "
         r"service detected fatal errors|Polled (?:an )?error from coordination service", Tier.WEAK),
    _sig(F.HANG, "slurm-time-limit", r"CANCELLED AT \S+ DUE TO TIME LIMIT", Tier.WEAK),
    _sig(F.CANCELLED, "slurm-cancelled", r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+ (?:DUE TO "
         r"PREEMPTION )?\*\*\*", Tier.WEAK),
    _sig(F.NODE_FAIL, "node-fail", r"NODE_EXIT host=(?P<host>\S+) exit=(?!130\b)(?P<code>-?[1-9]\d*)\b",
         Tier.WEAK, streamed=False),
    _sig(F.UNKNOWN, "signal-kill", r"Training subprocess killed by", Tier.WEAK, streamed=False),
    _sig(F.HANG, "train-timeout", r"== Train(?:ing)? TIMEOUT", Tier.WEAK, streamed=False),
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


# Byte needles for StepLog: every streamed signature's lines hold one of these or of logs.OOM_NEEDLES
# (tests/unit/test_logs_real.py).
EVIDENCE_NEEDLES: tuple[bytes, ...] = (
    # None occurs in a known-noise line, so noise costs no per-line work; each needle is one
    # memmem pass per block, so there are as few as the streamed signatures allow (StepLog also
    # passes every OOM-needle line through them). Other signatures' lines reach triage by the tail.
    b"Error", b"Exception:", b"imeout", b"imed out", b"DEADLINE_EXCEEDED", b"eartbeat",
    b"have crashed", b"coordination service", b"HSA_STATUS_ERROR", b"CUDA_ERROR_", b"cqe with",
    b"Node failure", b"ptxas", b"Failed to compile", b"compiling fusion", b"LLVM",
    b"completion from peer", b"may be stuck", b"CANCELLED AT", b"Unknown flag",
    b") failed", b"NCCL error", b"access fault", b"illegal memory", b"ECC error", b"NVRM: ",
    b"oom", b"Out Of Memory",  # `oom-kill`, `oom_kill`: one needle, one pass
)


# A traceback frame's source line (`raise RuntimeError(f"NCCL error: {e}")`) quotes code, not a failure.
_SOURCE_RE = re.compile(r"\braise [A-Za-z_][\w.]*\(")


def is_evidence(line: str) -> Signature | None:
    """The streamed signature a line matches (None for none or a harmless line)."""
    if harmless(line) or _SOURCE_RE.search(line):
        return None
    return next((sig for sig in SIGNATURES if sig.streamed and sig.pattern.search(line)), None)


def match_line(line: str, *, steps_done: bool, after_step: bool) -> tuple[Signature, re.Match[str]] | None:
    """The first signature a (noise-free) line matches where it sits in the job, if any."""
    if _SOURCE_RE.search(line):
        return None
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
