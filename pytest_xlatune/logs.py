"""MaxText step lines and failure signatures in a training log (pure: bytes in, values out)."""

from __future__ import annotations

import ctypes
import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

_NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf(?:inity)?))"
_STEP_MARK = "completed step:"
_STEP_RE = re.compile(r"\bcompleted step:\s*(\d+)")
# Each `, name: value` after the step number. Fields are taken by exact name, so `mtp_loss` and
# `main_model_loss` are never read as `loss` (the skill's greedy `.*loss:` reads mtp_loss).
_FIELD_RE = re.compile(rf",\s*([A-Za-z_][\w/]*)\s*:\s*({_NUM})\s*%?")
# CSI sequences, charset selects and SI/SO: `tput sgr0` emits "\x1b(B\x1b[m" on xterm.
_ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[()][0-9A-Za-z])|[\x0e\x0f]")
_UNKNOWN_RE = re.compile(r"Unknown flags? in XLA_FLAGS:\s*(\S+)")

# Known false positives: the xla-tuning skill's "grep -v these first" list and job-log-triage's
# "Known-harmless" list. Regexes searched anywhere in a line; each starts with a literal so the
# combined pattern stays fast.
KNOWN_NOISE: tuple[str, ...] = (
    r"cuInit: UNKNOWN ERROR \(303\)",
    r"INTERNAL: CUDA error",
    r"NCCL WARN MSCCL\+\+: Feature not enabled",
    r"NCCL WARN LL cutoff points not detected",
    r"AMD GPU device\(s\) is/are in a low-power state",
    r"Token indices sequence length is longer",
    r"OCI runtime exec failed",
    r"error executing setns process",
    r"\[cgroup\] Sent SIGKILL to 0/0 processes",
    r"Cannot read CPU core \d+",
    r"No hardware is found\. Using default TPU version: jellyfish",
    r"No device identifiers found",
    r"Enabling PjRt/TPU event dependency logging",
    r"Fiber init: default domain = futex",
    r"could not kill container",
    # Harmless after scancel, which the job state (not the log) tells.
    r"srun: error: \S+: tasks? [\d,-]+: Exited with exit code 143",
    r"NODE_EXIT host=\S+ exit=143\b",
)
_NOISE_RE = re.compile("|".join(KNOWN_NOISE))
_NOISE_BYTES_RE = re.compile("|".join(KNOWN_NOISE).encode())

TAIL_LINES = 60
# maxtext-slurm's profiler captures steps 5-7 and dumps at step 8, a massive outlier.
PROFILER_LAST_STEP = 8

# Ingest must keep up with `grep -c` on GB-sized logs: a feed is searched for a few needles and
# only the lines around hits are decoded. Bounds on everything else:
_BLOCK = 256 << 10  # all needles are searched block by block, while the block is in cache
_TAIL_SCAN = 64 << 10  # how far back from a feed's end the tail looks for non-noise lines
_SUMMARY_WINDOW = 64 << 10  # JOB SUMMARY is the job's trailer: only a feed's end is searched
_STATUS_WINDOW = 4 << 10  # `Status:` follows the summary header within this many bytes
_MAX_LINE = 1 << 20  # a partial line longer than this is truncated
# A tail line is kept to this many bytes: the tail is re-read by triage on every feed, so a
# 50 MB line must not ride along (its start is what a person reads anyway).
_MAX_TAIL_LINE = 4 << 10
_MAX_OOM_SIGNALS = 20
_NOISE_MARK = f"[... more than {_TAIL_SCAN >> 10} KiB of known-noise lines ...]"
_STEP_NEEDLE = b"completed step:"
_OOM_NEEDLES = (b"RESOURCE_EXHAUSTED", b"ut of memory")  # "Out of memory" and "out of memory"
_UNKNOWN_NEEDLE = b"Unknown flag"  # "Unknown flag in XLA_FLAGS:", "Unknown flags in XLA_FLAGS:"
_MEMSTATS_NEEDLE = b"Memstats"
_SUMMARY_NEEDLE = b"JOB SUMMARY"
_STATUS_NEEDLE = b"Status:"


