"""Watch one job to its end: incremental log tail, cancel on sight, hang detection, outage stop,
and the adaptive sweep's early stop (a judge asked on each new step)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import XlatuneError
from ..evidence.inert import COMPILED_LINE
from ..launch.base import JobPhase, JobProgress, JobState, Launcher, LauncherError, SubmittedJob
from ..triage.diagnosis import Evidence, diagnose
from ..triage.hang import HangDetector, HangPhase, HangSettings
from ..triage.logs import StepLog
from ..triage.playbook import DEFAULT_PLAYBOOK, Playbook, Remedy
from ..triage.signatures import FailureClass
from .poller import Poller

_COMPILED = COMPILED_LINE.encode()


Judge = Callable[["Watched"], str]


class SweepStopped(XlatuneError):
    """A stop trigger fired; carries the one-line reason (the STOP message is built from it)."""

    def __init__(self, reason: str, failing_nodes: tuple[str, ...] = (), recovery: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.failing_nodes = failing_nodes
        self.recovery = recovery


LOG_READS_PER_POLL = 2
# At most this much of a log is read per look, so a job that writes GBs between two looks
# costs bounded memory; the watcher reads on without sleeping until it has caught up.
READ_CHUNK = 8 << 20
# While reads come back full (the watcher is behind, e.g. after a GB burst of output), the newest
# LOOK_AHEAD bytes of the log are also looked at once per read period: a fatal line at the end
# of the backlog is acted on at once, not after the backlog is ingested.
LOOK_AHEAD = 64 << 10


def log_end(launcher: Launcher, job: SubmittedJob, offset: int) -> int:
    """Where the log ends now, within LOOK_AHEAD // 2 (it holds `offset` bytes at least), from
    one-byte reads (a launcher has no size call): about 2 log2(backlog / READ_CHUNK) + 8 of them."""
    low, step = offset, READ_CHUNK  # the log holds at least `low` bytes
    while launcher.read_log(job, low + step - 1, 1):
        low, step = low + step, step * 2
    high = low + step  # it holds fewer than `high`
    while high - low > LOOK_AHEAD // 2:
        middle = (low + high) // 2
        low, high = (middle, high) if launcher.read_log(job, middle - 1, 1) else (low, middle)
    return low


@dataclass
class Watched:
    """What watching a job saw, for triage. Mutable on purpose: an accumulator with one owner,
    `Watcher.watch`, which fills it in as the job runs (the log grows, the progress, hang phase and
    times change on every poll) and hands it over once the job has ended; nothing changes it after."""

    log: StepLog
    progress: JobProgress
    cancelled_for: str = ""  # "" | "unknown_flag" | "hang" | "stopped_early" | a failure class
    stop_reason: str = ""  # why the adaptive sweep stopped it early ("" = it was not)
    hang_phase: HangPhase | None = None
    compiled: bool = False  # the job said its train step is compiled (evidence/inert.COMPILED_LINE)
    started_at: float | None = None  # the poller's first RUNNING answer
    ended_at: float | None = None  # the poller's first finished answer (or when we stopped watching)


@dataclass(frozen=True)
class Ahead:
    """The look ahead's own StepLog, the log offset it has read to, and whether it is behind."""

    log: StepLog
    offset: int
    behind: bool = False


