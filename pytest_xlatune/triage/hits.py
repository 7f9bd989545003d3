"""The log lines that match a failure signature (pure): noise, a traceback frame's source line
and XLA's withdrawn rendezvous warnings left out; triage/diagnosis.py ranks what is found."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .lines import has_step
from .signatures import (
    PROGRESS_COLLECTIVES,
    STUCK_RE,
    FailureClass,
    Signature,
    Tier,
    collectives_done,
    match_line,
)

__all__ = ["Hit", "find_hits", "first_weak"]

_FRAME_FILE = 'File "'


@dataclass(frozen=True)
class Hit:
    """A noise-free line that matched a signature, at its index among the kept lines."""

    index: int
    signature: Signature
    line: str
    match: re.Match[str]

    @property
    def failure(self) -> FailureClass:
        return self.signature.failure


def find_hits(lines: list[str], *, last_step: int | None = None) -> list[Hit]:
    """Every noise-free line that matches a signature, in log order (XLA's rendezvous warnings it
    later withdrew, `This thread is unstuck …`, left out)."""
    has_steps = any(has_step(line) for line in lines)
    # A watchdog that names its thousandth collective says the job trained, step lines or not.
    progressed = any(collectives_done(line) >= PROGRESS_COLLECTIVES for line in lines)
    steps_done = has_steps or last_step is not None or progressed
    after_step = not has_steps and last_step is not None  # a tail without step lines: all later
    hits: list[Hit] = []
    for index, line in enumerate(lines):
        if has_step(line):
            after_step = True
            continue
        if collectives_done(line) >= PROGRESS_COLLECTIVES:
            after_step = True  # this line and the ones after it come after training ran
        if index and _source_line(lines[index - 1], line):
            continue  # the source line of a traceback frame (`raise RuntimeError(f"NCCL error…")`)
        found = match_line(line, steps_done=steps_done, after_step=after_step)
        if found is not None:
            hits.append(Hit(index, found[0], line, found[1]))
    unstuck = [h.index for h in hits if h.signature.label == "rendezvous-unstuck"]
    if unstuck:
        hits = [
            h
            for h in hits
            if h.signature.label != "rendezvous-unstuck" and not (h.index < unstuck[-1] and STUCK_RE.search(h.line))
        ]
    return hits


def first_weak(hits: list[Hit]) -> Hit | None:
    """The first weak hit; for a crash by a signal, srun's report of it (it names the node) over the
    process's own words before it (Python's `Fatal Python error: Segmentation fault`)."""
    weak = next((h for h in hits if h.signature.tier is Tier.WEAK), None)
    if weak is not None and weak.signature.label == "task-signal" and not weak.match.groupdict().get("host"):
        return next((h for h in hits if h.signature.label == "task-signal" and h.match.groupdict().get("host")), weak)
    return weak


def _source_line(previous: str, line: str) -> bool:
    """Whether `line` is the source line printed under the frame `previous` (`  File "…", line 3`):
    indented deeper than the frame, after the same log prefix (srun `0: `, Ray `(pid=1) `). A frame
    without source (Ray, Cython) is followed directly by the exception line, indented no deeper."""
    at = previous.find(_FRAME_FILE)
    if at < 0 or _FRAME_FILE in line:
        return False
    prefix = previous[:at].rstrip()
    if not line.startswith(prefix):
        return True  # another task's line between a frame and its source: skipped, as before
    rest = line[len(prefix) :]
    return len(rest) - len(rest.lstrip()) > at - len(prefix)
