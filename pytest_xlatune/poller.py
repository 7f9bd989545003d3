"""One poller per sweep: asks about ALL unfinished jobs in one call per interval, with backoff."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from .launch.base import JobPhase, JobProgress, Launcher, LauncherError

PENDING = JobProgress(JobPhase.PENDING, "UNKNOWN")


class Poller:
    """Caches the last answer; a failed query is a warning and a later retry, never a crash."""

    def __init__(self, launcher: Launcher, interval: float, *, max_backoff: float = 300.0,
                 clock: Callable[[], float] = time.monotonic,
                 warn: Callable[[str], None] = lambda text: None) -> None:
        self.launcher = launcher
        self.interval = interval
        self.max_backoff = max_backoff
        self.clock = clock
        self.warn = warn
        self.calls = 0
        self.failures = 0
        self.down_since: float | None = None
        self._tracked: set[str] = set()
        self._known: dict[str, JobProgress] = {}
        self._next_poll = -math.inf

    def track(self, job_id: str) -> None:
        if job_id not in self._tracked:
            self._tracked.add(job_id)
            self._next_poll = -math.inf  # a new job: ask at the next status() call

    def forget(self, job_id: str) -> None:
        self._tracked.discard(job_id)
        self._known.pop(job_id, None)

    @property
    def tracked(self) -> frozenset[str]:
        return frozenset(self._tracked)

    def status(self, job_id: str) -> JobProgress:
        """The job's latest known progress, polling every tracked job if the answer is stale."""
        self.track(job_id)
        if self.clock() >= self._next_poll:
            self._refresh()
        return self._known.get(job_id, PENDING)

    def _refresh(self) -> None:
        now = self.clock()
        try:
            answer = self.launcher.poll(sorted(self._tracked))
        except LauncherError as error:
            self.failures += 1
            self.down_since = self.down_since if self.down_since is not None else now
            backoff = min(self.interval * 2 ** self.failures, self.max_backoff)
            self.warn(f"job poll failed ({error}); retrying in {round(backoff, 1):g} s")
            self._next_poll = now + backoff
            return
        finally:
            self.calls += 1
        self.failures = 0
        self.down_since = None
        self._known.update(answer)
        self._next_poll = now + self.interval
