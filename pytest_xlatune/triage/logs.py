"""The incremental StepLog: steps, failure evidence and a noise-free tail of a growing log (pure).

One line's grammar is lines.py's; which lines are evidence is signatures.py's; what they mean, triage.py's."""

from __future__ import annotations

import ctypes
import functools
import re
from collections import deque
from collections.abc import Callable

import ahocorasick_rs

from ..shareable import LAST_WORD, WORD_ENDS, cut_at_word
from .lines import NOISE_BYTES_RE, NOISE_RE, STEP_MARK_RE, STEP_MARKS, STEP_RE, StepRecord, parse_step_line, strip_ansi
from .signals import Signal as Signal  # re-exported: the words triage and the tests use
from .signals import SignalKind as SignalKind
from .signatures import EVIDENCE_NEEDLES, STUCK_RE, UNKNOWN_FLAG_RE, is_evidence, rejected_flag

TAIL_LINES = 60

# Ingest of GB-sized logs: a feed is searched block by block for byte needles (the step and OOM
# needles here, signatures.EVIDENCE_NEEDLES for failure lines anywhere in the log) and only the
# lines around hits are decoded; each needle costs one memmem pass. Bounds on everything else:
_BLOCK = 256 << 10  # all needles are searched block by block, while the block is in cache
_TAIL_SCAN = 64 << 10  # how far back from a feed's end the tail looks for non-noise lines
_SUMMARY_WINDOW = 64 << 10  # JOB SUMMARY is the job's trailer: only a feed's end is searched
_STATUS_WINDOW = 4 << 10  # `Status:` follows the summary header within this many bytes
_MAX_LINE = 1 << 20  # a partial line longer than this is truncated
_WINDOW = 64 << 10  # the one-pass search's window (its matches are listed window by window)
_SMALL = 16 << 10  # regions shorter than this are searched with bytes.find, not memmem
# A tail line is kept to this many bytes: the tail is re-read by triage on every feed, so a
# 50 MB line must not ride along (its start is what a person reads anyway).
_MAX_TAIL_LINE = 4 << 10
_MAX_OOM_SIGNALS = 20
_MAX_STEPS, _RECENT_STEPS = 4096, 64  # step records kept: the first ones, then the newest
# Root-cause lines are kept from the whole log (the earliest wins), bounded in count and width.
MAX_EVIDENCE_LINES = 48
MAX_WEAK_EVIDENCE = 16  # of which weak hints (a traceback header, NCCL WARN) at most
_EVIDENCE_WIDTH = 2000
# A tail line cut at _MAX_TAIL_LINE loses its last word whole, as shareable.cut_at_word cuts.
_WORD_ENDS = frozenset(ord(c) for c in WORD_ENDS)
_LAST_WORD = re.compile(LAST_WORD.pattern.encode())
_OOM_CONTEXT, _OOM_CONTEXT_LINES = 2048, 12  # what follows an OOM line: its memory figures
_NOISE_MARK = f"[... more than {_TAIL_SCAN >> 10} KiB of known-noise lines ...]"
_STEP_NEEDLES = tuple(mark.encode() for mark in STEP_MARKS)
OOM_NEEDLES = (b"RESOURCE_EXHAUSTED", b"ut of memory")  # "Out of memory" and "out of memory"
# "Unknown flag in XLA_FLAGS:", "Unknown flags in XLA_FLAGS:", absl's "Unknown command line flag 'x'"
_UNKNOWN_NEEDLES = (b"Unknown flag", b"line flag", b"interpret value")
_MEMSTATS_NEEDLE = b"Memstats"
_SUMMARY_NEEDLE = b"JOB SUMMARY"
_STATUS_NEEDLE = b"Status:"
_LIBRARY_NEEDLES = (b"CCL INFO", b"CCL TRACE")  # NCCL/RCCL INFO and TRACE (the per-size choices)
MAX_LIBRARY_LINES = 4096  # the init, env and tuning lines come first


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
        if type(buf) is not bytes or end - start < _SMALL:  # a ctypes call costs more than a short find
            return buf.find(needle, start, end)
        base = ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value or 0  # no copy
        hit = memmem(base + start, end - start, needle, len(needle))
        return -1 if hit is None else int(hit) - base

    return find


_find = _libc_find() or _bytes_find


