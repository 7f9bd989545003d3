"""One poller per sweep: asks about ALL unfinished jobs in one call per interval, with backoff."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ..launch.base import JobPhase, JobProgress, JobRequest, JobState, Launcher, LauncherError, SubmittedJob
from ..slurm.parsers import CONTROLLER_DOWN
from .stopsignals import deferred

PENDING = JobProgress(JobPhase.PENDING, JobState.UNKNOWN)


class Poller:
    """Caches the last answer; a failed query is a warning and a later retry, never a crash."""

    def __init__(
        self,
        launcher: Launcher,
        interval: float,
        *,
        max_backoff: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        warn: Callable[[str], None] = lambda text: None,
    ) -> None:
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
        self._ran: dict[str, tuple[float | None, float | None]] = {}  # first RUNNING, finished
        self._next_poll = -math.inf

    def track(self, job_id: str) -> None:
        if job_id not in self._tracked:
            self._tracked.add(job_id)
            self._next_poll = -math.inf  # a new job: ask at the next status() call

    def forget(self, job_id: str) -> None:
        self._tracked.discard(job_id)
        self._known.pop(job_id, None)
        self._ran.pop(job_id, None)

    def ran(self, job_id: str) -> tuple[float | None, float | None]:
        """When an answer first said the job ran and when one first said it had finished (None:
        not seen). A job seen finished but never running started at the finish (a lower bound)."""
        return self._ran.get(job_id, (None, None))

    def finished(self, job_id: str) -> bool:
        """Whether the last answer said this job had ended."""
        known = self._known.get(job_id)
        return known is not None and known.phase is JobPhase.FINISHED

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
            backoff = min(self.interval * 2**self.failures, self.max_backoff)
            self.warn(f"job poll failed ({error}); retrying in {round(backoff, 1):g} s")
            self._next_poll = now + backoff
            return
        finally:
            self.calls += 1
        self.failures = 0
        self.down_since = None
        self._known.update(answer)
        for job_id, progress in answer.items():
            started, ended = self._ran.get(job_id, (None, None))
            if progress.phase is JobPhase.RUNNING and started is None:
                started = now
            if progress.phase is JobPhase.FINISHED and ended is None:
                ended = now
                started = now if started is None else started
            self._ran[job_id] = (started, ended)
        # An interval after the call started (a steady cadence), but never sooner than half an
        # interval after a slow answer arrived: otherwise every caller would ask again at once.
        self._next_poll = max(now + self.interval, self.clock() + self.interval / 2)


def _already_started(launcher: Launcher, request: JobRequest, since: float) -> SubmittedJob | None:
    """The job an earlier attempt of this marked request started after all (LauncherError when
    the scheduler cannot say yet: the attempt waits, it does not submit blind)."""
    if not request.mark:
        return None
    return launcher.find_submission(request.mark, request.job_name, since)


class ControllerDown(LauncherError):
    """The controller did not take a submission for the whole outage limit."""


def submit_through_outage(
    poller: Poller,
    request: JobRequest,
    sleep: Callable[[float], None],
    limit_s: float,
    record: Callable[[SubmittedJob], None] = lambda job: None,
) -> SubmittedJob:
    """Submit and `record` the job; while the controller does not answer, back off like the
    poller (warning each time) and try again, until it has been down for `limit_s` (then
    ControllerDown goes up). Any other submission error goes up at once.

    Each submission and its record are one critical section: a SIGINT/SIGTERM/SIGHUP arriving
    meanwhile is acted on right after the record, so no job is known to the scheduler alone
    (the waits between attempts stay interruptible). A marked request is looked up by its mark
    before each new attempt: an sbatch whose answer was lost may have started the job."""
    down_since: float | None = None
    failures = 0
    started = time.time()
    while True:
        try:
            with deferred():
                job = _already_started(poller.launcher, request, started) if failures else None
                job = job or poller.launcher.submit(request)
                record(job)
            return job
        except LauncherError as error:
            now = poller.clock()
            down_since = now if down_since is None else down_since
            if not CONTROLLER_DOWN.search(str(error)):
                raise
            if now - down_since >= limit_s:
                raise ControllerDown(str(error)) from None
            failures += 1
            backoff = min(poller.interval * 2**failures, poller.max_backoff, limit_s - (now - down_since))
            poller.warn(f"{request.job_name}: submission failed ({error}); retrying in {round(backoff, 1):g} s")
            sleep(backoff)
