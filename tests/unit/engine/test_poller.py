"""Poller and Sweep with a scripted launcher: one query per interval, backoff, a full queue."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from pytest_xlatune.cell.values import Cell, ClusterSlot, Parallelism, Profile
from pytest_xlatune.engine.poller import ControllerDown, Poller, submit_through_outage
from pytest_xlatune.engine.sweep import Sweep
from pytest_xlatune.engine.watch import SweepStopped
from pytest_xlatune.launch.base import (
    JobPhase,
    JobProgress,
    JobRequest,
    JobState,
    Launcher,
    LauncherError,
    SubmittedJob,
)
from pytest_xlatune.plan.expand import expand, run_key
from pytest_xlatune.plan.request import job_request
from pytest_xlatune.store import ResultStore
from tests.clock import Clock


class ScriptedLauncher:
    """Jobs finish after `polls_to_finish` polls; logs hold 15 MaxText step lines."""

    name = "scripted"

    def __init__(self, polls_to_finish: int = 3, fail_polls: int = 0) -> None:
        self.submitted: list[JobRequest] = []
        self.poll_calls: list[list[str]] = []
        self.cancelled: list[str] = []
        self.polls_to_finish = polls_to_finish
        self.fail_polls = fail_polls
        self._seen: dict[str, int] = {}

    def submit(self, request: JobRequest) -> SubmittedJob:
        self.submitted.append(request)
        job_id = str(100 + len(self.submitted))
        self._seen[job_id] = 0
        return SubmittedJob(job_id, f"/logs/{job_id}.log", f"/jobs/{job_id}")

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
        self.poll_calls.append(list(job_ids))
        if self.fail_polls:
            self.fail_polls -= 1
            raise LauncherError("squeue: slurm_load_jobs error: Unable to contact slurm controller")
        answer = {}
        for job_id in job_ids:
            self._seen[job_id] = self._seen.get(job_id, 0) + 1
            done = self._seen[job_id] >= self.polls_to_finish
            answer[job_id] = (
                JobProgress(JobPhase.FINISHED, "COMPLETED", 0) if done else JobProgress(JobPhase.RUNNING, "RUNNING")
            )
        return answer

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)

    def reattach(self, job: SubmittedJob) -> bool:
        return True

    def find_submission(self, mark: str, job_name: str, since: float) -> SubmittedJob | None:
        return None  # no submission of this launcher ever fails half-way

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        text = "".join(
            f"completed step: {s}, seconds: 1.000, TFLOP/s/device: 1.0, "
            f"Tokens/s/device: {1000 + int(job.job_id)}.0, total_weights: 1, loss: 1.0\n"
            for s in range(15)
        ).encode()
        return text[offset:]

    def artifacts(self, job: SubmittedJob) -> dict[str, str]:
        return {}

    def unusable_nodes(self) -> list[tuple[str, str]]:
        return []

    def resume_node(self, node: str) -> None:
        raise AssertionError("no node to resume")

    def close(self) -> None:
        pass


def test_one_query_per_interval_covers_every_tracked_job() -> None:
    clock = Clock()
    launcher = ScriptedLauncher(polls_to_finish=99)
    poller = Poller(launcher, interval=30, clock=clock)
    for job_id in ("1", "2", "3", "4", "5", "6", "7", "8"):
        poller.track(job_id)
    for _ in range(10):  # ten status() calls inside one interval
        for job_id in ("1", "5", "8"):
            poller.status(job_id)
    assert launcher.poll_calls == [["1", "2", "3", "4", "5", "6", "7", "8"]]
    clock.now += 30
    poller.status("3")
    assert len(launcher.poll_calls) == 2


def test_failed_query_warns_and_backs_off_then_recovers() -> None:
    clock = Clock()
    warnings: list[str] = []
    launcher = ScriptedLauncher(polls_to_finish=1, fail_polls=3)
    poller = Poller(launcher, interval=10, clock=clock, warn=warnings.append)
    waits = []
    while poller.status("1").phase is not JobPhase.FINISHED:
        before = len(launcher.poll_calls)
        while len(launcher.poll_calls) == before:
            clock.now += 1
            poller.status("1")
        waits.append(clock.now)
    assert len(warnings) == 3 and "Unable to contact slurm controller" in warnings[0]
    assert "retrying in 20 s" in warnings[0] and "retrying in 40 s" in warnings[1]
    assert poller.failures == 0 and poller.down_since is None


def cell() -> Cell:
    return Cell(
        path=Path("c.yml"),
        model_tag="m",
        slot=ClusterSlot(nodes=1),
        parallelism=Parallelism((("FSDP", 8),)),
        baseline_repeats=1,
        profiles=tuple(Profile(f"p{i}", 2, (f"--xla_a={i}",)) for i in range(4)),
    )


# The queue fill is the fixed protocol's: an adaptive sweep decides each next run after the last
# one (policy max_in_flight = 1), so it queues none ahead.
def test_queue_is_kept_full_and_nothing_is_submitted_twice(tmp_path: Path) -> None:
    clock = Clock()
    launcher = ScriptedLauncher(polls_to_finish=3)
    specs = expand(cell())
    sweep = Sweep(
        cell=cell(),
        specs=specs,
        store=ResultStore(tmp_path / "s.jsonl"),
        launcher=launcher,
        nodelist="node[01-04]",
        poll_interval=5,
        queue_depth=2,
        fixed_protocol=True,
        sleep=clock.sleep,
        clock=clock,
    )
    sweep.set_upcoming(specs)
    first = sweep.run(specs[0])
    # While the first job ran, the next two were already in the queue.
    assert [r.profile for r in launcher.submitted] == ["baseline", "evidence", "p0"]
    assert first.result.tgs == 1101.0
    for spec in specs[1:]:
        if not spec.needs_resolution:  # the winner's evidence run waits for results: not queued
            sweep.run(spec)
    assert [r.profile for r in launcher.submitted] == ["baseline", "evidence", "p0", "p1", "p2", "p3"]
    # Every poll asked about all unfinished jobs at once.
    assert max(len(call) for call in launcher.poll_calls) == 3
    assert launcher.cancelled == []


class ShortLogs(ScriptedLauncher):
    """The logs of jobs other than the first stop at step 10 of 15: they have not trained."""

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        text = super().read_log(job, 0)
        if job.job_id != "101":
            text = b"".join(text.splitlines(keepends=True)[:10])
        return text[offset:]


class FirstJobOnly(ShortLogs):
    """Only the first job ends; the queued ones stay running."""

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
        answer = super().poll(job_ids)
        return {j: p if j == "101" else JobProgress(JobPhase.RUNNING, "RUNNING") for j, p in answer.items()}


def interrupted_after_the_first_job(
    tmp_path: Path, launcher: ScriptedLauncher, store: ResultStore | None = None
) -> ResultStore:
    """A sweep that queued two jobs ahead ran its first item, then the session's end cancels."""
    store = store if store is not None else ResultStore(tmp_path / "s.jsonl")
    sweep = fixed_sweep(store, launcher, Clock())
    sweep.run(sweep.specs[0])
    sweep.cancel_all()
    return store


