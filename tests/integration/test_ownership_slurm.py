"""Nothing lost, nothing twice on the real local Slurm (sbatch backend, scripted fake trainer): a
second session on the store refuses at once; SIGTERM/SIGHUP with running and pending jobs cancel
exactly the session's jobs and write the partial report; a `nodes: 1` cell rerun after kill -9
stays on its frozen node (busy with its own orphan), and Ctrl-C after the re-attach cancels the
re-attached jobs, but not one that ends its last step as the cancel comes; a kill -9 between
sbatch's answer and the `submitted` record is healed by the job's mark; pre-flight says which other
jobs hold the pinned nodes. Jobs are counted in the scheduler (sacct, by the test's own job names)
and in the job logs."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import REAL_FIXED as FIXED
from tests.integration.fixtures_infra import LocalSlurm, unavailable
from tests.integration.waits import ENDS_S, FOREIGN_SLEEP
from tests.integration.waits import wait_until as wait_for

pytestmark = pytest.mark.slurm


def cell_text(tag: str, slot: str, step_sleep: float = 0.25, teardown: float = 0.0) -> str:
    after = f", fake_teardown_sleep: {teardown}" if teardown else ""
    return f"""\
model_tag: {tag}
{slot}
parallelism: FSDP=8
baseline_repeats: 1
overrides: {{fake_step_sleep: {step_sleep}{after}}}
waves:
  2:
    - {{name: a, xla_flags: [--xla_fake_tgs=1100]}}
    - {{name: b, xla_flags: [--xla_fake_tgs=900]}}
    - {{name: c, xla_flags: [--xla_fake_tgs=950]}}
backend: {{kind: sbatch}}
"""


ITEMS = 6  # baseline, evidence, a, b, c, the winner's evidence run


def events(store: Path) -> list[dict]:
    if not store.exists():
        return []
    found = [json.loads(x) for x in store.read_bytes().splitlines(keepends=True) if x.endswith(b"\n")]
    return [e for e in found if isinstance(e, dict)]  # a test plants a `42`


def count(store: Path, event: str) -> int:
    return sum(1 for e in events(store) if e["event"] == event)


def active() -> set[str]:
    out = subprocess.run(
        ["squeue", "-h", "-t", "PENDING,RUNNING,COMPLETING", "-o", "%i"], capture_output=True, text=True, check=True
    )
    return set(out.stdout.split())


def scheduler_jobs(tag: str) -> Counter[str]:
    """Job name → how many jobs of that name Slurm ran or runs (this test's tag only)."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-o", "JobID,JobName%200", "-S", "now-3hours"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return Counter(name for line in out.splitlines() if "|" in line for name in [line.split("|", 1)[1]] if tag in name)


def start(cwd: Path, *args: str, out: str = "out.txt") -> subprocess.Popen[str]:
    # The fixed protocol: one job per item, queued ahead (what ownership and re-attach act on).
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "cell.yml", *FIXED, "--xlatune-poll-interval=0.2", *args],
        cwd=cwd,
        stdout=(cwd / out).open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )


def assert_nothing_twice(store: Path, tag: str, jobs_dir: Path) -> None:
    """Each job id submitted once; Slurm ran exactly the store's jobs; each run key measured once."""
    submitted = Counter(e["job_id"] for e in events(store) if e["event"] == "submitted")
    assert set(submitted.values()) == {1}, submitted
    in_slurm = scheduler_jobs(tag)
    assert sum(in_slurm.values()) == len(submitted), (in_slurm, submitted)
    logs = {log.name.split("-", 1)[0]: log.read_text() for log in jobs_dir.glob("outputs/*.log")}
    assert set(logs) <= set(submitted)  # no job the store does not know (a queued job cancelled
    # before it started writes no log)
    complete = {job for job, text in logs.items() if "completed step: 14," in text}
    results = Counter(e["key"] for e in events(store) if e["event"] == "result")
    assert len(results) == ITEMS and set(results.values()) == {1}, results
    # Each result from exactly one job that ran to its end, and no other job ran to its end.
    assert complete == {e["job_id"] for e in events(store) if e["event"] == "result"}


@pytest.fixture
def slurm(local_slurm: LocalSlurm, fake_trainer_env: None) -> LocalSlurm:
    if not local_slurm.accounting:
        unavailable("sacct: the local Slurm runs without accounting (local-slurm.sh up --accounting)")
    return local_slurm


def tag_for(name: str) -> str:
    return f"{name}{uuid.uuid4().hex[:6]}"


