"""A stop signal inside the submit-and-record window: the job is recorded, then the signal acts,
and the session's cancel finds, cancels and records the job (issue 12's SIGTERM race)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_xlatune.cell.values import Cell, ClusterSlot, Parallelism, Profile
from pytest_xlatune.engine.stopsignals import StopSignals, deferred
from pytest_xlatune.engine.sweep import Sweep
from pytest_xlatune.launch.base import JobPhase, JobProgress, JobRequest, SubmittedJob
from pytest_xlatune.plan.expand import expand
from pytest_xlatune.store import ResultStore
from tests.clock import Clock

NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


@pytest.fixture
def stop_signals() -> Iterator[None]:
    """SIGTERM/SIGHUP as the plugin sets them for a session; this process's handlers afterwards."""
    saved = {n: signal.getsignal(n) for n in NAMES}
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    installed = StopSignals()
    installed.install()
    try:
        yield
    finally:
        installed.restore()
        for number, handler in saved.items():
            signal.signal(number, handler)  # type: ignore[arg-type]


class Launcher:
    """Jobs that never end; `submit` can send a signal to this process as sbatch returns. Only
    what a sweep calls before watching its first job."""

    name = "signalled"

    def __init__(self, signal_in_submit: int | None = None) -> None:
        self.signal_in_submit = signal_in_submit
        self.submitted: list[str] = []
        self.cancelled: list[str] = []

    def submit(self, request: JobRequest) -> SubmittedJob:
        job_id = str(100 + len(self.submitted) + 1)
        self.submitted.append(job_id)  # the scheduler has the job now
        if self.signal_in_submit is not None:
            os.kill(os.getpid(), self.signal_in_submit)  # before the id reaches the session
        return SubmittedJob(job_id, f"/logs/{job_id}.log", f"/jobs/{job_id}")

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
        return {j: JobProgress(JobPhase.RUNNING, "RUNNING") for j in job_ids}

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)

    def find_submission(self, mark: str, job_name: str, since: float) -> SubmittedJob | None:
        return None  # the scheduler knows only the jobs `submit` returned

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        return b""  # none written yet (the cancel looks whether the job trained)

    def unusable_nodes(self) -> list[tuple[str, str]]:
        return []  # (the sweep stops before it watches, reads or re-attaches anything)


class SignalledStore(ResultStore):
    """The signal arrives while the `submitted` record is written (its fsync), as it did under load
    to a test that sent SIGTERM the moment it saw the record."""

    def __init__(self, path: Path, number: int) -> None:
        super().__init__(path)
        self.number = number

    def append(self, event: str, **payload: Any) -> None:
        super().append(event, **payload)
        if event == "submitted":
            os.kill(os.getpid(), self.number)


def sweep(tmp_path: Path, launcher: Launcher, store: ResultStore | None = None) -> Sweep:
    clock = Clock()  # the cancel's wait for the jobs' final states takes no time
    cell = Cell(
        path=Path("c.yml"),
        model_tag="m",
        slot=ClusterSlot(nodes=1),
        parallelism=Parallelism((("FSDP", 8),)),
        baseline_repeats=1,
        profiles=(Profile("p", 2, ("--xla_a=1",)),),
    )
    return Sweep(
        cell=cell,
        specs=expand(cell),
        store=store or ResultStore(tmp_path / "s.jsonl"),
        launcher=launcher,
        nodelist="node01",
        poll_interval=0.01,
        sleep=clock.sleep,
        clock=clock,
    )


def records(store: ResultStore, event: str) -> list[str]:
    return [str(e["job_id"]) for e in store.events() if e["event"] == event]


@pytest.mark.parametrize("number", list(NAMES), ids=list(NAMES.values()))
def test_a_signal_as_the_scheduler_returns_the_job_id_acts_after_the_record(
    tmp_path: Path, stop_signals: None, number: int
) -> None:
    launcher = Launcher(signal_in_submit=number)
    run = sweep(tmp_path, launcher)
    with pytest.raises(KeyboardInterrupt):
        run.run(run.specs[0])
    assert records(run.store, "submitted") == ["101"]  # the job the scheduler knows is stored
    run.cancel_all()  # what the session's end does after an interrupt
    assert launcher.cancelled == ["101"]
    assert records(run.store, "cancelled") == ["101"]
    assert run.store.pending_submissions() == {}  # the rerun submits it again, never twice


class CtrlCAgainWhileCancelling(Launcher):
    """A second Ctrl-C arrives as the scheduler takes the cancel."""

    def cancel(self, job_id: str) -> None:
        super().cancel(job_id)
        os.kill(os.getpid(), signal.SIGINT)


def test_a_second_ctrl_c_while_cancelling_waits_for_the_cancelled_record(tmp_path: Path, stop_signals: None) -> None:
    launcher = CtrlCAgainWhileCancelling(signal_in_submit=signal.SIGINT)
    run = sweep(tmp_path, launcher)
    with pytest.raises(KeyboardInterrupt):
        run.run(run.specs[0])
    with pytest.raises(KeyboardInterrupt):  # acted on once the cancel is recorded
        run.cancel_all()
    assert launcher.cancelled == ["101"] and records(run.store, "cancelled") == ["101"]
    assert run.store.pending_submissions() == {}


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_while_the_submitted_record_is_written_still_gets_the_job_cancelled(
    tmp_path: Path, stop_signals: None, number: int
) -> None:
    launcher = Launcher()
    run = sweep(tmp_path, launcher, SignalledStore(tmp_path / "s.jsonl", number))
    with pytest.raises(KeyboardInterrupt, match=f"{NAMES[number]} received"):
        run.run(run.specs[0])
    run.cancel_all()
    assert launcher.cancelled == ["101"] and records(run.store, "cancelled") == ["101"]


def test_deferred_holds_a_signal_to_the_end_of_the_block_and_restores_the_handlers(stop_signals: None) -> None:
    before = {n: signal.getsignal(n) for n in NAMES}
    reached = False
    with pytest.raises(KeyboardInterrupt, match="SIGTERM received"), deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)  # a second one: the first decides
        reached = True
    assert reached
    # StopSignals ignores further SIGTERM/SIGHUP for the clean-up; SIGINT is Python's again.
    assert signal.getsignal(signal.SIGINT) is before[signal.SIGINT]
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)  # outside a block: at once