@functools.lru_cache(maxsize=16)
def _automaton(needles: tuple[bytes, ...]) -> ahocorasick_rs.BytesAhoCorasick:
    """One Aho-Corasick automaton for all of a search's needles (leftmost-first: its SIMD
    prefilter reads a GB log faster than `grep -c` reads one pattern; the matches are only where
    to look, so which needle matched does not matter)."""
    return ahocorasick_rs.BytesAhoCorasick(needles, matchkind=ahocorasick_rs.MatchKind.LeftmostFirst)


_Needles = list[tuple[bytes, SignalKind | None]]  # kind None: a step line
_Hit = tuple[int, int, SignalKind | None]  # line start, line end, kind


class StepLog:
    """Ingest a growing log in byte chunks of any size: steps, signals and a noise-free tail."""

    def __init__(self) -> None:
        self._evidence_needles: _Needles = [(n, SignalKind.EVIDENCE) for n in EVIDENCE_NEEDLES]
        self._is_evidence = is_evidence
        # All needles in one pass; _lines_with (one memmem pass per needle) finds the same lines.
        self._lines_with: Callable[[bytes, int, int, _Needles], list[_Hit]] = _lines_with_once
        # (byte offset, line, last step before it): failure lines from anywhere in the log
        self.evidence: list[tuple[int, str, int | None]] = []
        self.first_step_line: str | None = None
        self.stuck_warnings = 0  # XLA's "waiting for ... may be stuck" rendezvous lines seen
        self.unstuck_warnings = 0  # and its "This thread is unstuck" lines, which withdraw them
        self._consumed = 0  # bytes fed so far
        self._context_left = 0  # lines still to keep after an OOM line
        self._weak = 0
        self._tail_at: deque[int] = deque(maxlen=TAIL_LINES)  # byte offset of each tail line
        self._partial = b""
        self._steps: dict[int, StepRecord] = {}  # the first _MAX_STEPS steps
        self._recent: dict[int, StepRecord] = {}  # then only the newest _RECENT_STEPS
        self.last_step: int | None = None
        self.signals: list[Signal] = []
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.unknown_flag: str | None = None  # the first flag XLA refused, e.g. `--xla_foo`
        self.saw_memstats = False
        self.summary_status: str | None = None  # e.g. "SUCCESS (exit 0)"
        self._status_budget = 0  # bytes still to search for `Status:` after a summary header
        self._ooms = 0
        self.library_lines: list[str] = []  # the first NCCL/RCCL INFO/TRACE lines (did a setting take effect)

    @property
    def steps(self) -> dict[int, StepRecord]:
        return {**self._steps, **self._recent}

    def tail_text(self) -> str:
        return "\n".join(self.tail)

    def triage_text(self) -> str:
        """The failure lines from the whole log (in log order, the first step line placed among
        them) followed by the noise-free tail: what triage reads."""
        tail_from = self._tail_at[0] if self._tail_at else self._consumed + 1
        kept = [(line, after) for at, line, after in self.evidence if at < tail_from]
        before = [line for line, after in kept if after is None]
        later = [line for line, after in kept if after is not None]
        marker = [self.first_step_line] if kept and self.first_step_line else []
        return "\n".join(before + marker + later + list(self.tail))

    def feed(self, chunk: bytes) -> list[StepRecord]:
        """Ingest the next bytes of the log; return the steps seen for the first time."""
        base = self._consumed
        self._consumed += len(chunk)
        last_nl = chunk.rfind(b"\n")
        if last_nl < 0:
            self._partial += chunk[: max(0, _MAX_LINE - len(self._partial))]
            return []
        new: list[StepRecord] = []
        first_nl = chunk.find(b"\n")
        head = self._partial + chunk[: first_nl + 1]  # the line straddling two feeds: copied
        head_base = base + first_nl + 1 - len(head)
        self._partial = chunk[last_nl + 1 :][:_MAX_LINE]
        self._scan(head, 0, len(head), new, head_base)
        self._scan(chunk, first_nl + 1, last_nl + 1, new, base)  # the rest is searched in place
        self._update_tail((head, 0, len(head), head_base), (chunk, first_nl + 1, last_nl + 1, base))
        return new

    def flush(self) -> list[StepRecord]:
        """Take the buffered partial line as complete (the log has ended)."""
        return self.feed(b"\n") if self._partial else []

    def _scan(self, buf: bytes, start: int, end: int, new: list[StepRecord], base: int = 0) -> None:
        if start >= end:
            return
        if self._status_budget > 0:
            self._find_status(buf, start, end)
        if self._context_left > 0:
            self._take_context(buf, start, end, base)
        wanted: _Needles = [(needle, None) for needle in _STEP_NEEDLES]
        if self._ooms < _MAX_OOM_SIGNALS:
            wanted += [(needle, SignalKind.OOM) for needle in OOM_NEEDLES]
        if len(self.evidence) < MAX_EVIDENCE_LINES:
            wanted += self._evidence_needles
        if len(self.library_lines) < MAX_LIBRARY_LINES:
            wanted += [(needle, SignalKind.LIBRARY_INFO) for needle in _LIBRARY_NEEDLES]
        hits = self._lines_with(buf, start, end, wanted)
        if self.last_step is None:
            # XLA reads XLA_FLAGS and MaxText prints Memstats before step 0: only the text
            # before the first step line is searched for them.
            early: _Needles = []
            if self.unknown_flag is None:
                early += [(needle, SignalKind.UNKNOWN_FLAG) for needle in _UNKNOWN_NEEDLES]
            if not self.saw_memstats:
                early.append((_MEMSTATS_NEEDLE, SignalKind.MEMSTATS))
            pre_end = min((hit[0] for hit in hits if hit[2] is None), default=end)
            hits += self._lines_with(buf, start, pre_end, early)
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
            elif kind is SignalKind.LIBRARY_INFO:
                if len(self.library_lines) < MAX_LIBRARY_LINES:
                    self.library_lines.append(strip_ansi(line[:_EVIDENCE_WIDTH]))
            elif kind is SignalKind.EVIDENCE or (kind is SignalKind.OOM and self._take_signal(kind, line)):
                if self._take_evidence(base + line_start, line) == "oom-gpu":
                    self._context_left = _OOM_CONTEXT_LINES
                    self._take_context(buf, line_end + 1, end, base)
            elif self._take_signal(kind, line) and kind is SignalKind.JOB_SUMMARY:
                self._status_budget = _STATUS_WINDOW
                self._find_status(buf, line_end, end)

    def _take_steps(self, line: str, new: list[StepRecord]) -> None:
        if "\x1b" in line:  # a highlighter colours the numbers too: `step: \x1b[1;36m5\x1b[0m,`
            line = strip_ansi(line)
        for mark in STEP_MARK_RE.finditer(line):  # more than one when tasks' output interleaves
            segment = line[mark.start() :]
            m = STEP_RE.match(segment)
            number = int(m.group(1)) if m is not None else -1
            if m is not None and number not in self._steps and number not in self._recent:
                rec = parse_step_line(segment)  # the first task to print a step wins
                if rec is not None:
                    if self.first_step_line is None:
                        self.first_step_line = strip_ansi(segment).strip()[:_EVIDENCE_WIDTH]
                    if len(self._steps) < _MAX_STEPS:
                        self._steps[rec.step] = rec
                    else:  # a long run: memory stays bounded, the newest steps stay known
                        self._recent[rec.step] = rec
                        if len(self._recent) > _RECENT_STEPS:
                            del self._recent[next(iter(self._recent))]
                    new.append(rec)
                    self.last_step = max(rec.step, self.last_step or 0)

    def _take_evidence(self, at: int, line: str) -> str:
        if len(self.evidence) >= MAX_EVIDENCE_LINES or NOISE_RE.search(line):
            return ""
        line = cut_at_word(strip_ansi(line[: _EVIDENCE_WIDTH * 2]).rstrip(), _EVIDENCE_WIDTH)
        sig = self._is_evidence(line)
        if sig is None:
            return ""
        if sig.label == "rendezvous-unstuck":  # the rendezvous completed: its warnings were wrong
            self.unstuck_warnings += 1
            kept = [entry for entry in self.evidence if not STUCK_RE.search(entry[1])]
            self._weak -= len(self.evidence) - len(kept)
            self.evidence = kept
            return sig.label
        if sig.tier.value == "weak":  # hints (NCCL WARN spam): a budget of their own
            if self._weak >= MAX_WEAK_EVIDENCE:
                return ""
            self._weak += 1
        if sig.label == "rendezvous-stuck":
            self.stuck_warnings += 1
        self.evidence.append((at, line, self.last_step))
        return sig.label

    def _take_context(self, buf: bytes, at: int, end: int, base: int) -> None:
        """The lines after an OOM (XLA's BufferAssignment stats: Total memory, Temp) as evidence."""
        stop = min(end, at + _OOM_CONTEXT)
        if at >= stop:
            return
        for raw in buf[at:stop].split(b"\n")[: self._context_left]:
            if len(self.evidence) >= MAX_EVIDENCE_LINES or at + len(raw) >= stop:
                return  # a partial line (the buffer ends): the next region takes it whole
            self._context_left -= 1
            line = strip_ansi(raw.decode("utf-8", "replace")).rstrip()
            if line.strip() and (not self.evidence or self.evidence[-1][0] < base + at):
                self.evidence.append((base + at, line[:_EVIDENCE_WIDTH], self.last_step))
            at += len(raw) + 1

    def _take_signal(self, kind: SignalKind, line: str) -> bool:
        line = strip_ansi(line).strip()
        if kind is SignalKind.UNKNOWN_FLAG:
            m = UNKNOWN_FLAG_RE.search(line)
            if m is None or self.unknown_flag is not None:
                return False
            self.unknown_flag = rejected_flag(m)
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

    def _update_tail(self, *regions: tuple[bytes, int, int, int]) -> None:
        """Append this feed's last non-noise lines, walking back from its end."""
        found: list[tuple[int, str]] = []
        budget = _TAIL_SCAN
        for buf, start, end, base in reversed(regions):
            pos = end
            while pos > start and len(found) < TAIL_LINES:
                if budget <= 0:  # say that noise hides older lines rather than splice them on
                    self.tail.clear()
                    self._tail_at.clear()
                    at = found[-1][0] if found else base + pos
                    self._append_tail([(at, _NOISE_MARK), *found[::-1]])
                    return
                line_start = max(buf.rfind(b"\n", start, pos - 1) + 1, start)
                budget -= pos - line_start
                cut = min(pos, line_start + _MAX_TAIL_LINE)
                if NOISE_BYTES_RE.search(buf, line_start, cut) is None:
                    raw = buf[line_start:cut]
                    if cut < pos and buf[cut] not in _WORD_ENDS:  # no word cut short: the prefix of
                        split = _LAST_WORD.search(raw)  # a secret would pass the masker
                        raw = raw[: split.start() + 1] if split else b""
                    line = raw.decode("utf-8", "replace").rstrip()
                    if cut < pos:  # the bytes not shown, the line's newline not counted
                        more = pos - (buf[pos - 1 : pos] == b"\n") - line_start - len(raw)
                        line += f"{' ' if line else ''}[... {more} more bytes]"
                    if line.strip():
                        found.append((base + line_start, strip_ansi(line)))
                pos = line_start
        self._append_tail(found[::-1])

    def _append_tail(self, lines: list[tuple[int, str]]) -> None:
        for at, line in lines:
            self._tail_at.append(at)
            self.tail.append(line)


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