def test_a_second_session_refuses_at_once_and_nothing_runs_twice(tmp_path: Path, slurm: LocalSlurm) -> None:
    tag = tag_for("twosess")
    (tmp_path / "cell.yml").write_text(cell_text(tag, "nodelist: node[01-02]"))
    store = tmp_path / ".xlatune" / "cell.jsonl"
    first = start(tmp_path)
    wait_for("the first job", lambda: count(store, "submitted") >= 1, proc=first)
    second = start(tmp_path, out="second.txt")
    assert second.wait(timeout=ENDS_S) != 0
    refused = (tmp_path / "second.txt").read_text()
    assert first.poll() is None  # refused while the first one runs
    assert first.wait(timeout=900) == 0, (tmp_path / "out.txt").read_text()
    assert "in use by another pytest session (host " in refused and f"pid {first.pid}" in refused
    assert "Traceback" not in refused and "re-attached" not in refused
    assert count(store, "cancelled") == 0  # the first session's results are all kept
    assert_nothing_twice(store, tag, tmp_path / ".xlatune" / "xlatune-jobs" / "cell")


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_cancel_running_and_pending_jobs_then_the_rerun_resumes(
    tmp_path: Path, slurm: LocalSlurm, number: int
) -> None:
    tag = tag_for("sig")
    (tmp_path / "cell.yml").write_text(cell_text(tag, "nodelist: node[01-02]"))
    store = tmp_path / ".xlatune" / "cell.jsonl"
    first = start(tmp_path)

    # The first item reported, a running job and a queued one: a state the sweep is in from its
    # second item until its last, however slowly a loaded machine runs it. The first item's
    # `result` record alone is not that state: it is written before pytest reports the item, and
    # a session stopped in between has run no item, so it writes no report (run 2 under a hog).
    # The fourth submission is the second item's: it tops the queue up (the first three go at the start).
    def in_flight() -> set[str]:
        return {e["job_id"] for e in events(store) if e["event"] == "submitted"} - {
            e["job_id"] for e in events(store) if e["event"] == "result"
        }

    wait_for(
        "the second item, a running and a pending job",
        lambda: count(store, "result") >= 1 and count(store, "submitted") >= 4 and len(in_flight() & active()) >= 2,
        proc=first,
    )
    first.send_signal(number)
    assert first.wait(timeout=ENDS_S) == pytest.ExitCode.INTERRUPTED
    out = (tmp_path / "out.txt").read_text()
    assert f"{signal.Signals(number).name} received" in out and "Traceback" not in out
    ours = {e["job_id"] for e in events(store) if e["event"] == "submitted"}  # up to the signal
    wait_for("the cancels to land", lambda: not ours & active())
    cancelled = {e["job_id"] for e in events(store) if e["event"] == "cancelled"}
    finished = {e["job_id"] for e in events(store) if e["event"] == "result"}
    assert ours == cancelled | finished and len(cancelled) >= 2
    assert "tuning report written" in out and (tmp_path / f"{tag}-tuning.md").exists()

    second = start(tmp_path, "-v", out="second.txt")
    assert second.wait(timeout=900) == 0, (tmp_path / "second.txt").read_text()
    assert (tmp_path / "second.txt").read_text().count(" REUSED ") == len(finished)
    assert_nothing_twice(store, tag, tmp_path / ".xlatune" / "xlatune-jobs" / "cell")


def test_a_nodes_cell_rerun_after_kill_9_stays_on_its_node_and_ctrl_c_cancels_the_reattached(
    tmp_path: Path, slurm: LocalSlurm
) -> None:
    tag = tag_for("frozen")
    # Steps long enough that the orphans still run when the second session re-attaches and is
    # interrupted (an orphan that ends its last step while the cancel is on its way is the next
    # test's).
    (tmp_path / "cell.yml").write_text(cell_text(tag, "nodes: 1", step_sleep=0.75))
    store = tmp_path / ".xlatune" / "cell.jsonl"
    first = start(tmp_path)
    wait_for("a result and three submissions", lambda: count(store, "result") >= 1 and count(store, "submitted") >= 3)
    first.send_signal(signal.SIGKILL)
    first.wait()
    orphans = {e["job_id"] for e in events(store) if e["event"] == "submitted"} - {
        e["job_id"] for e in events(store) if e["event"] == "result"
    }
    assert orphans & active()
    frozen = next(e["nodelist"] for e in events(store) if e["event"] == "sweep")

    second = start(tmp_path, "-v", out="second.txt")  # its node is busy with its own orphan
    wait_for("the re-attach", lambda: "re-attached to job" in (tmp_path / "second.txt").read_text(), proc=second)
    second.send_signal(signal.SIGINT)
    assert second.wait(timeout=ENDS_S) == pytest.ExitCode.INTERRUPTED
    out = (tmp_path / "second.txt").read_text()
    assert "fresh-baseline" not in out and "Traceback" not in out
    wait_for("the re-attached jobs to be cancelled", lambda: not orphans & active())
    assert [e["nodelist"] for e in events(store) if e["event"] == "sweep"] == [frozen]

    third = start(tmp_path, out="third.txt")
    assert third.wait(timeout=900) == 0, (tmp_path / "third.txt").read_text()
    assert [e["nodelist"] for e in events(store) if e["event"] == "sweep"] == [frozen]
    assert_nothing_twice(store, tag, tmp_path / ".xlatune" / "xlatune-jobs" / "cell")


