"""Tell a hung training job from a slow one by its own step history and XLA's rendezvous-stuck
warnings (pure: `now` is passed in)."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from .lines import StepRecord


class HangPhase(Enum):
    """Where a job stopped making progress; each phase has its own likely cause (batch-sweep)."""

    BEFORE_MEMSTATS = "before_memstats"  # RCCL / IB init: transient, retried once
    BEFORE_STEP0 = "before_step0"  # after Memstats, in XLA compile: a silent OOM, never retried
    AFTER_STEP0 = "after_step0"  # a collective stuck mid-training: retried once


@dataclass(frozen=True)
class HangSettings:
    """How long silence may last: k × median step time after step 0, allowances before it."""

    k: float = 5.0
    floor_s: float = 120.0
    cap_s: float = 1800.0
    compile_allowance_s: float = 900.0  # Memstats → step 0 (XLA compile + first step)
    init_allowance_s: float = 900.0  # RUNNING → Memstats (container, preflight, RCCL init)

    def __post_init__(self) -> None:
        for name in ("k", "floor_s", "cap_s", "compile_allowance_s", "init_allowance_s"):
            if not 0 < getattr(self, name) < math.inf:  # inf: a hung job would never be seen
                raise ValueError(f"hang setting {name} must be a finite number > 0, got {getattr(self, name)!r}")
        if self.floor_s > self.cap_s:
            raise ValueError(f"hang setting floor_s ({self.floor_s:g}) is above cap_s ({self.cap_s:g})")

    def step_threshold(self, median_step_s: float) -> float:
        """The silence after a step that means a hang: k × median, clamped to [floor, cap]."""
        return min(self.cap_s, max(self.floor_s, self.k * median_step_s))


class HangDetector:
    """Fed the steps (and Memstats) of one job as they arrive; says when the silence is a hang.

    Progress is `completed step:` lines only, never log mtime: a hung job keeps printing
    (job-log-triage "Hang diagnosis").
    """

    def __init__(self, settings: HangSettings | None = None) -> None:
        self.settings = settings or HangSettings()
        self.started_at: float | None = None  # first time the scheduler said RUNNING
        self.memstats_at: float | None = None
        self._arrived: dict[int, float] = {}  # step → when it was first seen
        self._seconds: dict[int, float] = {}  # step → its own `seconds:` field
        self._last_at: float | None = None  # when the newest step arrived
        self._stuck_warnings = 0
        self._unstuck_warnings = 0
        self.stuck_at: float | None = None  # XLA said a rendezvous may be stuck, after the last progress

    def running(self, at: float) -> None:
        """The scheduler reports the job RUNNING (the first call counts)."""
        if self.started_at is None:
            self.started_at = at

    def memstats(self, at: float) -> None:
        """MaxText printed `Memstats` (parameters initialised, compile next)."""
        if self.memstats_at is None:
            self.memstats_at = at

    def step(self, step: int | StepRecord, at: float) -> None:
        """A `completed step:` line arrived at `at` (srun -l repeats are ignored)."""
        number = step.step if isinstance(step, StepRecord) else step
        if number in self._arrived:
            return
        self._arrived[number] = at
        self.stuck_at = None  # progress: an earlier rendezvous warning resolved itself
        if isinstance(step, StepRecord) and step.seconds is not None:
            self._seconds[number] = step.seconds
        self._last_at = at if self._last_at is None else max(self._last_at, at)

    def update(
        self,
        new_steps: Iterable[StepRecord],
        at: float,
        saw_memstats: bool = False,
        stuck_warnings: int = 0,
        unstuck_warnings: int = 0,
    ) -> None:
        """Take what one StepLog.feed returned, plus StepLog.saw_memstats,
        StepLog.stuck_warnings and StepLog.unstuck_warnings, as seen at `at`."""
        if saw_memstats:
            self.memstats(at)
        for record in new_steps:
            self.step(record, at)
        if stuck_warnings > self._stuck_warnings:
            self._stuck_warnings = stuck_warnings
            self.stuck(at)
        if unstuck_warnings > self._unstuck_warnings:  # XLA: "Warning above was a false-positive"
            self._unstuck_warnings = unstuck_warnings
            self.stuck_at = None

    def stuck(self, at: float) -> None:
        """XLA printed `This thread has been waiting for ... and may be stuck` at `at`."""
        if self.stuck_at is None:
            self.stuck_at = at

    @property
    def phase(self) -> HangPhase:
        """The phase the job is in now (and would hang in)."""
        if self._arrived:
            return HangPhase.AFTER_STEP0
        return HangPhase.BEFORE_STEP0 if self.memstats_at is not None else HangPhase.BEFORE_MEMSTATS

    def median_step_s(self) -> float | None:
        """Median step time, the first step (compile) left out once there are others."""
        steps = sorted(self._arrived)
        if self._seconds:
            timed = [self._seconds[s] for s in steps[1:] if s in self._seconds]
            return statistics.median(timed or [self._seconds[s] for s in steps if s in self._seconds])
        gaps = [self._arrived[b] - self._arrived[a] for a, b in itertools.pairwise(steps)]
        return statistics.median(gaps) if gaps else None

    def threshold_s(self) -> float:
        """How long the current phase may stay silent; the floor once XLA says a rendezvous is stuck
        and nothing progressed since (hang evidence before any allowance runs out)."""
        marks = [t for t in (self.started_at, self.memstats_at, self._last_at) if t is not None]
        if self.stuck_at is not None and (not marks or self.stuck_at >= max(marks)):
            return self.settings.floor_s
        phase = self.phase
        if phase is HangPhase.BEFORE_MEMSTATS:
            return self.settings.init_allowance_s
        if phase is HangPhase.BEFORE_STEP0:
            return self.settings.compile_allowance_s
        median = self.median_step_s()
        return self.settings.cap_s if median is None else self.settings.step_threshold(median)

    def silent_s(self, now: float) -> float | None:
        """Seconds since the last progress (start, Memstats, newest step); None before RUNNING."""
        marks = [t for t in (self.started_at, self.memstats_at, self._last_at) if t is not None]
        if self.started_at is None or not marks:
            return None
        return now - max(marks)

    def check(self, now: float, scheduler_running: bool) -> HangPhase | None:
        """The phase the job hangs in, or None while it progresses or is not RUNNING."""
        if not scheduler_running:
            return None  # pending, completing or gone: silence means nothing here
        self.running(now)
        silent = self.silent_s(now)
        if silent is None or silent <= self.threshold_s():
            return None
        return self.phase