def fixed_sweep(
    store: ResultStore, launcher: Launcher, clock: Clock, nodelist: str = "n", queue_depth: int = 2
) -> Sweep:
    """The fixed protocol's sweep of cell() on `launcher` (two jobs queued ahead), its time `clock`'s."""
    specs = expand(cell())
    sweep = Sweep(
        cell=cell(),
        specs=specs,
        store=store,
        launcher=launcher,
        nodelist=nodelist,
        poll_interval=5,
        queue_depth=queue_depth,
        fixed_protocol=True,
        sleep=clock.sleep,
        clock=clock,
    )
    sweep.set_upcoming(specs)
    return sweep


def test_cancel_all_cancels_only_this_sessions_unfinished_jobs(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "s.jsonl")
    store.append("submitted", key="other", item="x", job_id="7", log_path="", job_dir="")
    launcher = FirstJobOnly(polls_to_finish=3)
    interrupted_after_the_first_job(tmp_path, launcher, store)
    assert launcher.cancelled == ["102", "103"]  # the two queued jobs, never job 7
    assert set(store.pending_submissions()) == {"other"}


def test_cancel_all_leaves_a_queued_job_that_already_ended_to_the_rerun(tmp_path: Path) -> None:
    """Its result is in its log: cancelling it would record `cancelled` and throw the run away."""
    launcher = ScriptedLauncher(polls_to_finish=3)  # the queued jobs end with the first one
    store = interrupted_after_the_first_job(tmp_path, launcher)
    assert launcher.cancelled == []
    assert {r["job_id"] for r in store.pending_submissions().values()} == {"102", "103"}


