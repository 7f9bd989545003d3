"""A submission's mark: a session killed between the scheduler's answer and the `submitted`
record, or an sbatch whose answer was lost, never makes a run go twice (engine/recover.py,
poller.submit_through_outage, the local launcher's look-up by its log header and environment)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pytest_xlatune.engine.poller import Poller, submit_through_outage
from pytest_xlatune.engine.recover import recover_submissions
from pytest_xlatune.engine.sweep import Sweep
from pytest_xlatune.launch.base import JobRequest, LauncherError, SubmittedJob
from pytest_xlatune.launch.local import MARK_ENV, LocalLauncher
from pytest_xlatune.launch.preflight import PreflightError
from pytest_xlatune.plan.expand import expand
from pytest_xlatune.store import ResultStore
from tests.unit.engine.test_poller import Clock, ScriptedLauncher, cell, request_for

TESTS_DIR = Path(__file__).resolve().parents[2]


class Killed(BaseException):
    """What `kill -9` does to the session, at the point it is raised."""


class MarkedLauncher(ScriptedLauncher):
    """The scheduler remembers each job's mark (Slurm: its comment) and can be asked for it."""

    def __init__(self, lose_answers: int = 0, unreachable: bool = False) -> None:
        super().__init__(polls_to_finish=2)
        self.marks: dict[str, str] = {}  # mark → job id
        self.lose_answers = lose_answers
        self.unreachable = unreachable
        self.lookups = 0

    def submit(self, request: JobRequest) -> SubmittedJob:
        job = super().submit(request)
        self.marks[request.mark] = job.job_id
        if self.lose_answers:  # the job is queued, but sbatch's answer never arrives
            self.lose_answers -= 1
            raise LauncherError("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation")
        return job

    def find_submission(self, mark: str, job_name: str, since: float) -> SubmittedJob | None:
        self.lookups += 1
        if self.unreachable:
            raise LauncherError("squeue: error: Unable to contact slurm controller (connect failure)")
        job_id = self.marks.get(mark)
        return None if job_id is None else SubmittedJob(job_id, f"/logs/{job_id}.log", f"/jobs/{job_id}")


def test_a_submission_whose_answer_was_lost_is_found_by_its_mark_not_submitted_again() -> None:
    clock, warned = Clock(), []
    launcher = MarkedLauncher(lose_answers=1)
    request = JobRequest(**{**request_for().__dict__, "mark": "xlatune-00000000000000aa"})
    job = submit_through_outage(Poller(launcher, 5, clock=clock, warn=warned.append), request, clock.sleep, limit_s=900)
    assert job.job_id == "101" and len(launcher.submitted) == 1 and launcher.lookups == 1
    assert "Socket timed out" in warned[0]


def test_an_unmarked_request_is_resubmitted_after_a_lost_answer_as_before() -> None:
    clock = Clock()
    launcher = MarkedLauncher(lose_answers=1)
    job = submit_through_outage(Poller(launcher, 5, clock=clock), request_for(), clock.sleep, limit_s=900)
    assert job.job_id == "102" and launcher.lookups == 0


def sweep_on(store: ResultStore, launcher: MarkedLauncher, clock: Clock) -> Sweep:
    specs = expand(cell())
    sweep = Sweep(
        cell=cell(),
        specs=specs,
        store=store,
        launcher=launcher,
        nodelist="n",
        poll_interval=5,
        fixed_protocol=True,
        sleep=clock.sleep,
        clock=clock,
    )
    sweep.set_upcoming(specs)
    return sweep


class KilledAtTheRecord(ResultStore):
    """The session dies after the scheduler took the job, before its `submitted` record."""

    def append(self, event: str, **payload: object) -> None:
        if event == "submitted":
            raise Killed
        super().append(event, **payload)


def test_a_rerun_after_a_kill_between_sbatch_and_the_record_reattaches_to_the_job(tmp_path: Path) -> None:
    clock, launcher = Clock(), MarkedLauncher()
    first = sweep_on(KilledAtTheRecord(tmp_path / "s.jsonl"), launcher, clock)
    with pytest.raises(Killed):
        first.run(first.specs[0])
    assert len(launcher.submitted) == 1
    store = ResultStore(tmp_path / "s.jsonl")
    assert [r["item"] for r in store.unconfirmed_submissions()] == ["wave1::baseline[default]"]
    said: list[str] = []
    assert recover_submissions(store, launcher, said.append) == 1
    assert said == [
        "wave1::baseline[default]: found job 101, which the session before submitted as "
        "it was killed (by its mark); its item re-attaches to it"
    ]
    second = sweep_on(store, launcher, clock)
    second.adopt_orphans()
    outcome = second.run(second.specs[0])
    assert outcome.result.job_id == "101" and len(launcher.submitted) == 1  # never twice
    assert store.unconfirmed_submissions() == []
    recovered = [e for e in store.events() if e["event"] == "submitted"]
    assert [(e["job_id"], e["recovered"]) for e in recovered] == [("101", True)]