def test_ctrl_c_as_a_reattached_job_logs_its_last_step_runs_nothing_twice(tmp_path: Path, slurm: LocalSlurm) -> None:
    """The race CI found: Ctrl-C the moment the re-attached orphan logs its last step, so the
    cancel reaches a job that has trained (Slurm then says CANCELLED, or COMPLETED where the job
    ended first). It must not be recorded cancelled: the third session re-attaches and stores its
    result, never runs it again. Where the cancel lands is up to the machine's load; without the
    fix, 2 of 5 runs on the local cluster recorded a job that had logged all 15 steps as cancelled
    (CANCELLED in its teardown: the re-attached job, or the next one) and ran it again."""
    tag = tag_for("race")
    # Steps long enough that the orphan still runs when the second session re-attaches (it
    # starts in seconds on a loaded machine), and a teardown after the last step (a real
    # trainer's checkpoint and profiler flush) that the cancel lands in: a job that exits right
    # after its last step ends before or after the cancel as the machine's load decides.
    (tmp_path / "cell.yml").write_text(cell_text(tag, "nodes: 1", step_sleep=0.75, teardown=3))
    store = tmp_path / ".xlatune" / "cell.jsonl"
    jobs_dir = tmp_path / ".xlatune" / "xlatune-jobs" / "cell"
    first = start(tmp_path)
    wait_for("a result and three submissions", lambda: count(store, "result") >= 1 and count(store, "submitted") >= 3)
    first.send_signal(signal.SIGKILL)
    first.wait()
    second = start(tmp_path, "-v", out="second.txt")
    said = wait_for(
        "the re-attach",
        lambda: re.search(r"re-attached to job (\d+)", (tmp_path / "second.txt").read_text()),
        proc=second,
    )
    job = said.group(1)

    def last_step_logged() -> bool:
        return any("completed step: 14," in log.read_text() for log in jobs_dir.glob(f"outputs/{job}-*.log"))

    wait_for("the re-attached job's last step", last_step_logged, every=0.01, proc=second)
    second.send_signal(signal.SIGINT)
    assert second.wait(timeout=ENDS_S) == pytest.ExitCode.INTERRUPTED
    ours = {e["job_id"] for e in events(store) if e["event"] == "submitted"}
    wait_for("the cancels to land", lambda: not ours & active())
    assert job not in {e["job_id"] for e in events(store) if e["event"] == "cancelled"}
    third = start(tmp_path, "-v", out="third.txt")
    assert third.wait(timeout=900) == 0, (tmp_path / "third.txt").read_text()
    assert_nothing_twice(store, tag, jobs_dir)


def test_preflight_names_other_jobs_on_the_pinned_nodes_without_v(tmp_path: Path, slurm: LocalSlurm) -> None:
    foreign = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--nodelist=node04",
            "--nodes=1",
            "--job-name=someone-else",
            "--output=/dev/null",
            f"--wrap=sleep {FOREIGN_SLEEP}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        wait_for(
            "the foreign job to run",
            lambda: (
                subprocess.run(
                    ["squeue", "-h", "-j", foreign, "-o", "%T"], check=False, capture_output=True, text=True
                ).stdout.strip()
                == "RUNNING"
            ),
        )
        (tmp_path / "cell.yml").write_text(cell_text(tag_for("busy"), "nodelist: node04"))
        session = start(tmp_path, "-k", "baseline")
        wait_for(
            "the pre-flight line",
            lambda: "other job(s) on the pinned nodes" in (tmp_path / "out.txt").read_text(),
            proc=session,
        )
        subprocess.run(["scancel", foreign], check=False)  # let the sweep through
        assert session.wait(timeout=600) == 0, (tmp_path / "out.txt").read_text()
        out = (tmp_path / "out.txt").read_text()
        assert "1 other job(s) on the pinned nodes node04; the sweep's jobs will wait for them" in out
        assert f"{foreign}|" in out and "someone-else" in out
    finally:
        subprocess.run(["scancel", foreign], check=False)


