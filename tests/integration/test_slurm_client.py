"""SlurmClient on the real cluster: exit codes from sacct and, without accounting, scontrol."""

from __future__ import annotations

import subprocess
import time

import pytest

from pytest_xlatune.slurm.client import SlurmClient
from pytest_xlatune.slurm.parsers import JobState
from pytest_xlatune.transport.base import LocalTransport
from tests.integration.fixtures_infra import unavailable

pytestmark = pytest.mark.slurm


def submit(command: str) -> str:
    return subprocess.run(["sbatch", "--parsable", "--nodelist=node04", "--nodes=1",
                           "--output=/dev/null", f"--wrap={command}"],
                          capture_output=True, text=True, check=True).stdout.strip()


def wait_finished(client: SlurmClient, job_ids: list[str]) -> dict:
    deadline = time.time() + 60
    while time.time() < deadline:
        statuses = client.poll(job_ids)
        if all(s.state.finished for s in statuses.values()) and len(statuses) == len(job_ids):
            return statuses
        time.sleep(0.5)
    raise AssertionError(f"jobs did not finish: {statuses}")


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