@dataclass
class Watcher:
    """Polls through the shared poller and reads only the new bytes of the log each interval."""

    launcher: Launcher
    poller: Poller
    steps: int
    interval: float
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    report: Callable[[str], None]
    hang: HangSettings
    playbook: Playbook = DEFAULT_PLAYBOOK
    controller_down_limit_s: float = 15 * 60.0
    warn: Callable[[str], None] | None = None  # incidents (default: report)
    _unsent_cancel: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.warn = self.warn or self.report
        # The playbook's controller_unreachable row says how long to wait before asking again
        # (5 min by default): that is the longest the poller backs off after failed queries.
        wait = self.playbook.rule(FailureClass.CONTROLLER_UNREACHABLE).wait_s
        self.poller.max_backoff = max(wait, self.interval)

    def _warn(self, text: str) -> None:
        (self.warn or self.report)(text)

    def watch(self, name: str, job: SubmittedJob, judge: Judge | None = None) -> Watched:
        """Follow `job` to its end; `judge(seen)` is asked on every new step while it runs and
        returns why to stop it early ("" = let it run): it is cancelled and watched no further."""
        seen = Watched(StepLog(), JobProgress(JobPhase.PENDING, JobState.UNKNOWN))
        detector = HangDetector(self.hang)
        offset, last_reported, was_running, last = 0, -1, False, b""
        self._unsent_cancel = False
        fresh_since: float | None = None  # since when Slurm has answered without a break
        # The log is read LOG_READS_PER_POLL times per poll interval (reads are cheap and not
        # scheduler calls), so a fatal line is acted on within half an interval; the ticks are
        # drift-free, so every other one finds the poller's answer stale and asks Slurm again.
        tick, period = self.clock(), self.interval / LOG_READS_PER_POLL
        look_ahead_at, ahead = tick, None
        while True:
            progress = self.poller.status(job.job_id)  # asks Slurm at most once per interval
            seen.progress = progress
            self._check_controller()
            # At the end, one last read that may not be skipped (ended=True): a launcher that
            # looks for its log file only every few seconds must look now, else a job that
            # trained would be judged on an empty log. Reads are bounded (READ_CHUNK).
            ended = progress.phase is JobPhase.FINISHED
            chunk = self.launcher.read_log(job, offset, READ_CHUNK, ended=ended)
            offset += len(chunk)
            now = self.clock()
            new_steps = seen.log.feed(chunk)
            just_compiled = (
                not seen.compiled
                and (  # the line may be split between two reads
                    _COMPILED in chunk or _COMPILED in last + chunk[: len(_COMPILED)]
                )
            )
            seen.compiled = seen.compiled or just_compiled
            last = chunk[-len(_COMPILED) :]
            if ended:
                while len(chunk) == READ_CHUNK:  # the rest of a big log, chunk by chunk
                    chunk = self.launcher.read_log(job, offset, READ_CHUNK, ended=True)
                    offset += len(chunk)
                    seen.log.feed(chunk)
                seen.log.flush()
                return self._timed(job, seen)
            if self.poller.down_since is not None:
                fresh_since = None
            elif fresh_since is None:
                fresh_since = now
            if self._unsent_cancel and fresh_since is not None:
                self._send_cancel(job)  # the controller answers again: ask again
            if progress.phase is JobPhase.RUNNING and not was_running:
                detector.running(now)
                was_running = True
            detector.update(
                new_steps,
                now,
                saw_memstats=seen.log.saw_memstats,
                stuck_warnings=seen.log.stuck_warnings,
                unstuck_warnings=seen.log.unstuck_warnings,
            )
            if chunk and not seen.cancelled_for:
                self._cancel_on_sight(job, seen)
                if (
                    (new_steps or just_compiled)
                    and judge is not None
                    and not seen.cancelled_for
                    and progress.phase is JobPhase.RUNNING
                    and (reason := judge(seen))
                ):
                    self.report(f"{name} job {job.job_id}: stopping early: {reason}")
                    seen.stop_reason = reason
                    self._cancel(job, seen, "stopped_early")
                if seen.cancelled_for and not self._unsent_cancel and self._never_retried(seen.cancelled_for):
                    # Decided (an unknown flag fails the item, an OOM xfails it, whatever the
                    # job does next): do not wait another poll for Slurm to report the cancel.
                    # What it wrote meanwhile (an OOM's memory figures) still counts. A cancel
                    # the controller did not take is sent again below until the job ends.
                    seen.log.feed(self.launcher.read_log(job, offset, READ_CHUNK, ended=True))
                    seen.progress = JobProgress(JobPhase.FINISHED, JobState.CANCELLED, None)
                    seen.log.flush()
                    return self._timed(job, seen)
            # Silence counts only while Slurm answers: after an outage slurmctld may call a job
            # RUNNING that ended meanwhile, until the job's completion reaches it.
            trusted = fresh_since is not None and now - fresh_since > detector.threshold_s()
            phase = detector.check(now, self._running(progress)) if trusted else None
            if phase is not None and not seen.cancelled_for:
                self._warn(
                    f"{name} job {job.job_id}: no new step for "
                    f"{detector.silent_s(now) or 0:.0f} s ({phase.value}): cancelling"
                )
                seen.hang_phase = phase
                self._cancel(job, seen, "hang")
            if seen.log.last_step is not None and seen.log.last_step != last_reported:
                last_reported = seen.log.last_step
                latest = seen.log.steps[last_reported].tokens_per_s
                self.report(
                    f"{name} job {job.job_id} {progress.state.value} step {last_reported + 1}/"
                    f"{self.steps}" + (f", {latest:.1f} TGS" if latest is not None else "")
                )
            if len(chunk) == READ_CHUNK:  # more is waiting: read on at once
                if not seen.cancelled_for and self.clock() >= look_ahead_at:
                    look_ahead_at = self.clock() + period
                    ahead = self._look_ahead(job, offset, seen, ahead)
                continue
            tick += period
            if tick <= self.clock():  # this round took longer than a period: skip the missed ticks
                tick = self.clock() + period
            self.sleep(tick - self.clock())

    def _timed(self, job: SubmittedJob, seen: Watched) -> Watched:
        """Note when the job ran, as the poller saw it (a job cancelled on sight: until now)."""
        started, ended = self.poller.ran(job.job_id)
        seen.ended_at = ended if ended is not None else self.clock()
        seen.started_at = started if started is not None else seen.ended_at
        return seen

    def _never_retried(self, why: str) -> bool:
        if why in ("unknown_flag", "stopped_early"):
            return True
        try:
            action = self.playbook.rule(FailureClass(why)).action
        except ValueError:  # not a playbook class: let the job end and triage decide
            return False
        return action in (Remedy.FAIL_ITEM, Remedy.XFAIL_ITEM)

    @staticmethod
    def _running(progress: JobProgress) -> bool:
        """Whether silence can mean a hang: the job's processes run. COMPLETING is Slurm's
        teardown after they ended (it lasts until slurmctld gives up on a dead slurmd)."""
        return progress.phase is JobPhase.RUNNING and progress.state is not JobState.COMPLETING

    def _look_ahead(self, job: SubmittedJob, offset: int, seen: Watched, ahead: Ahead | None) -> Ahead | None:
        """Cancel on sight on the log's newest lines, before the watcher has read up to them: a
        second StepLog follows the log from its end as of the first look (one read per look; from
        the end again when it falls a READ_CHUNK behind). The job's StepLog still reads every
        byte in order, and triage reads that one."""
        if ahead is None or ahead.behind:
            end = log_end(self.launcher, job, offset)  # the log ends before end + LOOK_AHEAD // 2
            if end - offset <= READ_CHUNK:
                return None  # the next read gets there
            start = end - LOOK_AHEAD // 2
            first = self.launcher.read_log(job, start, LOOK_AHEAD).find(b"\n")  # whole lines only
            ahead = Ahead(StepLog(), start + first + 1 if first >= 0 else end)
            ahead.log.last_step = seen.log.last_step  # past step 0, no unknown flag is looked for
        if ahead.offset <= offset:
            return None  # the watcher has caught up with it
        chunk = self.launcher.read_log(job, ahead.offset, READ_CHUNK)
        ahead.log.feed(chunk)
        self._cancel_on_sight(job, seen, ahead.log)
        return Ahead(ahead.log, ahead.offset + len(chunk), behind=len(chunk) == READ_CHUNK)

    def _cancel_on_sight(self, job: SubmittedJob, seen: Watched, log: StepLog | None = None) -> None:
        """Cancel at once on a line the playbook says the job cannot recover from (an unknown
        flag, a coordination timeout, a GPU runtime error …): do not wait for a time limit.
        `log`: what to look at, when not the job's StepLog (the look ahead's)."""
        log = log or seen.log
        if log.unknown_flag:
            self._cancel(job, seen, "unknown_flag")
            return
        diagnosis = diagnose(
            Evidence(
                last_step=log.last_step,
                expected_steps=self.steps,
                exit_code=None,
                log_text=log.triage_text(),
                scheduler_state=JobState.RUNNING,
            )
        )
        if diagnosis.line and self.playbook.cancel_on_sight(diagnosis.failure):
            self._warn(f"job {job.job_id}: {diagnosis.failure.value} on sight: cancelling")
            self._cancel(job, seen, diagnosis.failure.value)

    def _cancel(self, job: SubmittedJob, seen: Watched, why: str) -> None:
        seen.cancelled_for = why
        self._send_cancel(job)

    def _send_cancel(self, job: SubmittedJob) -> None:
        """scancel; while the controller does not answer, warn and ask again next interval."""
        try:
            self.launcher.cancel(job.job_id)
        except LauncherError as error:
            self._warn(f"job {job.job_id}: cancel failed ({error}); trying again")
            self._unsent_cancel = True
        else:
            self._unsent_cancel = False

    def _check_controller(self) -> None:
        down = self.poller.down_since
        if down is not None and self.poller.clock() - down > self.controller_down_limit_s:
            raise SweepStopped(
                f"the Slurm controller has not answered for "
                f"{(self.poller.clock() - down) / 60:.0f} min "
                f"(limit {self.controller_down_limit_s / 60:.0f} min)"
            )