class EndsAsTheCancelComes(FirstJobOnly):
    """Job 102 completes after the last poll and before the cancel reaches it (Slurm then keeps
    it COMPLETED); job 103 is cancelled while it runs."""

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
        answer = super().poll(job_ids)
        after = {
            "102": JobProgress(JobPhase.FINISHED, JobState.COMPLETED, 0),
            "103": JobProgress(JobPhase.FINISHED, JobState.CANCELLED, 0),
        }
        return {j: after[j] if j in self.cancelled and j in after else p for j, p in answer.items()}


def test_a_job_that_completed_before_the_cancel_reached_it_is_left_to_the_rerun(tmp_path: Path) -> None:
    """It trained: recording it `cancelled` would throw its result away and run it again."""
    launcher = EndsAsTheCancelComes(polls_to_finish=3)
    store = interrupted_after_the_first_job(tmp_path, launcher)
    assert launcher.cancelled == ["102", "103"]
    assert [str(e["job_id"]) for e in store.events() if e["event"] == "cancelled"] == ["103"]
    assert {str(r["job_id"]) for r in store.pending_submissions().values()} == {"102"}  # re-attached by the rerun


def test_reattached_and_adopted_jobs_are_cancelled_on_interrupt(tmp_path: Path) -> None:
    """Jobs an earlier, killed session left queued are the sweep's own: an interrupt of the
    rerun cancels them too (never a job the store does not name)."""
    launcher = ShortLogs(polls_to_finish=99)
    specs = expand(cell())
    store = ResultStore(tmp_path / "s.jsonl")
    for number, spec in enumerate(specs[1:3], start=51):
        key = run_key(cell(), spec, "n", "")
        store.append(
            "submitted", key=key, item=spec.name, job_id=str(number), log_path=f"/logs/{number}.log", job_dir="/jobs"
        )
    sweep = fixed_sweep(store, launcher, Clock())
    sweep.adopt_orphans()
    sweep.cancel_all()
    assert launcher.cancelled == ["51", "52"]
    assert store.pending_submissions() == {}


