"""Classify how a job ended from its log text and the scheduler's word on it (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..jobs import JobState
from ..results import Verdict
from .excerpts import RANK_RE, MemoryFigures, exception_line, fusion_line, memory_figures, quote, rank_hosts, short
from .hang import HangPhase
from .hits import Hit, find_hits, first_weak
from .lines import has_step, strip_ansi
from .logs import SignalKind, StepLog
from .signatures import FailureClass, Tier, harmless, rejected_flag

__all__ = [
    "EXIT_SIGTERM",
    "Diagnosis",
    "Evidence",
    "FailureClass",
    "HangPhase",
    "Hit",
    "MemoryFigures",
    "diagnose",
    "find_hits",
    "judge",
]

EXIT_SIGTERM = 143
EXIT_SIGINT = 130

# NCCL's `host:pid:tid [dev]` prefix, also behind mpirun's `[1,12]<stdout>:` tag.
_NCCL_HOST_RE = re.compile(r"(?:^|\s|>:)(?P<host>[A-Za-z][\w.-]*):\d+:\d+ \[\d+\]")
_STATUS_RE = re.compile(r"Status:\s*(?P<word>SUCCESS|FAILED|CANCELLED)\b[^(]*(?:\((?P<paren>[^)]*)\))?")

_SLURM_KILL = frozenset({"slurm-time-limit", "slurm-cancelled"})
# Lines that follow from another node's failure: a Slurm NODE_FAIL outranks them.
_CONSEQUENCES = frozenset(
    {FailureClass.HEARTBEAT_TIMEOUT, FailureClass.NCCL_TIMEOUT, FailureClass.COORDINATION_TIMEOUT}
)


@dataclass(frozen=True)
class Evidence:
    """What the log and the scheduler told us about a job (finished, or running for a look)."""

    last_step: int | None
    expected_steps: int
    exit_code: int | None = None
    unknown_flag_line: str | None = None
    oom_line: str | None = None
    cancelled_by_us: bool = False
    log_text: str = ""  # the tail (or all) of the log; ANSI and known noise are dropped here
    scheduler_state: JobState | None = None  # a word as squeue/sacct print it ("CANCELLED by 0") is parsed
    hang_phase: HangPhase | None = None  # our HangDetector fired (and we cancelled the job)
    saw_memstats: bool = False  # StepLog.saw_memstats: the log printed `Memstats`
    summary_status: str | None = None  # StepLog.summary_status, e.g. "FAILED (exit 1)"

    def __post_init__(self) -> None:
        if isinstance(self.scheduler_state, str) and not isinstance(self.scheduler_state, JobState):
            text = self.scheduler_state
            object.__setattr__(self, "scheduler_state", JobState.parse(text) if text.strip() else None)

    @classmethod
    def from_log(cls, log: StepLog, expected_steps: int, **kw: object) -> Evidence:
        """What a StepLog saw of the whole log (failure lines from anywhere, the tail), plus `kw`."""

        def first(kind: SignalKind) -> str | None:
            return next((signal.line for signal in log.signals if signal.kind is kind), None)

        return cls(
            last_step=log.last_step,
            expected_steps=expected_steps,
            log_text=log.triage_text(),
            unknown_flag_line=first(SignalKind.UNKNOWN_FLAG),
            oom_line=first(SignalKind.OOM),
            saw_memstats=log.saw_memstats,
            summary_status=log.summary_status,
            **kw,  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class Diagnosis:
    """The root cause of one job, with the line that shows it and what that line names."""

    failure: FailureClass
    verdict: Verdict
    reason: str  # one line
    line: str = ""  # the evidence line, ANSI removed
    label: str = ""  # job-log-triage's finer name: oom-gpu, oom-host, container-pull-fail, ...
    flag: str | None = None  # the flag XLA refused
    memory: MemoryFigures | None = None
    phase: HangPhase | None = None
    node: str | None = None
    rank: int | None = None  # the srun -l task that printed the line
    exit_code: int | None = None
    also: tuple[FailureClass, ...] = ()  # every other class whose signature was found


def judge(evidence: Evidence) -> tuple[Verdict, str]:
    """The verdict and a one-line reason; the unknown-flag line is quoted as XLA printed it."""
    diagnosis = diagnose(evidence)
    return diagnosis.verdict, diagnosis.reason


def diagnose(e: Evidence) -> Diagnosis:
    """Classify a job: the earliest fatal line wins, then the scheduler, a hang, the weak hints."""
    lines = _lines(e)
    hits = find_hits(lines, last_step=e.last_step)
    also = tuple(dict.fromkeys(h.failure for h in hits))
    summary_word, summary_exit = _summary(e, lines)
    exit_code = e.exit_code if e.exit_code is not None else summary_exit
    state = e.scheduler_state
    ranks = rank_hosts(e.log_text)

    def made(failure: FailureClass, reason: str, **kw: object) -> Diagnosis:
        return _made(e, failure, reason, exit_code, also, **kw)

    if e.last_step is not None and e.last_step >= e.expected_steps - 1:
        if exit_code in (0, None) and summary_word in (None, "SUCCESS"):
            return made(FailureClass.SUCCESS, "")
        how = f"exit {exit_code}" if exit_code is not None else f"Status: {summary_word}"
        return made(
            FailureClass.SOFT_SUCCESS,
            f"{how} after the last step {e.last_step} (teardown race); training data is intact",
        )
    # What a task prints after Slurm's own cancel line (time limit, scancel) follows from the kill.
    killed_at = next((h.index for h in hits if h.signature.label in _SLURM_KILL), len(lines))
    fatal = next((h for h in hits if h.signature.tier is Tier.FATAL and h.index < killed_at), None)
    lost = next((h for h in hits if h.signature.label == "slurm-node-failure"), None)
    if fatal and fatal.failure in _CONSEQUENCES:
        # A task that died first (its own traceback, a killed node) explains the timeouts after it;
        # a node Slurm lost explains them too, though srun says so only after the survivors time out.
        fatal = lost or next((h for h in hits if h.index < fatal.index and _independent(h, lines)), fatal)
    if fatal and fatal.failure is FailureClass.PYTHON_EXCEPTION:
        # A device fault is the root cause of the Python exception that reports it (or that
        # another task raised after it): it wins wherever it sits before the kill.
        fatal = next(
            (
                h
                for h in hits
                if h.failure is FailureClass.GPU_RUNTIME_ERROR
                and h.signature.tier is Tier.FATAL
                and h.index < killed_at
            ),
            fatal,
        )
    weak = first_weak(hits)
    if state is JobState.NODE_FAIL and (fatal is None or fatal.failure in _CONSEQUENCES):
        seen = f"; the log shows its consequences: {short(fatal.line)}" if fatal else ""
        return made(
            FailureClass.NODE_FAIL,
            f"Slurm marked the job NODE_FAIL{seen}",
            label="node-fail",
            line=fatal.line.strip() if fatal else "",
        )
    if fatal:
        return _from_hit(e, fatal, lines, ranks, exit_code, also)
    phase = e.hang_phase
    if phase is None and (state is JobState.TIMEOUT or any(h.failure is FailureClass.HANG for h in hits)):
        phase = _phase_from_text(e, lines)  # ran into its time limit: hung somewhere
    if phase is not None:
        # RCCL warnings are better evidence than the phase alone (RCCL init runs up to step 0).
        rccl = next((h for h in hits if h.failure is FailureClass.RCCL_INIT_FLAKE), None)
        if rccl and phase is not HangPhase.AFTER_STEP0:
            return _from_hit(e, rccl, lines, ranks, exit_code, also, phase=phase)
        stuck = next((h for h in hits if h.signature.label == "rendezvous-stuck"), None)
        return _hang(e, phase, exit_code, also, timed_out=e.hang_phase is None, stuck=stuck)
    if e.cancelled_by_us:
        return made(FailureClass.CANCELLED, "cancelled by this session")
    if state is JobState.OUT_OF_MEMORY:
        return made(
            FailureClass.OOM,
            "Slurm killed the job for host memory (OUT_OF_MEMORY) with no JAX-side error",
            label="oom-host",
        )
    if weak:
        return _from_hit(e, weak, lines, ranks, exit_code, also)
    if (
        state in (JobState.CANCELLED, JobState.PREEMPTED)
        or summary_word == "CANCELLED"
        or exit_code in (EXIT_SIGINT, EXIT_SIGTERM)
    ):
        return made(
            FailureClass.CANCELLED,
            f"cancelled ({_exit_words(state, exit_code)}) with no failure before it, {_progress(e)}",
        )
    if e.last_step is None:
        return made(FailureClass.UNKNOWN, f"exited with code {exit_code} before any completed step")
    return made(FailureClass.UNKNOWN, f"exited with code {exit_code} after step {e.last_step} of {e.expected_steps}")


def _independent(hit: Hit, lines: list[str]) -> bool:
    """A dead task, not a message the fatal signatures already cover (a traceback whose last line
    is `DEADLINE_EXCEEDED ...` is the coordination timeout itself)."""
    if hit.failure is FailureClass.NODE_FAIL:
        return True
    if hit.failure is not FailureClass.PYTHON_EXCEPTION:
        return False
    rank = RANK_RE.match(hit.line)
    last = exception_line(lines, hit.index, int(rank.group(1)) if rank else None)
    return last is not None and not any(
        h.signature.tier is Tier.FATAL and h.failure is not FailureClass.PYTHON_EXCEPTION
        for h in find_hits([last], last_step=0)
    )


def _lines(e: Evidence) -> list[str]:
    """Log lines without ANSI or known noise; the explicit signal lines go first when missing."""
    text = [ln.rstrip() for ln in strip_ansi(e.log_text).splitlines()]
    text = [ln for ln in text if ln.strip() and not harmless(ln)]
    present = {ln.strip() for ln in text}
    early = [strip_ansi(ln).strip() for ln in (e.unknown_flag_line, e.oom_line) if ln]
    return [ln for ln in early if ln not in present and not harmless(ln)] + text


def _from_hit(
    e: Evidence,
    hit: Hit,
    lines: list[str],
    ranks: dict[int, str],
    exit_code: int | None,
    also: tuple[FailureClass, ...],
    phase: HangPhase | None = None,
) -> Diagnosis:
    line = hit.line.strip()
    quoted = quote(hit.match)
    rank_m = RANK_RE.match(hit.line)
    rank = int(rank_m.group(1)) if rank_m else None
    groups = hit.match.groupdict()
    host_m = _NCCL_HOST_RE.search(line)
    node = (
        groups.get("host")
        or groups.get("on")
        or (host_m.group("host") if host_m else None)
        or (ranks.get(rank) if rank is not None else None)
    )
    on = f" on {node}" if node else (f" on task {rank}" if rank is not None else "")
    failure, label = hit.failure, hit.signature.label
    flag = memory = None
    if failure is FailureClass.UNKNOWN_FLAG:
        flag = rejected_flag(hit.match)
        reason = f"XLA rejected flag {flag}: {quoted}"
    elif failure is FailureClass.OOM:
        memory = memory_figures(lines, hit.index)
        reason = f"out of memory ({memory}){on}: {quoted}" if str(memory) else f"out of memory{on}: {quoted}"
    elif label == "python-exception-line":
        reason = f"Python exception{on}: {short(line[hit.match.start('exc') :])}"
    elif failure is FailureClass.XLA_COMPILE_FAIL:
        reason = f"{_REASONS.get(label) or _REASONS[failure]}{on}: {short(fusion_line(lines, hit.index) or line)}"
    elif failure is FailureClass.PYTHON_EXCEPTION:
        reason = f"Python exception{on}: {short(exception_line(lines, hit.index, rank) or line)}"
    elif label == "slurm-node-failure":
        reason = f"Slurm lost node {node} (the timeouts on the other nodes follow from it)"
    elif label == "node-fail":
        reason = f"node {node} exited with code {groups['code']} and no error line explains it"
    else:
        reason = f"{_REASONS.get(label) or _REASONS.get(failure, label)}{on}: {quoted}"
    if failure is FailureClass.RCCL_INIT_FLAKE and phase is not None:
        reason = f"hung {_PHASE_WORDS[phase]} with RCCL init warnings{on}: {quoted}"
    return _made(
        e,
        failure,
        reason,
        exit_code,
        also,
        line=line,
        label=label,
        flag=flag,
        memory=memory,
        phase=phase,
        node=node,
        rank=rank,
    )


_REASONS: dict[FailureClass | str, str] = {  # by label first, then by class
    "coordination-unreachable": "JAX coordinator unreachable (address, port, or the leader not up)",
    "coordination-restarted": "a JAX task restarted and re-registered; the coordinator aborts all",
    "slurm-launch-failed": "Slurm could not launch the step's tasks",
    "task-signal": "a task was killed by a signal (a crash: look for a core dump)",
    "nic-port-down": "NIC fault (an RDMA port went down: cable, transceiver or switch port)",
    "nic-adapter-fatal": "NIC fault (the RDMA adapter reported a fatal error)",
    "tpu-device-fault": "TPU device fault (a chip, its driver or the slice)",
    "gpu-unavailable": "no usable GPU on the node (its driver or a device failed to initialise)",
    "cudnn-init": "cuDNN could not start on the GPU (its memory held by another process, or a driver "
    "older than the cuDNN)",
    "no-binary-for-gpu": "the GPU cannot load the code built for it (another GPU, CUDA or ROCm version)",
    "coordination-death": "the JAX distributed service stopped this task (another task died, or the "
    "coordinator is gone: the earliest error in any task's log is the cause)",
    "xla-check-failed": "XLA aborted on an internal check (a compiler bug the program or flags trigger)",
    FailureClass.COORDINATION_TIMEOUT: "JAX coordination service timed out",
    FailureClass.HEARTBEAT_TIMEOUT: "JAX heartbeat timeout (often a false positive; "
    "an earlier stall may be the real cause)",
    FailureClass.GPU_RUNTIME_ERROR: "GPU runtime error",
    FailureClass.NIC_FAULT: "NIC fault (RDMA completion-queue error)",
    FailureClass.XLA_COMPILE_FAIL: "XLA compilation failed",
    FailureClass.DISK_FULL: "disk full or failing (not an OOM): free space where this line says",
    FailureClass.RCCL_INIT_FLAKE: "RCCL init failure before any completed step",
    FailureClass.NCCL_TIMEOUT: "RCCL/NCCL collective error during training",
    FailureClass.CANCELLED: "Slurm cancelled the job",
}


_PHASE_WORDS = {
    HangPhase.BEFORE_MEMSTATS: "before Memstats",
    HangPhase.BEFORE_STEP0: "after Memstats, before step 0",
    HangPhase.AFTER_STEP0: "after step 0",
}


def _hang(
    e: Evidence,
    phase: HangPhase,
    exit_code: int | None,
    also: tuple[FailureClass, ...],
    timed_out: bool,
    stuck: Hit | None = None,
) -> Diagnosis:
    how = "ran into its time limit" if timed_out else "stopped making progress"
    if stuck is not None:  # XLA named the collective: a hang whatever the phase, not a silent OOM
        where = _PHASE_WORDS[phase]
        return _made(
            e,
            FailureClass.HANG,
            f"{how} {where}: a collective is stuck at a rendezvous: {short(stuck.line)}",
            exit_code,
            also,
            label="rendezvous-stuck",
            phase=phase,
            line=stuck.line.strip(),
        )
    if phase is HangPhase.BEFORE_STEP0:
        return _made(
            e,
            FailureClass.OOM,
            f"{how} after Memstats and before step 0: a silent OOM in XLA compile (treated as OOM, never retried)",
            exit_code,
            also,
            label="silent-oom",
            phase=phase,
        )
    where = (
        "before Memstats (RCCL/IB init)"
        if phase is HangPhase.BEFORE_MEMSTATS
        else f"after step {e.last_step} (a collective stuck mid-training)"
    )
    return _made(e, FailureClass.HANG, f"{how} {where}", exit_code, also, label="hang", phase=phase)


def _made(
    e: Evidence, failure: FailureClass, reason: str, exit_code: int | None, also: tuple[FailureClass, ...], **kw: object
) -> Diagnosis:
    # A class's verdict has its name (results.Verdict); UNKNOWN has none: it failed, with or without steps.
    verdict = Verdict.__members__.get(failure.name) or (Verdict.NO_STEPS if e.last_step is None else Verdict.FAILED)
    others = tuple(c for c in also if c is not failure)
    return Diagnosis(failure, verdict, reason, exit_code=exit_code, also=others, **kw)  # type: ignore[arg-type]


def _phase_from_text(e: Evidence, lines: list[str]) -> HangPhase:
    if e.last_step is not None or any(has_step(ln) for ln in lines):
        return HangPhase.AFTER_STEP0
    if e.saw_memstats or any("Memstats" in ln for ln in lines):
        return HangPhase.BEFORE_STEP0
    return HangPhase.BEFORE_MEMSTATS


def _summary(e: Evidence, lines: list[str]) -> tuple[str | None, int | None]:
    """The JOB SUMMARY status word and exit code, from StepLog or the text."""
    text = (
        f"Status: {e.summary_status}"
        if e.summary_status
        else next((ln for ln in reversed(lines) if "Status:" in ln), "")
    )
    m = _STATUS_RE.search(text)
    if m is None:
        return None, None
    code = re.search(r"exit\s*(-?\d+)", m.group("paren") or "")
    return m.group("word"), int(code.group(1)) if code else None


def _exit_words(state: JobState | None, exit_code: int | None) -> str:
    words = [state.value] if state else []
    if exit_code is not None:
        words.append(f"exit {exit_code}")
    return ", ".join(words) or "JOB SUMMARY"


def _progress(e: Evidence) -> str:
    return "before any completed step" if e.last_step is None else f"after step {e.last_step} of {e.expected_steps}"