def _bytes_find(buf: bytes, needle: bytes, start: int, end: int) -> int:
    return buf.find(needle, start, end)


def _libc_find() -> Callable[[bytes, bytes, int, int], int] | None:
    """Return a bytes.find twin backed by libc memmem, or None when there is none.

    bytes.find runs at about grep's speed per needle; glibc's memmem is 3-5x faster, which is
    what fits several needles into the ingest budget.
    """
    try:
        memmem = ctypes.CDLL(None).memmem
    except (OSError, AttributeError):  # e.g. Windows
        return None
    memmem.restype = ctypes.c_void_p
    memmem.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)

    def find(buf: bytes, needle: bytes, start: int, end: int) -> int:
        end = min(end, len(buf))
        if type(buf) is not bytes or end - start < len(needle):
            return buf.find(needle, start, end)
        base = ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value or 0  # no copy
        hit = memmem(base + start, end - start, needle, len(needle))
        return -1 if hit is None else int(hit) - base

    return find


_find = _libc_find() or _bytes_find


@dataclass(frozen=True)
class StepRecord:
    """One `completed step:` line."""

    step: int
    seconds: float
    tflops: float | None
    mfu_pct: float | None
    tokens_per_s: float | None
    loss: float | None
    extra: tuple[tuple[str, float], ...] = ()  # other numeric fields, in line order


def parse_step_line(line: str) -> StepRecord | None:
    """Parse a MaxText step line, whatever prefix (srun -l, absl) comes before it."""
    m = _STEP_RE.search(line)
    if m is None:
        return None
    stop = line.find(_STEP_MARK, m.end())  # a second step line glued on (interleaved output)
    fields: dict[str, float] = {}
    for name, value in _FIELD_RE.findall(line, m.end(), len(line) if stop < 0 else stop):
        fields.setdefault(name, float(value))
    seconds = fields.pop("seconds", None)
    if seconds is None:
        return None
    tflops = fields.pop("TFLOP/s/device", None)
    return StepRecord(
        step=int(m.group(1)),
        seconds=seconds,
        tflops=fields.pop("TFLOP/s", None) if tflops is None else tflops,  # oldest MaxText
        mfu_pct=fields.pop("MFU", None),
        tokens_per_s=fields.pop("Tokens/s/device", None),
        loss=fields.pop("loss", None),
        extra=tuple(fields.items()),
    )


def is_noise(line: str) -> bool:
    """Say whether a line is a known false-positive signature."""
    return _NOISE_RE.search(line) is not None


def strip_known_noise(lines: Iterable[str]) -> list[str]:
    """Drop the known false-positive lines."""
    return [line for line in lines if _NOISE_RE.search(line) is None]


def strip_ansi(text: str) -> str:
    """Remove ANSI colour escapes."""
    return _ANSI_RE.sub("", text)


class SignalKind(Enum):
    """What a failure-relevant line says."""

    UNKNOWN_FLAG = "unknown-flag"
    OOM = "oom"
    MEMSTATS = "memstats"
    JOB_SUMMARY = "job-summary"


@dataclass(frozen=True)
class Signal:
    """A signal line (ANSI removed) and the highest step printed before it."""

    kind: SignalKind
    line: str
    after_step: int | None


_Needles = list[tuple[bytes, SignalKind | None]]  # kind None: a step line
_Hit = tuple[int, int, SignalKind | None]  # line start, line end, kind