class GpuErrorOnce(ScriptedLauncher):
    """The first job aborts with an HSA error before step 0; the rest train normally."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(polls_to_finish=3)
        self.clock = clock
        self.submitted_at: list[float] = []
        self.finished_101_at = -1.0

    def submit(self, request: JobRequest) -> SubmittedJob:
        self.submitted_at.append(self.clock.now)
        return super().submit(request)

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        if job.job_id == "101":
            return b"0: :0:rocdevice.cpp :2984: Aborting with error : HSA_STATUS_ERROR_EXCEPTION\n"[offset:]
        return super().read_log(job, offset)

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
        answer = super().poll(job_ids)
        if "101" in answer and answer["101"].phase is JobPhase.FINISHED:
            answer["101"] = JobProgress(JobPhase.FINISHED, "FAILED", 1)
            self.finished_101_at = self.clock.now
        return answer


def test_a_gpu_runtime_error_waits_the_rules_pause_before_the_retry(tmp_path: Path) -> None:
    clock = Clock()
    launcher = GpuErrorOnce(clock)
    warned: list[str] = []
    specs = expand(cell())
    sweep = Sweep(
        cell=cell(),
        specs=specs,
        store=ResultStore(tmp_path / "s.jsonl"),
        launcher=launcher,
        nodelist="n",
        poll_interval=5,
        sleep=clock.sleep,
        clock=clock,
        warn=warned.append,
    )
    outcome = sweep.run(specs[0])
    assert outcome.result.job_id == "102" and outcome.result.tgs == 1102.0
    pause = [line for line in warned if "before the retry" in line]
    assert len(pause) == 1 and pause[0].startswith("wave1::baseline[default]: waiting ")
    # Job 102 is submitted 90 s after job 101 was seen ending.
    waited = float(pause[0].split("waiting ")[1].split(" s")[0])
    assert 80 <= waited <= 90
    assert launcher.submitted_at[1] - launcher.finished_101_at >= 90


class ControllerAway(ScriptedLauncher):
    """sbatch fails `down` times as it does while slurmctld restarts, then works."""

    def __init__(
        self,
        down: int,
        error: str = "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
    ) -> None:
        super().__init__()
        self.down, self.error, self.attempts = down, error, 0

    def submit(self, request: JobRequest) -> SubmittedJob:
        self.attempts += 1
        if self.attempts <= self.down:
            raise LauncherError(self.error)
        return super().submit(request)


def request_for(spec_index: int = 0) -> JobRequest:
    return job_request(cell(), expand(cell())[spec_index])


def test_a_submission_waits_out_a_controller_restart_with_growing_pauses() -> None:
    clock, warned = Clock(), []
    launcher = ControllerAway(down=3)
    poller = Poller(launcher, 5, clock=clock, warn=warned.append)
    job = submit_through_outage(poller, request_for(), clock.sleep, limit_s=900)
    assert job.job_id == "101" and launcher.attempts == 4
    assert [line.rsplit("retrying in ", 1)[1] for line in warned] == ["10 s", "20 s", "40 s"]
    assert all("Unable to contact slurm controller" in line for line in warned)


def test_other_submission_errors_and_a_long_outage_are_not_retried() -> None:
    clock = Clock()
    refused = ControllerAway(down=1, error="sbatch: error: invalid partition specified: gpu")
    with pytest.raises(LauncherError, match="invalid partition"):
        submit_through_outage(Poller(refused, 5, clock=clock), request_for(), clock.sleep, 900)
    assert refused.attempts == 1
    away = ControllerAway(down=1000)
    with pytest.raises(ControllerDown, match="Unable to contact"):
        submit_through_outage(Poller(away, 5, max_backoff=300, clock=clock), request_for(), clock.sleep, limit_s=900)
    assert clock.now == 900 and away.attempts < 10  # backed off up to 300 s, then gave up


def test_a_sweep_stops_when_the_controller_stays_away_at_submission(tmp_path: Path) -> None:
    clock = Clock()
    specs = expand(cell())
    sweep = Sweep(
        cell=cell(),
        specs=specs,
        store=ResultStore(tmp_path / "s.jsonl"),
        launcher=ControllerAway(down=1000),
        nodelist="n",
        poll_interval=5,
        sleep=clock.sleep,
        clock=clock,
    )
    with pytest.raises(SweepStopped, match=r"did not take wave1::baseline.default.'s job for 15 min"):
        sweep.run(specs[0])


def test_a_slow_answer_is_not_asked_again_by_every_caller_at_once() -> None:
    clock = Clock()

    class Slow(ScriptedLauncher):
        def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
            clock.sleep(12)  # squeue over a slow link: longer than the 5 s interval
            return super().poll(job_ids)

    launcher = Slow(polls_to_finish=100)
    poller = Poller(launcher, 5, clock=clock)
    for job in ("1", "2", "3"):
        poller.track(job)
    for job in ("1", "2", "3"):
        poller.status(job)  # three watchers asking right after one another
    assert len(launcher.poll_calls) == 1
    clock.sleep(2.5)  # half an interval after the slow answer: stale again
    poller.status("1")
    assert len(launcher.poll_calls) == 2


def test_fast_answers_keep_a_steady_cadence_of_one_poll_per_interval() -> None:
    clock = Clock()
    launcher = ScriptedLauncher(polls_to_finish=100)
    poller = Poller(launcher, 5, clock=clock)
    for _ in range(40):  # a watcher reading the log twice per interval
        poller.status("1")
        clock.sleep(2.5)
    assert len(launcher.poll_calls) == 20


def test_the_watcher_reads_the_log_twice_per_poll_interval(tmp_path: Path) -> None:
    clock = Clock()

    class Counting(ScriptedLauncher):
        reads = 0

        def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
            self.reads += 1
            return b""  # nothing yet: a fatal line would be acted on at the next read

    launcher = Counting(polls_to_finish=6)
    specs = expand(cell())
    sweep = Sweep(
        cell=cell(),
        specs=specs,
        store=ResultStore(tmp_path / "s.jsonl"),
        launcher=launcher,
        nodelist="n",
        poll_interval=5,
        sleep=clock.sleep,
        clock=clock,
    )
    sweep.runner.watcher.watch("wave1::baseline[default]", launcher.submit(job_request(cell(), specs[0])))
    assert len(launcher.poll_calls) == 6 and launcher.reads == 11  # every 2.5 s, 25 s in all
    assert clock.now == 25


class UnknownFlagCancelFails(ScriptedLauncher):
    """The job's log shows XLA's unknown-flag abort; the first scancel finds no controller."""

    def __init__(self) -> None:
        super().__init__(polls_to_finish=4)
        self.cancel_attempts = 0

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        line = b"F1201 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: --xla_gpu_enable_obsolete_thing=true\n"
        return line[offset:]

    def cancel(self, job_id: str) -> None:
        self.cancel_attempts += 1
        if self.cancel_attempts == 1:
            raise LauncherError("scancel: error: Unable to contact slurm controller")
        super().cancel(job_id)


def test_an_unknown_flag_is_decided_at_the_cancel_only_once_the_cancel_was_taken(tmp_path: Path) -> None:
    clock, warned = Clock(), []
    launcher = UnknownFlagCancelFails()
    specs = expand(cell())
    sweep = Sweep(
        cell=cell(),
        specs=specs,
        store=ResultStore(tmp_path / "s.jsonl"),
        launcher=launcher,
        nodelist="n",
        poll_interval=5,
        sleep=clock.sleep,
        clock=clock,
        warn=warned.append,
    )
    job = launcher.submit(job_request(cell(), specs[0]))
    seen = sweep.runner.watcher.watch("wave1::baseline[default]", job)
    # The cancel was sent again, and the watch went on until Slurm reported the job's end.
    assert launcher.cancel_attempts == 2 and launcher.cancelled == ["101"]
    assert seen.progress.state == "COMPLETED" and seen.cancelled_for == "unknown_flag"
    assert any("cancel failed" in line for line in warned)


def test_a_job_that_trained_is_measured_when_only_the_final_read_finds_its_log(tmp_path: Path) -> None:
    """Issue 10's Ray-fallback race, at the watcher: a launcher that skips log look-ups inside its
    interval returned nothing while the job ran; the read at the job's end must be made with
    ended=True (which such a launcher may not skip), and the result is measured, not no_steps."""

    class LateLog(ScriptedLauncher):
        calls: ClassVar[list[bool]] = []

        def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
            self.calls.append(ended)
            return super().read_log(job, offset) if ended else b""

    clock = Clock()
    launcher = LateLog(polls_to_finish=3)
    specs = expand(cell())
    sweep = Sweep(
        cell=cell(),
        specs=specs,
        store=ResultStore(tmp_path / "s.jsonl"),
        launcher=launcher,
        nodelist="n",
        poll_interval=1,
        sleep=clock.sleep,
        clock=clock,
    )
    seen = sweep.runner.watcher.watch("wave1::baseline[default]", launcher.submit(job_request(cell(), specs[0])))
    assert launcher.calls[-1] is True and launcher.calls.count(True) == 1
    assert len(seen.log.steps) == 15 and seen.progress.state == "COMPLETED"


def test_a_big_log_is_read_in_bounded_chunks_and_read_to_its_end(tmp_path: Path) -> None:
    """20 MB of output between two looks: no read returns more than READ_CHUNK, every step of
    the log (the last ones after the junk) is still seen."""
    from pytest_xlatune.engine.watch import READ_CHUNK

    class Chatty(ScriptedLauncher):
        sizes: ClassVar[list[int]] = []

        def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
            steps = super().read_log(job, 0)
            text = steps[:500] + b"junk " * (4 << 20) + b"\n" + steps[500:]
            chunk = text[offset:] if limit is None else text[offset : offset + limit]
            self.sizes.append(len(chunk))
            return chunk

    clock = Clock()
    launcher = Chatty(polls_to_finish=2)
    specs = expand(cell())
    sweep = Sweep(
        cell=cell(),
        specs=specs,
        store=ResultStore(tmp_path / "s.jsonl"),
        launcher=launcher,
        nodelist="n",
        poll_interval=5,
        sleep=clock.sleep,
        clock=clock,
    )
    outcome = sweep.run(specs[0])
    assert max(launcher.sizes) == READ_CHUNK and sum(launcher.sizes) > 20 << 20
    assert outcome.result.step_count == 15 and outcome.result.tgs is not None