def test_a_job_the_session_before_cancelled_itself_is_not_reattached_and_its_run_goes_again(tmp_path: Path) -> None:
    """Its `submitted` record failed (a full disk), so that session cancelled it and noted the
    cancel in the lock file: found by its mark, it would only fail as cancelled."""
    store = ResultStore(tmp_path / "s.jsonl")
    store.append(
        "submitting", key="k", item="wave2::a[default]", job_name="m-a-default", mark="xlatune-00000000000000cc"
    )
    launcher = MarkedLauncher()
    launcher.marks["xlatune-00000000000000cc"] = "3760"
    store.noted_cancelled = frozenset({"3760"})  # what acquire() read from the previous owner's note
    said: list[str] = []
    assert recover_submissions(store, launcher, said.append) == 0 and said == []
    assert store.pending_submissions() == {} and [e["event"] for e in store.events()][-1] == "unsubmitted"


def test_a_mark_the_scheduler_never_saw_is_settled_and_the_run_goes_again(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "s.jsonl")
    store.append(
        "submitting", key="k", item="wave2::a[default]", job_name="m-a-default", mark="xlatune-00000000000000bb"
    )
    launcher = MarkedLauncher()
    assert recover_submissions(store, launcher, print) == 0
    assert store.unconfirmed_submissions() == [] and store.pending_submissions() == {}
    assert [e["event"] for e in store.events()] == ["submitting", "unsubmitted"]
    assert recover_submissions(store, launcher, print) == 0 and launcher.lookups == 1  # asked once


def test_a_scheduler_that_cannot_answer_stops_the_rerun_before_it_submits(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "s.jsonl")
    store.append(
        "submitting", key="k", item="wave2::a[default]", job_name="m-a-default", mark="xlatune-00000000000000cc"
    )
    with pytest.raises(
        PreflightError,
        match=r"killed while submitting wave2::a\[default\]'s job "
        r"\(mark xlatune-00000000000000cc\).*Unable to contact slurm controller.*"
        r"rerun once it answers",
    ):
        recover_submissions(store, MarkedLauncher(unreachable=True), print)
    assert len(store.unconfirmed_submissions()) == 1  # asked again next time


def test_the_local_launcher_finds_a_marked_job_by_its_log_header_and_running_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR))
    launcher = LocalLauncher(tmp_path, 1, module="fake_trainer")
    request = JobRequest(
        job_name="m-a-default",
        profile="a",
        mark="xlatune-00000000000000dd",
        passthrough=("steps=3000", "fake_step_sleep=0.2"),
    )  # runs until close() cancels it
    started = launcher.submit(request)
    try:
        # Popen returns once exec closed its pipe, a moment before the kernel fills in the new
        # program's environment: a rerun comes long after, so wait for that state (never a sleep).
        environ = Path(f"/proc/{started.handle}/environ")
        deadline = time.monotonic() + 120
        while f"{MARK_ENV}={request.mark}".encode() not in environ.read_bytes().split(b"\0"):
            assert time.monotonic() < deadline, "the job's process never showed its environment"
            time.sleep(0.01)
        rerun = LocalLauncher(tmp_path, 2, module="fake_trainer")  # a new session: no child of its own
        found = rerun.find_submission(request.mark, request.job_name, time.time())
        assert found is not None and found.job_id == started.job_id
        assert found.log_path == started.log_path and found.handle == started.handle
        assert rerun.poll([found.job_id])[found.job_id].state == "RUNNING"
        assert rerun.find_submission("xlatune-00000000000000ee", request.job_name, time.time()) is None
    finally:
        launcher.close()
    assert rerun.poll([found.job_id])[found.job_id].phase.value == "finished"  # cancelled: seen ended


def test_a_local_job_killed_before_its_process_started_is_not_found(tmp_path: Path) -> None:
    """The session died between the log header and the process: nothing ran, the run goes again."""
    mark = "xlatune-00000000000000ff"
    (tmp_path / "3-m-a-default.log").write_text(
        f'JOB_ID=3\nJOB_NAME=m-a-default\nXLATUNE_SUBMISSION={mark}\nXLA_FLAGS=\nPASSTHROUGH_ARGS="steps=15"\n'
    )
    assert LocalLauncher(tmp_path, 4, module="fake_trainer").find_submission(mark, "m-a-default", time.time()) is None
    with (tmp_path / "3-m-a-default.log").open("a") as log:
        log.write("completed step: 0, seconds: 1.0, Tokens/s/device: 1000.0, loss: 1.0\n")  # it ran, and ended
    found = LocalLauncher(tmp_path, 4, module="fake_trainer").find_submission(mark, "m-a-default", time.time())
    assert found is not None and found.job_id == "3" and found.handle == ""
