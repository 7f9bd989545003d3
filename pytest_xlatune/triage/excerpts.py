"""Facts read off the lines around a failure: memory figures, failing fusion, exception, rank hosts."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..shareable import cut_at_word
from .lines import strip_ansi
from .signatures import EXCEPTION_LINE, harmless

LINE_MAX = 300  # the longest line a reason quotes
RANK_RE = re.compile(r"^\s*(\d+):\s")  # srun -l
_RANK_HOST_RES = (
    re.compile(r"^\s*(?P<rank>\d+):\s*NODE_EXIT host=(?P<host>\S+)"),
    re.compile(r"srun: error: (?P<host>[^\s:]+): tasks? (?P<rank>\d+):"),
)
_EXC_RE = re.compile(EXCEPTION_LINE)
# The line naming the fusion a GPU compile failed on, most telling first.
_FUSION_RES = tuple(
    re.compile(p)
    for p in (
        r"when compiling fusion \S+",
        r"Entry function '[^']+'",
        r"[Cc]ompiling fusion \S+",
        r"(?<![\w/])\w*fusion(?:[._]\d+)+\b",
    )
)
# The TPU runtime writes a size without the B: `Attempting to allocate 15.65G`.
_SIZE = r"(?:\d+(?:\.\d+)?\s*[KMGTP]?i?B|\d+ bytes|\d+(?:\.\d+)?[KMGTP]\b)"
# XLA's BufferAssignment `Out of memory while trying to allocate N bytes`, the BFC allocator's
# `ran out of memory trying to allocate 2.00GiB`, PjRt's `Failed to allocate request for 176.00MiB
# (184549376B) on device ordinal 0` and the TPU's `Error allocating device buffer: Attempting to
# allocate 15.65G. That was not possible.`
_REQUESTED_RE = re.compile(rf"(?:trying to allocate|allocate(?: request for)?)\s+(?P<v>{_SIZE})")
_TOTAL_RE = re.compile(rf"Total memory:\s*(?P<v>{_SIZE})")
_TEMP_RE = re.compile(rf"\b[Tt]emp(?:\s+allocation)?:\s*(?P<v>{_SIZE})")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


@dataclass(frozen=True)
class MemoryFigures:
    """The sizes an OOM printed, as XLA printed them."""

    requested: str | None = None  # "8.00GiB" or "8589934592 bytes"
    total_memory: str | None = None  # `Total memory:`
    temp: str | None = None  # `Temp:` / `preallocated temp allocation:`

    @property
    def requested_bytes(self) -> int | None:
        return to_bytes(self.requested) if self.requested else None

    def __str__(self) -> str:
        parts = []
        if self.requested:
            size = self.requested
            if size.endswith(" bytes") and self.requested_bytes is not None:
                size = f"{self.requested_bytes / (1 << 30):.2f}GiB"
            parts.append(f"allocating {size}")
        if self.total_memory:
            parts.append(f"Total memory {self.total_memory}")
        if self.temp:
            parts.append(f"Temp {self.temp}")
        return ", ".join(parts)


def memory_figures(lines: list[str], start: int) -> MemoryFigures:
    """The requested allocation, `Total memory` and `Temp` printed with (or after) an OOM line."""

    def first(pattern: re.Pattern[str]) -> str | None:
        for line in lines[start:] + lines[:start]:
            m = pattern.search(line)
            if m:
                return re.sub(r"\s+", " ", m.group("v"))
        return None

    return MemoryFigures(first(_REQUESTED_RE), first(_TOTAL_RE), first(_TEMP_RE))


def fusion_line(lines: list[str], start: int) -> str | None:
    """The line naming the fusion the compiler failed on, around the failure line."""
    near = lines[start : start + 10] + lines[max(0, start - 3) : start][::-1]
    for pattern in _FUSION_RES:
        for line in near:
            if pattern.search(line) and not harmless(line):
                return line.strip().lstrip("- ").strip()
    return None


def exception_line(lines: list[str], start: int, rank: int | None) -> str | None:
    """The exception line that ends the traceback starting at `start` (same srun task)."""
    for line in lines[start + 1 : start + 400]:
        m = RANK_RE.match(line)
        if rank is not None and (m is None or int(m.group(1)) != rank):
            continue
        body = line[m.end() :] if m else line
        if body[:1].isspace() or body.startswith("Traceback") or 'File "' in body:
            continue
        found = _EXC_RE.search(body.strip())
        if found:
            return body.strip()[found.start("exc") :]
    return None


def rank_hosts(text: str) -> dict[int, str]:
    """srun task → host, from NODE_EXIT and `srun: error: host: task N` lines (noise included)."""
    found: dict[int, str] = {}
    for line in strip_ansi(text).splitlines():
        for pattern in _RANK_HOST_RES:
            m = pattern.search(line)
            if m:
                found.setdefault(int(m.group("rank")), m.group("host"))
    return found


def to_bytes(size: str) -> int | None:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(?:([KMGTP]?)i?B|bytes|([KMGTP]))", size.strip())
    return int(float(m.group(1)) * _UNITS[m.group(2) or m.group(3) or ""]) if m else None


def quote(match: re.Match[str]) -> str:
    """The matched line; one too long to quote whole from the clause that holds the match on (the
    text after the last `: ` before it), so that the evidence is in the reason, not cut off."""
    line = match.string
    if len(line.strip()) <= LINE_MAX:
        return short(line)
    cut = line.rfind(": ", 0, match.start())
    return short("…" + line[cut + 2 if cut >= 0 else match.start() :])


def short(line: str) -> str:
    """The line stripped, cut to LINE_MAX characters at a word's end (shareable.cut_at_word)."""
    line = line.strip()
    return line if len(line) <= LINE_MAX else cut_at_word(line, LINE_MAX - 1).rstrip() + "…"
