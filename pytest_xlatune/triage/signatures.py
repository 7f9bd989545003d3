"""Failure signatures of MaxText, RCCL, XLA and Slurm log lines, as one ordered table (pure data)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from ..results import FailureClass as FailureClass  # defined with Verdict; re-exported for judge/ users
from .lines import is_noise
from .needles import EVIDENCE_NEEDLES as EVIDENCE_NEEDLES  # re-exported: StepLog's and the tests' import


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


def _sig(
    failure: FailureClass,
    label: str,
    pattern: str,
    tier: Tier = Tier.FATAL,
    when: When = When.ANY,
    streamed: bool = True,
) -> Signature:
    return Signature(failure, label, re.compile(pattern), tier, when, streamed)


F = FailureClass
# RCCL/NCCL errors, as opposed to warnings. NCCL prints `host:pid:tid [dev] file.cc:line NCCL WARN`;
# `NCCL WARN Cuda failure 'initialization error'` (RCCL's hipified build says `Cuda` too) is a failed
# runtime call NCCL returns as an error (the `init.cc:872 -> 1` trail after it).
_NCCL_ERROR = (
    r"[NR]CCL WARN\b.*\b[Tt]ime(?:d )?out|[NR]CCL WARN (?:Cuda|HIP) failure|Timeout waiting for"
    r"|\bnccl(?:System|Remote|Internal"
    r"|UnhandledCuda|InvalidUsage|InvalidArgument)Error\b|\bNCCL error\b"
    r"|\bnccl[A-Z]\w*(?:\([^)]*\))? failed\b|Watchdog caught collective operation timeout"
)
_IB_COMPLETION = r"NET/IB ?: Got completion from peer"
# NCCL's IB async-event line up to the event's name (ibv_event_type_str), with the `mlx5_0:1 ` device
# and port newer NCCL prints.
_NIC_ASYNC = r"\bNET/IB ?: (?:[\w.-]+:\d+ )?(?:Got async (?:error )?event ?: ?|async fatal event: )"
# srun's, bash's and Python's faulthandler's words for SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE.
_SIGNALS = r"Segmentation fault|Bus error|Aborted|Illegal instruction|Floating point exception"
# A Python exception line: `ValueError: ...`, `jaxlib.xla_extension.XlaRuntimeError: ...`, at the
# start of the line or right after a log prefix (srun `0: `, absl `…] `, Ray `(Actor pid=1) `,
# `[1784] `, mpirun `<stderr>:`); a name mid-sentence (`retrying after TransientError`) is not one.
# SystemExit / KeyboardInterrupt follow a cancel: not here.
EXCEPTION_LINE = (
    r"(?:^\s*(?:\d+:\s*)?|[\]\)>]:?\s*)"
    r"(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Failure))(?::\s.*|:)?$"
)

# The flag a flag parser refused: XLA's `Unknown flags in XLA_FLAGS: --xla_foo`, absl's (libtpu,
# a Pathways proxy) `ERROR: Unknown command line flag 'xla_foo'`, and a value tsl's parser cannot
# read (`Couldn't interpret value notanint for flag xla_backend_optimization_level.`: XLA_FLAGS
# parsing then fails the process; older TF_XLA_FLAGS kept the default). StepLog reads the flag too.
UNKNOWN_FLAG_RE = re.compile(
    r"Unknown flags?(?: in XLA_FLAGS)?:\s*(?P<flag>[-\u2013\u2014]{1,2}[A-Za-z_][\w.-]*)"
    r"|Unknown command line flag '(?P<quoted>[A-Za-z_][\w.-]*)'"
    r"|Couldn't interpret value (?P<value>.*?) for flag (?P<valued>[A-Za-z_]\w*)"
)


def rejected_flag(match: re.Match[str]) -> str:
    """The flag an UNKNOWN_FLAG_RE match names, without its value: `--xla_foo` (`xla_foo` as absl
    quotes it); a flag whose value could not be read as `--<name>`."""
    if match.group("valued"):
        return f"--{match.group('valued')}"
    return (match.group("flag") or match.group("quoted")).split("=", 1)[0]


# XLA's rendezvous warning withdrawn: `This thread is unstuck waiting for … Warning above was a
# false-positive.` An earlier `may be stuck` line of the job no longer says it hung.
UNSTUCK = r"This thread is unstuck waiting for"
STUCK_RE = re.compile(r"This thread has been waiting for .* and may be stuck")

# Collectives a job completed, as a collective watchdog names them: PyTorch's `WorkNCCL(SeqNum=1580,
# …)` and `last completed NCCL work: 1579` (newer: `last completed work: 2846`). A setup phase runs a
# handful (barriers, parameter broadcasts); PROGRESS_COLLECTIVES of them mean the communicators
# worked and training ran, so a timeout after them is a collective timeout, never an init flake.
COLLECTIVE_PROGRESS_RE = re.compile(r"\bSeqNum=(?P<seq>\d+)|\blast completed (?:NCCL )?work: (?P<done>\d+)")
PROGRESS_COLLECTIVES = 100


def collectives_done(line: str) -> int:
    """How many collectives a line says the job had run (0: it says nothing of the kind)."""
    return max((int(m.group("seq") or m.group("done")) for m in COLLECTIVE_PROGRESS_RE.finditer(line)), default=0)


# First match on a line wins, so the specific patterns come before the generic ones.
SIGNATURES: tuple[Signature, ...] = (
    _sig(F.UNKNOWN_FLAG, "unknown-flag", UNKNOWN_FLAG_RE.pattern),
    # Before OOM: XLA says `RESOURCE_EXHAUSTED: ... No space left on device` when an HLO dump
    # or a checkpoint fills the disk; that is no memory problem and never an OOM.
    # Go tools (docker, enroot) write it in lower case: `write /usr/lib/x.so: no space left on device`.
    _sig(
        F.DISK_FULL,
        "disk-full",
        r"(?i:no space left on device)|Disk quota exceeded|\bENOSPC\b"
        r"|\bEDQUOT\b|Input/output error|\[Errno (?:5|28|122)\]",
    ),
    # The kernel's and Slurm's words (`Detected 1 oom-kill event(s)`, newer `2 oom_kill events`, srun's
    # `task 0: Out Of Memory`, older kernels' `Out of memory: Kill process`, and Slurm's own memory
    # enforcement: `Step 1.0 exceeded memory limit (52917772 > 20971520), being killed`, `srun: Exceeded
    # job memory limit`; its `... at some point` variant is a warning jobs survive).
    _sig(
        F.OOM,
        "oom-host",
        r"\boom[-_]kill\b|\boom_kill_process\b|Out of memory: Kill(?:ed)? process"
        r"|Memory cgroup out of memory|\btasks? [\d,-]+: Out Of Memory\b|\bOOM Killed\b"
        r"|exceeded memory limit \(\d+ > \d+\), being killed|Exceeded (?:job|step) memory limit(?! at some)",
    ),
    # Also the BFC allocator's `ran out of memory` (its benign retry variant is noise, below), and the
    # cuda_async allocator's `gpu_async_0 cuMemAllocAsync failed to allocate N bytes: CUDA_ERROR_OUT_OF_MEMORY`.
    _sig(
        F.OOM,
        "oom-gpu",
        r"RESOURCE_EXHAUSTED|\b[Oo]ut of memory\b|(?:\b|_)OUT_OF_MEMORY\b"
        r"|\bResourceExhausted|hipErrorOutOfMemory|\bcuMemAllocAsync failed to allocate\b",
    ),
    _sig(
        F.COORDINATION_TIMEOUT,
        "coordination-timeout",
        r"DEADLINE_EXCEEDED\b.*(?:\b(?:GetKeyValue\(\)|Barrier|[Tt]ask) timed out|[Dd]eadline [Ee]xceeded)",
    ),
    # gRPC cannot reach the JAX coordinator (wrong address or port, the leader not up, or gone), and a
    # task that re-registered after a restart (the coordinator aborts every task).
    _sig(F.COORDINATION_TIMEOUT, "coordination-unreachable", r"\bUNAVAILABLE: ?failed to connect to all addresses"),
    _sig(
        F.COORDINATION_TIMEOUT, "coordination-restarted", r"unexpectedly tried to connect with a different incarnation"
    ),
    _sig(
        F.HEARTBEAT_TIMEOUT,
        "heartbeat-timeout",
        r"stopped sending heartbeats|The tasks have crashed|tasks are unhealthy|\bheartbeat timeout\b",
    ),
    _sig(
        F.GPU_RUNTIME_ERROR,
        "gpu-runtime-error",
        r"(?P<code>HSA_STATUS_ERROR\w*)|rocdevice\.cpp\b.*\b[Aa]bort|(?P<cuda>CUDA_ERROR_(?:ILLEGAL_ADDRESS"
        r"|LAUNCH_FAILED|ECC_UNCORRECTABLE|HARDWARE_STACK_ERROR|ILLEGAL_INSTRUCTION|MISALIGNED_ADDRESS"
        r"|INVALID_ADDRESS_SPACE|INVALID_PC|ASSERT|SYSTEM_NOT_READY|NVLINK_UNCORRECTABLE)\b)"
        r"|an illegal memory access was encountered|\bhipErrorIllegalAddress\b|GPU Hang\b"
        r"|Memory access fault by GPU node|unspecified launch failure"
        # CUDA's cudaErrorECCUncorrectable text; the kernel's reports (a job log holds dmesg in
        # maxtext-slurm's post-mortem): NVIDIA's Xid, the GPU dropping off PCIe, amdgpu resetting a
        # hung GPU or reporting a RAS error.
        r"|\buncorrectable (?:ECC|hardware|NVLink) error\b|NVRM: Xid \(|\bfallen off the bus\b"
        r"|\bamdgpu: GPU reset begin\b",
    ),
    # No usable GPU: the backend JAX was told to use found none (`XlaRuntimeError: FAILED_PRECONDITION:
    # No visible GPU devices.`, after cuInit failed: a driver not loaded, a kernel/driver mismatch, a
    # GPU fallen off the bus). The fallback warning of a job allowed to run on CPU is no failure.
    _sig(
        F.GPU_RUNTIME_ERROR,
        "gpu-unavailable",
        r"^(?!.*(?:backend failed to initialize|\] Unable to initialize backend)).*\bNo visible GPU devices\b",
    ),
    # cuDNN cannot start on the GPU (`Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR`, then
    # XLA's `DNN library initialization failed`): its memory held by another process, or a driver
    # older than the cuDNN.
    _sig(
        F.GPU_RUNTIME_ERROR,
        "cudnn-init",
        r"\bCould not create cudnn handle: CUDNN_STATUS_\w+|\bDNN library initialization failed\b",
    ),
    # A TPU slice's fault report (tpunetd; the runtime's `*** A program or fatal error occurred`): a bad
    # chip or, rarely, a compiler bug (MaxText's maxtest guide: retry to confirm).
    _sig(
        F.GPU_RUNTIME_ERROR,
        "tpu-device-fault",
        r"\bDetected failure SLICE_FAILURE_\w+|A program or fatal error occurred, all pending programs will fail",
    ),
    # AMD's ionic RDMA driver; NCCL's own `NET/IB : Got completion from peer … with error` stays an
    # NCCL error (the collective fails; tests/data/triage/nccl_timeout.log).
    _sig(F.NIC_FAULT, "nic-fault", r"ionic_comp_msn\b.*\bcqe with error"),
    # The node's own RDMA adapter, as NCCL's (and RCCL's) IB async thread reports the verbs events
    # IBV_EVENT_PORT_ERR and IBV_EVENT_DEVICE_FATAL: `NET/IB : Got async event : port error` (older
    # NCCL), `NET/IB : mlx5_0:1 Got async event : …` (with device:port), and newer NCCL's `… Got async
    # error event: port error` and `… async fatal event: local catastrophic error`. Port active, client
    # reregistration, GID change and the per-connection QP/CQ events (`async fatal event on QP (…)`)
    # are not here.
    _sig(F.NIC_FAULT, "nic-port-down", _NIC_ASYNC + r"port error\b"),
    _sig(F.NIC_FAULT, "nic-adapter-fatal", _NIC_ASYNC + r"local catastrophic error\b"),
    _sig(
        F.NODE_FAIL,
        "slurm-node-failure",
        r"\b[a-z]*(?:run|alloc|batch): error: Node failure on (?P<host>[^\s:]+)"
        r"|\*\*\* (?:JOB|STEP) \S+ (?:ON (?P<on>\S+) )?CANCELLED AT \S+ DUE TO NODE FAIL",
    ),
    # slurmd on a node could not start the step's tasks (`Communication connection failure`, `Socket
    # timed out on send/recv operation`): the node, not the job.
    _sig(F.NODE_FAIL, "slurm-launch-failed", r"\bsrun: error: Task launch for \S+ failed on node (?P<host>[^\s:]+)"),
    # The assembler's exit or the fusion it failed on is the evidence, "Failed to compile" or not.
    # `Mosaic failed to compile TPU kernel`: Pallas kernels' compiler, in lower case.
    _sig(
        F.XLA_COMPILE_FAIL,
        "xla-compile-fail",
        r"[Ff]ailed to compile\b|XLA compilation failed"
        r"|\bptxas exited with non-zero error code\b|\bptxas (?:fatal|error)\s*:|\bptxas returned an error\b"
        r"|Failure occurr?ed when "
        r"compiling fusion|LLVM (?:Fatal Error|ERROR)\b|Error during compilation of ptx"
        r"|\bld\.lld: error\b|\bHIP compil\w* fail|\bnvlink (?:fatal|error)\s*:"
        r"|\bnvlink exited with non-zero error code\b",
    ),
    # XLA aborting on an internal check (absl FATAL: `F0912 11:59:01.941641 741969 shape_tree.cc:54] Check
    # failed: …`): a compiler bug the program or flags trigger. (`Non-OK-status:` is left to its status.)
    _sig(F.XLA_COMPILE_FAIL, "xla-check-failed", r"\bF(?:\d{4} [\d:.]+ +\d+ +| )[\w./-]+:\d+\] Check failed: "),
    # The driver refusing the code built for it (for another GPU, CUDA or ROCm); HIP's AMD_LOG_LEVEL
    # trace `Returned hipErrorNoBinaryForGpu : continue parsing` is no failure.
    _sig(
        F.XLA_COMPILE_FAIL,
        "no-binary-for-gpu",
        r"CUDA_ERROR_(?:INVALID_PTX|INVALID_IMAGE|NO_BINARY_FOR_GPU|UNSUPPORTED_PTX_VERSION)\b"
        r"|\bhipErrorNoBinaryForGpu: ",
    ),
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
    _sig(
        F.UNKNOWN,
        "container-pull-fail",
        r"\[ERROR\] (?:Pull failed for|Authenticated pull failed|Login to .* failed)",
        streamed=False,
    ),
    _sig(F.UNKNOWN, "container-load-fail", r"\[ERROR\] Unable to determine image name", streamed=False),
    _sig(F.UNKNOWN, "no-gpu", r"WARNING: No GPU devices detected", streamed=False),
    _sig(F.UNKNOWN, "nccl-nic-fail", r"Failed to auto-detect NCCL_SOCKET_IFNAME", streamed=False),
    _sig(F.UNKNOWN, "port-fail", r"FATAL: Could not find a free port", streamed=False),
    _sig(F.UNKNOWN, "model-not-found", r"!!! (?:Unknown model:|Model name resolution failed)", streamed=False),
    _sig(
        F.UNKNOWN,
        "patch-branch-fail",
        r"\[FAIL\] Failed to check out|RPC failed; HTTP 5\d\d"
        r"|remote: Internal Server Error",
        streamed=False,
    ),
    _sig(F.UNKNOWN, "stage-timeout", r"== (?:Preflight|Docker pull|ECC check) TIMEOUT", streamed=False),
    _sig(F.UNKNOWN, "checkpoint-fs-error", r"Training stopped: Checkpointing failed", streamed=False),
    _sig(F.PYTHON_EXCEPTION, "python-exception-line", EXCEPTION_LINE),
    _sig(
        F.PYTHON_EXCEPTION, "python-exception", r"Traceback \(most recent call last\):", Tier.WEAK, streamed=False
    ),  # its exception line is streamed
    # XLA announces a collective stuck at a rendezvous long before any time limit.
    _sig(F.HANG, "rendezvous-stuck", STUCK_RE.pattern + r"|Termination timeout for .* exceeded", Tier.WEAK),
    _sig(F.HANG, "rendezvous-unstuck", UNSTUCK, Tier.WEAK),  # withdraws the stuck lines before it
    _sig(
        F.HEARTBEAT_TIMEOUT,
        "coordination-death",
        r"Terminating process because the JAX distributed "
        r"service detected fatal errors|Polled (?:an )?error from coordination service",
        Tier.WEAK,
    ),
    _sig(F.HANG, "slurm-time-limit", r"CANCELLED AT \S+ DUE TO TIME LIMIT", Tier.WEAK),
    # scancel, or Slurm's own reason (`DUE TO PREEMPTION`, `DUE TO JOB REQUEUE`); a time limit and a
    # node failure match their own rows above first.
    _sig(
        F.CANCELLED,
        "slurm-cancelled",
        r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+ (?:DUE TO "
        r"[A-Z][A-Z ]*[A-Z] )?\*\*\*",
        Tier.WEAK,
    ),
    _sig(
        F.NODE_FAIL,
        "node-fail",
        r"NODE_EXIT host=(?P<host>\S+) exit=(?!130\b)(?P<code>-?[1-9]\d*)\b",
        Tier.WEAK,
        streamed=False,
    ),
    # srun's word for a task a signal killed (exit 139, 135, 134, 132, 136): a crash, core dump likely.
    _sig(
        F.NODE_FAIL,
        "task-signal",
        rf"\bsrun: error: (?P<host>[^\s:]+): tasks? [\d,-]+: (?P<signal>{_SIGNALS})",
        Tier.WEAK,
    ),
    # The same crash in Python's faulthandler words and the batch shell's (`…/slurm_script: line 26:
    # 118054 Segmentation fault (core dumped)`). `Killed` stays out: OOM killer and time limit print it.
    _sig(
        F.NODE_FAIL,
        "task-signal",
        rf"Fatal Python error: (?P<signal>{_SIGNALS})\b|: line \d+: +\d+ (?P<shell>{_SIGNALS})\b"
        rf"|^\s*(?P<bare>{_SIGNALS}) \(core dumped\)",
        Tier.WEAK,
    ),
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
