"""The Slurm argv builders and parsers against the real local cluster (scripts/local-slurm.sh)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_xlatune.slurm import JobState, JobStatus, NodeState, commands, parsers
from pytest_xlatune.transport.base import LocalTransport
from tests.integration.waits import wait_until

if TYPE_CHECKING:
    from tests.integration.fixtures_infra import LocalSlurm

pytestmark = pytest.mark.slurm

POLL = 0.3


class Cluster:
    """Submit, poll and cancel through the builders + LocalTransport; cancels its own jobs at the end."""

    def __init__(self, workdir: Path) -> None:
        self.t = LocalTransport()
        self.workdir = workdir
        self.prefix = f"xlt-it-{uuid.uuid4().hex[:6]}"
        self.mine: list[str] = []
        self.polls = 0

    def submit(self, body: str, *, node: str, name: str, requeue: bool | None = None) -> str:
        script = self.workdir / f"{name}.sh"
        script.write_text(f"#!/bin/sh\n{body}\n")
        argv = commands.sbatch(
            str(script),
            job_name=f"{self.prefix}-{name}",
            nodes=1,
            nodelist=node,
            output=str(self.workdir / "%j.out"),
            chdir=str(self.workdir),
            requeue=requeue,
        )
        job_id = parsers.parse_sbatch_parsable(self.t.run(argv, timeout=30).check().stdout)
        self.mine.append(job_id)
        return job_id

    def poll(self, job_ids: list[str]) -> dict[str, JobStatus]:
        """ONE squeue call for all the given jobs."""
        self.polls += 1
        return parsers.parse_squeue(self.t.run(commands.squeue(job_ids), timeout=30).check().stdout)

    def wait(
        self,
        job_ids: list[str],
        until: Callable[[dict[str, JobStatus]], bool],
        seen: list[dict[str, JobStatus]] | None = None,
    ) -> dict[str, JobStatus]:
        def reached() -> dict[str, JobStatus] | None:
            jobs = self.poll(job_ids)
            if seen is not None:
                seen.append(jobs)
            return jobs if until(jobs) else None

        return wait_until(f"jobs {job_ids} to reach the condition", reached, every=POLL)

    def nodes(self) -> dict[str, parsers.NodeStatus]:
        return parsers.parse_sinfo_nodes(self.t.run(commands.sinfo_nodes("debug"), timeout=30).check().stdout)

    def cancel_mine(self) -> None:
        for job_id in self.mine:
            self.t.run(commands.scancel(job_id), timeout=30)


@pytest.fixture
def cluster(local_slurm: LocalSlurm, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.cancel_mine()


def finished(*ids: str) -> Callable[[dict[str, JobStatus]], bool]:
    return lambda jobs: all(i in jobs and jobs[i].state.finished for i in ids)


def test_two_jobs_pinned_to_one_node_run_back_to_back_seen_by_one_squeue_per_poll(cluster: Cluster) -> None:
    body = 'date +%s.%N > "$SLURM_JOB_ID.start"; sleep 5; date +%s.%N > "$SLURM_JOB_ID.end"'
    first = cluster.submit(body, node="node01", name="first")
    second = cluster.submit(body, node="node01", name="second")
    seen: list[dict[str, JobStatus]] = []
    jobs = cluster.wait([first, second], finished(first, second), seen)

    assert cluster.polls == len(seen)  # one squeue call per poll, both jobs in it
    assert {j: (s.state, s.nodes) for j, s in jobs.items()} == {
        first: (JobState.COMPLETED, "node01"),
        second: (JobState.COMPLETED, "node01"),
    }
    assert any(
        s[first].state is JobState.RUNNING and s[second].state is JobState.PENDING
        for s in seen
        if first in s and second in s
    ), seen
    start2 = float((cluster.workdir / f"{second}.start").read_text())
    end1 = float((cluster.workdir / f"{first}.end").read_text())
    assert start2 >= end1


def test_cancel_a_pending_job_then_the_running_one(cluster: Cluster) -> None:
    running = cluster.submit("sleep 600", node="node02", name="blocker")
    pending = cluster.submit("true", node="node02", name="waiter")
    cluster.wait(
        [running, pending], lambda j: j[running].state is JobState.RUNNING and j[pending].state is JobState.PENDING
    )

    cluster.t.run(commands.scancel(pending), timeout=30).check()
    jobs = cluster.wait([running, pending], finished(pending))
    assert (jobs[pending].state, jobs[pending].nodes) == (JobState.CANCELLED, "")
    assert jobs[running].state is JobState.RUNNING

    cluster.t.run(commands.scancel(running), timeout=30).check()
    cluster.wait([running], finished(running))
    status = parsers.parse_scontrol_show_job(
        cluster.t.run(commands.scontrol_show_job(running), timeout=30).check().stdout
    )
    assert (status.state, status.exit_code, status.nodes) == (JobState.CANCELLED, 143, "node02")


def test_failed_job_exit_code_comes_from_scontrol(cluster: Cluster) -> None:
    job = cluster.submit("echo boom >&2; exit 3", node="node04", name="fails")
    jobs = cluster.wait([job], finished(job))
    assert jobs[job].state is JobState.FAILED and jobs[job].exit_code is None  # squeue cannot say
    status = parsers.parse_scontrol_show_job(cluster.t.run(commands.scontrol_show_job(job), timeout=30).stdout)
    assert (status.state, status.exit_code) == (JobState.FAILED, 3)
    all_jobs = parsers.parse_scontrol_show_jobs(cluster.t.run(commands.scontrol_show_jobs(), timeout=30).stdout)
    assert all_jobs[job].exit_code == 3


def test_drain_holds_a_pinned_job_and_resume_releases_it(cluster: Cluster) -> None:
    drain = commands.scontrol_update_node("node03", "DRAIN", f"{cluster.prefix} maintenance")
    resume = commands.scontrol_update_node("node03", "RESUME", f"{cluster.prefix} done")
    cluster.t.run(drain, timeout=30).check()
    try:
        node = cluster.nodes()["node03"]
        assert (node.state, node.reason) == (NodeState.DRAINED, f"{cluster.prefix} maintenance")
        assert not node.state.usable
        job = cluster.submit("true", node="node03", name="held")
        jobs = cluster.wait([job], lambda j: j[job].reason.startswith("ReqNodeNotAvail"))
        assert jobs[job].state is JobState.PENDING
    finally:
        cluster.t.run(resume, timeout=30).check()
    assert cluster.nodes()["node03"].state in (NodeState.IDLE, NodeState.ALLOCATED)
    jobs = cluster.wait([job], finished(job))
    assert jobs[job].state is JobState.COMPLETED
    # RESUME on a node that is not drained is an error in Slurm 22.05.
    again = cluster.t.run(resume, timeout=30)
    assert again.returncode == 1 and "Invalid node state specified" in again.stderr


def test_hostnames_expand_the_node_range(local_slurm: LocalSlurm) -> None:
    res = LocalTransport().run(commands.scontrol_show_hostnames(local_slurm.nodelist), timeout=30).check()
    assert parsers.parse_hostnames(res.stdout) == list(local_slurm.nodes)


def test_squeue_with_unknown_ids_is_empty_not_an_error(local_slurm: LocalSlurm) -> None:
    t = LocalTransport()
    for ids in (["999999"], ["999998", "999999"]):
        res = t.run(commands.squeue(ids), timeout=30)
        assert (res.returncode, res.stdout) == (0, ""), res.stderr
    # What the builder avoids: a lone unknown id is an error.
    raw = t.run(["squeue", "-h", "--states=all", "-j", "999999", "-o", parsers.SQUEUE_FORMAT], timeout=30)
    assert raw.returncode == 1 and parsers.INVALID_JOB_ID in raw.stderr


def test_sinfo_lists_every_node_responding_in_debug(local_slurm: LocalSlurm, cluster: Cluster) -> None:
    nodes = cluster.nodes()
    assert sorted(nodes) == list(local_slurm.nodes)
    assert all(n.partition == local_slurm.partition and n.responding for n in nodes.values())


def test_sacct_agrees_with_scontrol_when_accounting_is_on(local_slurm: LocalSlurm, cluster: Cluster) -> None:
    if not local_slurm.accounting:
        pytest.skip("cluster runs without accounting (scripts/local-slurm.sh up --accounting enables sacct)")
    failed = cluster.submit("exit 3", node="node04", name="acct-fail")
    killed = cluster.submit("sleep 600", node="node03", name="acct-kill")
    cluster.wait([killed], lambda j: j[killed].state is JobState.RUNNING)
    cluster.t.run(commands.scancel(killed), timeout=30).check()
    cluster.wait([failed, killed], finished(failed, killed))

    def recorded() -> dict[str, JobStatus] | None:  # slurmdbd records asynchronously
        acct = parsers.parse_sacct(cluster.t.run(commands.sacct([failed, killed]), timeout=30).check().stdout)
        return acct if all(j in acct and acct[j].state.finished for j in (failed, killed)) else None

    acct = wait_until("sacct to record both jobs", recorded, every=POLL)
    assert (acct[failed].state, acct[failed].exit_code) == (JobState.FAILED, 3)
    # 143 (SIGTERM) as a rule; 137 (SIGKILL) when scancel lands before the batch step has started
    # (seen once in CI): either way 128 + a signal, and scontrol must say the same.
    assert (acct[killed].state, acct[killed].nodes) == (JobState.CANCELLED, "node03")
    assert acct[killed].exit_code in (143, 137)
    ctl = parsers.parse_scontrol_show_jobs(cluster.t.run(commands.scontrol_show_jobs(), timeout=30).stdout)
    assert ctl[killed].exit_code == acct[killed].exit_code