def test_kill_9_with_a_torn_tail_and_a_non_object_line_then_the_rerun_heals_and_reattaches(
    tmp_path: Path, slurm: LocalSlurm
) -> None:
    tag = tag_for("torn")
    (tmp_path / "cell.yml").write_text(cell_text(tag, "nodelist: node[01-02]"))
    store = tmp_path / ".xlatune" / "cell.jsonl"
    first = start(tmp_path)
    wait_for("a result and three submissions", lambda: count(store, "result") >= 1 and count(store, "submitted") >= 3)
    first.send_signal(signal.SIGKILL)
    first.wait()
    lines = store.read_bytes().splitlines(keepends=True)
    # A `42` planted after the sweep line, and the next record cut as a crash leaves it.
    store.write_bytes(
        b"".join(lines[:1])
        + b"42\n"
        + b"".join(lines[1:])
        + b'{"schema": 1, "event": "submitted", "key": "k", "job_id": "99'
    )
    second = start(tmp_path, "-v", out="second.txt")
    assert second.wait(timeout=900) == 0, (tmp_path / "second.txt").read_text()
    out = (tmp_path / "second.txt").read_text()
    assert "re-attached to job" in out and out.count("set aside a torn last line") == 1
    assert "skipped 1 line(s) that are not well-formed records (line 2)" in out
    assert "Traceback" not in out and "AttributeError" not in out
    assert_nothing_twice(store, tag, tmp_path / ".xlatune" / "xlatune-jobs" / "cell")


def test_the_last_byte_gone_loses_no_result(tmp_path: Path, slurm: LocalSlurm) -> None:
    (tmp_path / "cell.yml").write_text(cell_text(tag_for("byte"), "nodelist: node[03-04]"))
    store = tmp_path / ".xlatune" / "cell.jsonl"
    first = start(tmp_path, "-k", "baseline")
    assert first.wait(timeout=600) == 0, (tmp_path / "out.txt").read_text()
    store.write_bytes(store.read_bytes()[:-1])
    second = start(tmp_path, "-v", "-k", "baseline", out="second.txt")
    assert second.wait(timeout=600) == 0, (tmp_path / "second.txt").read_text()
    out = (tmp_path / "second.txt").read_text()
    assert "the last record had no newline; completed it" in out
    assert " REUSED " in out and count(store, "submitted") == 1


SBATCH_THEN_DIE = """#!/bin/bash
# The real sbatch, then kill -9 of the pytest that ran it when it submits {victim}'s job: the
# scheduler has the job, the store has only its `submitting` record.
out=$({sbatch} "$@"); rc=$?
case "$*" in *"--job-name={victim}"*) kill -9 "$PPID";; esac
echo "$out"
exit $rc
"""


def test_kill_9_between_sbatch_and_the_record_then_the_rerun_finds_the_job_by_its_mark(
    tmp_path: Path, slurm: LocalSlurm
) -> None:
    tag = tag_for("mark")
    (tmp_path / "cell.yml").write_text(cell_text(tag, "nodelist: node[01-02]"))
    store = tmp_path / ".xlatune" / "cell.jsonl"
    wrapper = tmp_path / "bin" / "sbatch"
    wrapper.parent.mkdir()
    wrapper.write_text(SBATCH_THEN_DIE.format(sbatch=shutil.which("sbatch"), victim=f"{tag}-b-default"))
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}"}
    first = subprocess.Popen(
        [sys.executable, "-m", "pytest", "cell.yml", *FIXED, "--xlatune-poll-interval=0.2"],
        cwd=tmp_path,
        env=env,
        stdout=(tmp_path / "out.txt").open("w"),
        stderr=subprocess.STDOUT,
    )
    assert first.wait(timeout=600) == -signal.SIGKILL, (tmp_path / "out.txt").read_text()
    unconfirmed = [e for e in events(store) if e["event"] == "submitting" and "::b[" in e["item"]]
    assert len(unconfirmed) == 1 and not [e for e in events(store) if e["event"] == "submitted" and "::b[" in e["item"]]
    # The job the store does not know yet (slurmdbd lists it a moment after the submission).
    wait_for("the job in sacct", lambda: scheduler_jobs(tag)[f"{tag}-b-default"] == 1)

    second = start(tmp_path, "-v", out="second.txt")
    assert second.wait(timeout=900) == 0, (tmp_path / "second.txt").read_text()
    out = (tmp_path / "second.txt").read_text()
    assert "wave2::b[default]: found job" in out and "killed (by its mark)" in out
    recovered = [e for e in events(store) if e["event"] == "submitted" and e.get("recovered")]
    assert [e["mark"] for e in recovered] == [unconfirmed[0]["mark"]]
    assert_nothing_twice(store, tag, tmp_path / ".xlatune" / "xlatune-jobs" / "cell")
