"""Submissions an earlier session began and never recorded the job of: found by their mark.

A submission is recorded in two steps (store.py): `submitting` with a fresh mark, then the
scheduler call (the job carries the mark: Slurm's job comment), then `submitted` with the job
id. Signals wait between the two (stopsignals.deferred), a `kill -9` does not: its rerun finds
such a job here, before anything is submitted, and re-attaches to it instead of running the
item twice.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import records
from ..launch.base import Launcher, LauncherError
from ..launch.preflight import PreflightError
from ..store import ResultStore


def recover_submissions(store: ResultStore, launcher: Launcher, report: Callable[[str], None]) -> int:
    """Record the job of each unconfirmed submission (or that it made none); return how many jobs
    were found. PreflightError when the scheduler cannot say: the run must not be submitted again."""
    found = 0
    for intent in store.unconfirmed_submissions():
        mark, item = str(intent["mark"]), str(intent.get("item") or intent["key"])
        try:
            job = launcher.find_submission(mark, str(intent["job_name"]), float(intent.get("time", 0)))
        except LauncherError as error:
            raise PreflightError(
                f"{store.path}: the session before was killed while submitting {item}'s job "
                f"(mark {mark}), and the scheduler cannot say whether it took it: {error}; "
                "rerun once it answers (nothing is submitted until then, so it never runs twice)"
            ) from None
        if job is None or job.job_id in store.noted_cancelled:
            # none started, or the session before cancelled it itself (its record failed)
            store.write(records.Unsubmitted(key=str(intent["key"]), item=item, mark=mark))
            continue
        store.write(
            records.Submitted(
                key=str(intent["key"]),
                item=item,
                job_id=job.job_id,
                log_path=job.log_path,
                job_dir=job.job_dir,
                handle=job.handle,
                mark=mark,
                recovered=True,
            )
        )
        report(
            f"{item}: found job {job.job_id}, which the session before submitted as it was "
            "killed (by its mark); its item re-attaches to it"
        )
        found += 1
    return found
