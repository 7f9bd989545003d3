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


def test_a_relative_interpreter_runs_from_the_directory_it_was_given_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--xlatune-image=venv/bin/python`: pre-flight probed it from here, every job failed with
    'No such file or directory' (a job runs in its own dir)."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)  # as a venv's python is: a link to the base one
    monkeypatch.chdir(tmp_path)
    run = LocalLauncher(tmp_path / "s" / "c" / "jobs", 1, python="venv/bin/python", module="this")
    job = run.submit(REQUEST)
    finish(run, job.job_id)
    assert run._processes[job.job_id].returncode == 0
    assert "Beautiful is better than ugly" in Path(job.log_path).read_text()
    assert run.python == str(venv / "python")  # absolute, the link kept (it is what finds a venv)


def test_a_cell_relative_backend_python_keeps_the_venv_link(tmp_path: Path) -> None:
    """backend.python relative to the cell resolved the link: the base interpreter, without the venv."""
    from pytest_xlatune.cell.load import load_cell
    from pytest_xlatune.settings import Settings

    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    cell = tmp_path / "cells" / "c.yml"
    cell.parent.mkdir()
    cell.write_text("model_tag: c\nnodes: 1\nparallelism: FSDP=8\nbackend: {kind: local, python: ../venv/bin/python}\n")
    settings = Settings(tmp_path, tmp_path, False, False, 1.0, sys.executable)
    assert settings.python_for(load_cell(cell), "") == str(venv / "python")