def _lines_with_once(buf: bytes, start: int, end: int, wanted: _Needles) -> list[_Hit]:
    """_lines_with's answer, in its order, from one pass for all needles: the automaton finds
    the lines holding any needle (window by window, so a line full of needles costs bounded
    memory), then each such line is searched for each needle."""
    if not wanted or start >= end:
        return []
    automaton = _automaton(tuple(needle for needle, _ in wanted))
    overlap = max(len(needle) for needle, _ in wanted) - 1  # a needle may straddle windows
    view = memoryview(buf)
    out: list[_Hit] = []
    pos, line_end = start, -1
    while pos < end:
        stop = min(end, pos + _WINDOW)
        for _, found_at, _ in automaton.find_matches_as_indexes(view[pos : min(end, stop + overlap)]):
            at = pos + found_at
            if at >= stop:  # the next window's
                break
            if at < line_end:  # a second needle on a line already searched
                continue
            line_start = buf.rfind(b"\n", start, at) + 1 or start
            line_end = buf.find(b"\n", at, end)
            line_end = end if line_end < 0 else line_end
            # _lines_with goes block by block, each needle in turn: its order within a line
            found = sorted(
                ((first - start) // _BLOCK, i, kind)
                for i, (needle, kind) in enumerate(wanted)
                if (first := _find(buf, needle, line_start, line_end)) >= 0
            )
            out += [(line_start, line_end, kind) for _, _, kind in found]
        pos = max(stop, line_end)
    return out
