"""SlurmClient on the real cluster: exit codes from sacct and, without accounting, scontrol."""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from pytest_xlatune.slurm.client import SlurmClient
from pytest_xlatune.slurm.parsers import JobState
from pytest_xlatune.transport.base import LocalTransport
from tests.integration.fixtures_infra import unavailable
from tests.integration.waits import wait_until

pytestmark = pytest.mark.slurm


def submit(command: str) -> str:
    return subprocess.run(
        ["sbatch", "--parsable", "--nodelist=node04", "--nodes=1", "--output=/dev/null", f"--wrap={command}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def wait_finished(client: SlurmClient, job_ids: list[str]) -> dict:
    def finished() -> dict | None:
        statuses = client.poll(job_ids)
        return statuses if len(statuses) == len(job_ids) and all(s.state.finished for s in statuses.values()) else None

    return wait_until(f"jobs {job_ids} to finish", finished, every=0.5)


@pytest.mark.parametrize("accounting", [False, True], ids=["scontrol-fallback", "sacct"])
def test_exit_codes_of_finished_jobs(local_slurm, accounting: bool) -> None:
    if accounting and not local_slurm.accounting:
        unavailable("the cluster runs without accounting (scripts/test.sh starts it with --accounting)")
    client = SlurmClient(LocalTransport(), accounting=accounting)
    ok, bad = submit("true"), submit("exit 3")
    statuses = wait_finished(client, [ok, bad])
    assert statuses[ok].state is JobState.COMPLETED and statuses[ok].exit_code == 0
    assert statuses[bad].state is JobState.FAILED and statuses[bad].exit_code == 3
    # One squeue call, one call for the exit codes of the finished jobs, and with accounting one
    # `scontrol show job` per FAILED job (slurmdbd stores an exit code >= 128 modulo 128).
    before = client.calls
    client.poll([ok, bad])
    assert client.calls - before == (3 if accounting else 2)


class NoSqueue(LocalTransport):
    """slurmctld has forgotten every job (MinJobAge passed): squeue lists none."""

    def run(self, argv, **kwargs):  # type: ignore[no-untyped-def,override]
        if argv[0] == "squeue":
            return super().run(["true"], **kwargs)
        return super().run(argv, **kwargs)


def test_a_submission_mark_is_found_in_squeue_and_once_forgotten_there_in_sacct(local_slurm) -> None:
    if not local_slurm.accounting:
        unavailable("the cluster runs without accounting (scripts/test.sh starts it with --accounting)")
    mark = f"xlatune-{uuid.uuid4().hex[:16]}"
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 60))
    job = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--nodelist=node04",
            "--nodes=1",
            f"--comment={mark}",
            "--output=/dev/null",
            "--wrap=true",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert SlurmClient(LocalTransport()).jobs_marked(mark, since) == [job]
    wait_finished(SlurmClient(LocalTransport()), [job])
    # slurmdbd keeps the comment (AccountingStoreFlags=job_comment, scripts/local-slurm.sh); it
    # takes the record from slurmctld's agent queue a moment after the job ends.
    wait_until(
        "sacct to list the marked job", lambda: SlurmClient(NoSqueue()).jobs_marked(mark, since) == [job], every=0.5
    )
    assert SlurmClient(NoSqueue()).jobs_marked(f"xlatune-{uuid.uuid4().hex[:16]}", since) == []
