"""Local job logs: created, never truncated; ids continue from the disk; no log through a link."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_xlatune.launch.base import JobRequest, LauncherError
from pytest_xlatune.launch.local import LocalLauncher

REQUEST = JobRequest("demo-baseline-default", "baseline", ())


def launcher(jobs_dir: Path, first: int = 1) -> LocalLauncher:
    # `python -m this` prints a poem and exits: a real, instant process.
    return LocalLauncher(jobs_dir, first, python=sys.executable, module="this")


def finish(run: LocalLauncher, job_id: str) -> None:
    run._processes[job_id].wait(timeout=120)


def test_an_emptied_store_does_not_reuse_the_ids_of_old_job_logs(tmp_path: Path) -> None:
    jobs = tmp_path / ".xlatune" / "cell" / "jobs"
    jobs.mkdir(parents=True)
    old = jobs / "7-demo-baseline-default.log"
    old.write_text("the log of job 7\n")
    run = launcher(jobs, first=1)  # the store says 0 jobs: it was emptied
    job = run.submit(REQUEST)
    finish(run, job.job_id)
    assert job.job_id == "8"
    assert old.read_text() == "the log of job 7\n"


def test_a_log_that_exists_is_never_truncated(tmp_path: Path) -> None:
    jobs = tmp_path / "s" / "c" / "jobs"
    run = launcher(jobs)
    jobs.mkdir(parents=True)
    (jobs / "1-demo-baseline-default.log").write_text("planted after the launcher started\n")
    job = run.submit(REQUEST)
    finish(run, job.job_id)
    assert job.job_id == "2"
    assert (jobs / "1-demo-baseline-default.log").read_text() == "planted after the launcher started\n"


def test_a_planted_log_link_is_refused_naming_it(tmp_path: Path) -> None:
    jobs = tmp_path / "s" / "c" / "jobs"
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    run = launcher(jobs)
    (tmp_path / "s" / "c").mkdir(parents=True)
    jobs.symlink_to(tmp_path, target_is_directory=True)  # the jobs dir itself is a link
    with pytest.raises(LauncherError) as refused:
        run.submit(REQUEST)
    assert f"{jobs}: is a symbolic link" in str(refused.value)
    assert target.read_text() == "keep me\n"


def test_a_dangling_link_where_the_next_log_goes_is_skipped_not_followed(tmp_path: Path) -> None:
    jobs = tmp_path / "s" / "c" / "jobs"
    jobs.mkdir(parents=True)
    target = tmp_path / "would-be-created.txt"
    run = launcher(jobs)
    (jobs / "1-demo-baseline-default.log").symlink_to(target)
    job = run.submit(REQUEST)
    finish(run, job.job_id)
    assert job.job_id == "2" and not target.exists()


def test_reports_exports_and_the_lock_respect_the_umask_and_replace_a_link(tmp_path: Path) -> None:
    import os
    import stat

    from pytest_xlatune.report.files import write_if_changed

    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    (tmp_path / "m-tuning.md").symlink_to(target)
    old = os.umask(0o022)
    try:
        written = write_if_changed(tmp_path / "m-tuning.md", "# report\n", "tuning report")
    finally:
        os.umask(old)
    assert written.changed and target.read_text() == "keep me\n"
    assert not (tmp_path / "m-tuning.md").is_symlink()
    assert stat.S_IMODE((tmp_path / "m-tuning.md").stat().st_mode) == 0o644
