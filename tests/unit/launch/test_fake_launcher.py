"""The plugin tests' in-process launcher (tests/fake_launcher.py) against the real local backend:
a played job writes the bytes the fake trainer's process writes and ends with its exit code."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from pytest_xlatune.launch.base import JobPhase, JobProgress, JobRequest
from pytest_xlatune.launch.local import LocalLauncher
from tests.conftest import TESTS_DIR
from tests.fake_launcher import PID, PlayedJob, PlayedLauncher

FAULT_AT = re.compile(rb"(fake_trainer: fault \w+ at )[0-9.]+")


def until_finished(launcher: LocalLauncher, job_id: str) -> JobProgress:
    deadline = time.monotonic() + 120  # an outer bound for a loaded machine, never a budget
    while time.monotonic() < deadline:
        progress = launcher.poll([job_id])[job_id]
        if progress.phase is JobPhase.FINISHED:
            return progress
        time.sleep(0.01)
    pytest.fail(f"job {job_id} did not finish")


def run_both(tmp_path: Path, request: JobRequest, until: bytes = b"") -> list[tuple[bytes, JobProgress]]:
    """The request on the real and on the played backend: (log, final progress) each; with
    `until`, the job is cancelled once its log shows those bytes."""
    seen = []
    for kind in (LocalLauncher, PlayedLauncher):
        launcher = kind(tmp_path / kind.__name__ / "jobs", 1, python=sys.executable, module="fake_trainer")
        job = launcher.submit(request)
        if until:
            deadline = time.monotonic() + 120
            while until not in Path(job.log_path).read_bytes() and time.monotonic() < deadline:
                launcher.poll([job.job_id])
                time.sleep(0.01)
            launcher.cancel(job.job_id)
        progress = until_finished(launcher, job.job_id)
        assert (job.handle == str(PID)) is (kind is PlayedLauncher)  # played: no process at all
        log = Path(job.log_path).read_bytes().replace(str(launcher.jobs_dir).encode(), b"<jobs>")
        seen.append((FAULT_AT.sub(rb"\1T", log), progress))
    return seen


@pytest.fixture(autouse=True)
def trainer_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR))


@pytest.mark.parametrize(
    ("flags", "passthrough"),
    [
        ((), ("steps=5",)),
        (("--xla_fake_tgs=1100", "--xla_fake_loss_drift=0.01"), ("steps=4", "fake_noise=0.1", "fake_format=no_tokens")),
        (("--xla_fake_fail=crash",), ("fake_long_line=40", "fake_log_bytes=2500")),
        (("--xla_fake_fail=sigterm_after_last",), ("steps=3", "fake_step_sleep=0.01")),
        (("--xla_gpu_enable_obsolete_thing=true",), ()),
        (("--xla_fake_fail=coord_timeout",), ()),
    ],
)
def test_a_played_job_writes_what_the_process_writes_and_exits_alike(
    tmp_path: Path, flags: tuple[str, ...], passthrough: tuple[str, ...]
) -> None:
    request = JobRequest("demo-a-default", "a", passthrough, xla_flags=flags)
    (real_log, real), (played_log, played) = run_both(tmp_path, request)
    assert played_log == real_log
    assert b"JOB_ID=1\n" in played_log and played_log.count(b"\n") > 4  # the header and output
    assert (played.state, played.exit_code) == (real.state, real.exit_code)


def test_a_played_job_cancelled_on_a_fatal_line_ends_as_sigterm_ends_the_process(tmp_path: Path) -> None:
    request = JobRequest("demo-a-default", "a", (), xla_flags=("--xla_fake_fail=oom",))
    (real_log, real), (played_log, played) = run_both(tmp_path, request, until=b"Temp: 9.50GiB\n")
    assert played_log == real_log
    assert played.exit_code == real.exit_code == 143


def test_a_job_of_another_interpreter_runs_as_a_process(tmp_path: Path) -> None:
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    launcher = PlayedLauncher(tmp_path / "jobs", 1, python=str(wrapper), module="fake_trainer")
    job = launcher.submit(JobRequest("demo-a-default", "a", ("steps=2",)))
    assert not isinstance(launcher._processes[job.job_id], PlayedJob) and job.handle != str(PID)
    assert until_finished(launcher, job.job_id).exit_code == 0