class StepLog:
    """Ingest a growing log in byte chunks of any size: steps, signals and a noise-free tail."""

    def __init__(self) -> None:
        self._partial = b""
        self._steps: dict[int, StepRecord] = {}
        self.last_step: int | None = None
        self.signals: list[Signal] = []
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.unknown_flag: str | None = None  # the first flag XLA refused, e.g. `--xla_foo`
        self.saw_memstats = False
        self.summary_status: str | None = None  # e.g. "SUCCESS (exit 0)"
        self._status_budget = 0  # bytes still to search for `Status:` after a summary header
        self._ooms = 0

    @property
    def steps(self) -> dict[int, StepRecord]:
        return dict(self._steps)

    def tail_text(self) -> str:
        return "\n".join(self.tail)

    def feed(self, chunk: bytes) -> list[StepRecord]:
        """Ingest the next bytes of the log; return the steps seen for the first time."""
        last_nl = chunk.rfind(b"\n")
        if last_nl < 0:
            self._partial += chunk[: max(0, _MAX_LINE - len(self._partial))]
            return []
        new: list[StepRecord] = []
        first_nl = chunk.find(b"\n")
        head = self._partial + chunk[: first_nl + 1]  # the line straddling two feeds: copied
        self._partial = chunk[last_nl + 1 :]
        self._scan(head, 0, len(head), new)
        self._scan(chunk, first_nl + 1, last_nl + 1, new)  # the rest is searched in place
        self._update_tail((head, 0, len(head)), (chunk, first_nl + 1, last_nl + 1))
        return new

    def flush(self) -> list[StepRecord]:
        """Take the buffered partial line as complete (the log has ended)."""
        return self.feed(b"\n") if self._partial else []

    def _scan(self, buf: bytes, start: int, end: int, new: list[StepRecord]) -> None:
        if start >= end:
            return
        if self._status_budget > 0:
            self._find_status(buf, start, end)
        wanted: _Needles = [(_STEP_NEEDLE, None)]
        if self._ooms < _MAX_OOM_SIGNALS:
            wanted += [(needle, SignalKind.OOM) for needle in _OOM_NEEDLES]
        hits = _lines_with(buf, start, end, wanted)
        if self.last_step is None:
            # XLA reads XLA_FLAGS and MaxText prints Memstats before step 0: only the text
            # before the first step line is searched for them.
            early: _Needles = []
            if self.unknown_flag is None:
                early.append((_UNKNOWN_NEEDLE, SignalKind.UNKNOWN_FLAG))
            if not self.saw_memstats:
                early.append((_MEMSTATS_NEEDLE, SignalKind.MEMSTATS))
            pre_end = min((hit[0] for hit in hits if hit[2] is None), default=end)
            hits += _lines_with(buf, start, pre_end, early)
        summary_from = max(start, end - _SUMMARY_WINDOW)
        hits += _lines_with(buf, summary_from, end, [(_SUMMARY_NEEDLE, SignalKind.JOB_SUMMARY)])
        hits.sort(key=lambda hit: hit[0])  # file order, so that `after_step` is right
        seen: set[tuple[int, SignalKind | None]] = set()
        for line_start, line_end, kind in hits:
            if (line_start, kind) in seen:  # e.g. "RESOURCE_EXHAUSTED: Out of memory ..."
                continue
            seen.add((line_start, kind))
            line = buf[line_start:line_end].decode("utf-8", "replace").rstrip("\r")
            if kind is None:
                self._take_steps(line, new)
            elif self._take_signal(kind, line) and kind is SignalKind.JOB_SUMMARY:
                self._status_budget = _STATUS_WINDOW
                self._find_status(buf, line_end, end)

    def _take_steps(self, line: str, new: list[StepRecord]) -> None:
        at = line.find(_STEP_MARK)
        while at >= 0:  # more than one when tasks' output interleaves within a line
            segment = line[at:]
            m = _STEP_RE.match(segment)
            if m is not None and int(m.group(1)) not in self._steps:  # the first task to print wins
                rec = parse_step_line(segment)
                if rec is not None:
                    self._steps[rec.step] = rec
                    new.append(rec)
                    self.last_step = max(rec.step, self.last_step or 0)
            at = line.find(_STEP_MARK, at + len(_STEP_MARK))

    def _take_signal(self, kind: SignalKind, line: str) -> bool:
        line = strip_ansi(line).strip()
        if kind is SignalKind.UNKNOWN_FLAG:
            m = _UNKNOWN_RE.search(line)
            if m is None or self.unknown_flag is not None:
                return False
            self.unknown_flag = m.group(1).split("=", 1)[0]
        elif kind is SignalKind.MEMSTATS:
            if self.saw_memstats:
                return False
            self.saw_memstats = True
        elif kind is SignalKind.OOM:
            if self._ooms >= _MAX_OOM_SIGNALS:
                return False
            self._ooms += 1
        self.signals.append(Signal(kind, line, self.last_step))
        return True

    def _find_status(self, buf: bytes, start: int, end: int) -> None:
        stop = min(end, start + self._status_budget)
        self._status_budget -= max(0, stop - start)
        at = _find(buf, _STATUS_NEEDLE, start, stop)
        if at >= 0:
            line_end = buf.find(b"\n", at, end)
            line = buf[at + len(_STATUS_NEEDLE) : end if line_end < 0 else line_end]
            self.summary_status = strip_ansi(line.decode("utf-8", "replace")).strip()
            self._status_budget = 0

    def _update_tail(self, *regions: tuple[bytes, int, int]) -> None:
        """Append this feed's last non-noise lines, walking back from its end."""
        found: list[str] = []
        budget = _TAIL_SCAN
        for buf, start, end in reversed(regions):
            pos = end
            while pos > start and len(found) < TAIL_LINES:
                if budget <= 0:  # say that noise hides older lines rather than splice them on
                    self.tail.clear()
                    self.tail.append(_NOISE_MARK)
                    self.tail.extend(reversed(found))
                    return
                line_start = max(buf.rfind(b"\n", start, pos - 1) + 1, start)
                budget -= pos - line_start
                cut = min(pos, line_start + _MAX_TAIL_LINE)
                if _NOISE_BYTES_RE.search(buf, line_start, cut) is None:
                    line = buf[line_start:cut].decode("utf-8", "replace").rstrip()
                    if cut < pos:
                        line += f" [... {pos - cut} more bytes]"
                    if line.strip():
                        found.append(strip_ansi(line))
                pos = line_start
        self.tail.extend(reversed(found))


