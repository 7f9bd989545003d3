"""A fatal line at the end of a big backlog is acted on before the watcher has read up to it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from pytest_xlatune.engine import watch as watch_module
from pytest_xlatune.engine.poller import Poller
from pytest_xlatune.engine.watch import Ahead, Watcher
from pytest_xlatune.launch.base import JobPhase, JobProgress, JobState, SubmittedJob
from pytest_xlatune.triage.hang import HangSettings
from tests.clock import Clock

STEP = b"0: completed step: 0, seconds: 1.0, Tokens/s/device: 10.0, loss: 2.0\n"
OOM = b"0: jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 9GiB\n"
# Small reads and looks (the watcher's are 8 MiB and 64 KiB), so a backlog of 3 reads is 48 KiB.
READ_CHUNK, LOOK_AHEAD = 16 << 10, 1 << 10
JUNK = (b"W external/xla/service/gpu/gpu_hlo_schedule.cc:789] no cost for fusion.12" + b" " * 26 + b"\n") * (
    (3 * READ_CHUNK) // 100
)
JOB = SubmittedJob("7", "/logs/7.log", "/jobs/7")


@pytest.fixture(autouse=True)
def small_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_module, "READ_CHUNK", READ_CHUNK)
    monkeypatch.setattr(watch_module, "LOOK_AHEAD", LOOK_AHEAD)


class Burst:
    """A running job whose log is `text`; a cancel ends it. Notes how far the watcher had read
    in order when the cancel came."""

    def __init__(self, text: bytes) -> None:
        self.text = text
        self.read_to = 0
        self.cancelled_at: int | None = None

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
        done = JobProgress(JobPhase.FINISHED, JobState.CANCELLED, None)
        running = JobProgress(JobPhase.RUNNING, JobState.RUNNING)
        return dict.fromkeys(job_ids, running if self.cancelled_at is None else done)

    def cancel(self, job_id: str) -> None:
        self.cancelled_at = self.read_to

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        chunk = self.text[offset:] if limit is None else self.text[offset : offset + limit]
        if offset == self.read_to and limit in (None, READ_CHUNK):  # not a look ahead
            self.read_to += len(chunk)
        return chunk


def watch(text: bytes) -> tuple[Burst, list[str]]:
    clock, said = Clock(), []
    launcher = Burst(text)
    watcher = Watcher(
        launcher,
        Poller(launcher, 1.0, clock=clock),
        10,
        1.0,
        clock,
        clock.sleep,  # type: ignore[arg-type]
        said.append,
        HangSettings(),
    )
    seen = watcher.watch("burst", JOB)
    assert len(seen.log.steps) == 1 and seen.log.last_step == 0  # the whole log was still read
    return launcher, said


def test_an_oom_after_a_burst_is_cancelled_before_the_backlog_is_read() -> None:
    launcher, said = watch(STEP + JUNK + OOM)
    assert launcher.cancelled_at is not None and launcher.cancelled_at <= READ_CHUNK
    assert "job 7: oom on sight: cancelling" in said


def test_what_the_job_writes_after_the_first_look_is_followed() -> None:
    clock = Clock()

    class Growing(Burst):  # each read in order takes 0.6 s; after the first, an OOM amid junk
        def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
            if offset == self.read_to and limit == READ_CHUNK:
                clock.now += 0.6
                if offset == READ_CHUNK:
                    self.text += JUNK[: 3 * LOOK_AHEAD] + OOM + JUNK[: 2 * LOOK_AHEAD]
            return super().read_log(job, offset, limit, ended=ended)

    launcher = Growing(STEP + JUNK)
    watcher = Watcher(
        launcher,
        Poller(launcher, 1.0, clock=clock),
        10,
        1.0,
        clock,
        clock.sleep,  # type: ignore[arg-type]
        lambda text: None,
        HangSettings(),
    )
    looks: list[int] = []
    look = watcher._look_ahead

    def counted(*args: Any) -> Ahead | None:
        looks.append(1)
        return look(*args)

    watcher._look_ahead = counted  # type: ignore[method-assign]
    watcher.watch("burst", JOB)
    assert len(looks) >= 2 and launcher.cancelled_at is not None and launcher.cancelled_at < len(STEP + JUNK)


def test_a_harmless_end_is_no_reason_to_cancel() -> None:
    launcher, said = watch(STEP + JUNK + b"NCCL WARN MSCCL++: Feature not enabled\n" + JUNK[: 2 * LOOK_AHEAD])
    assert launcher.cancelled_at == len(launcher.text)  # later, for the silence (no step for 120 s)
    assert not [line for line in said if "on sight" in line]