def _lines_with(buf: bytes, start: int, end: int, wanted: _Needles) -> list[_Hit]:
    """Return (line start, line end, kind) for each line of buf[start:end] holding a needle."""
    out: list[_Hit] = []
    for block in range(start, end, _BLOCK) if wanted else ():
        for needle, kind in wanted:
            stop = min(end, block + _BLOCK + len(needle) - 1)  # a needle may straddle blocks
            at = _find(buf, needle, block, stop)
            while at >= 0:
                line_start = buf.rfind(b"\n", start, at) + 1 or start
                line_end = buf.find(b"\n", at, end)
                line_end = end if line_end < 0 else line_end
                out.append((line_start, line_end, kind))
                at = _find(buf, needle, line_end, stop)
    return out


@dataclass(frozen=True)
class SteadyState:
    """Steady-state throughput of one run."""

    tgs: float  # mean Tokens/s/device
    step_seconds: float
    last_loss: float | None  # of the highest step, inside the window or not
    steps_used: tuple[int, ...]
    tgs_values: tuple[float, ...]  # per step, for confidence intervals


def steady_state(
    steps: Mapping[int, StepRecord], *, profiler_on: bool, first: int = 5, last: int = 14
) -> SteadyState | None:
    """Average Tokens/s/device and step time over steps 5-14, or 9-14 when the profiler ran."""
    lo = max(first, PROFILER_LAST_STEP + 1) if profiler_on else first
    used: list[tuple[StepRecord, float]] = []
    for step in sorted(steps):
        tgs = steps[step].tokens_per_s
        if lo <= step <= last and tgs is not None and math.isfinite(tgs):
            used.append((steps[step], tgs))
    if not used:
        return None
    return SteadyState(
        tgs=sum(tgs for _, tgs in used) / len(used),
        step_seconds=sum(rec.seconds for rec, _ in used) / len(used),
        last_loss=steps[max(steps)].loss,
        steps_used=tuple(rec.step for rec, _ in used),
        tgs_values=tuple(tgs for _, tgs in used),
    )
