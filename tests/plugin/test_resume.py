"""kill -9 of pytest mid-sweep: nothing finished is lost, nothing is submitted twice."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.cells import cell_yaml
from tests.conftest import REAL as FAKE  # kill -9 and reattach: the real local backend's processes

CELL = cell_yaml(
    "slow", ("a", "--xla_fake_tgs=1100"), ("b", "--xla_fake_tgs=1200"), ("c", "--xla_fake_tgs=900"), step_sleep=0.12
)


def events(store: Path) -> list[dict]:
    if not store.exists():
        return []
    return [json.loads(line) for line in store.read_bytes().splitlines(keepends=True) if line.endswith(b"\n")]


def run_pytest(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "cell.yml", "-v", *FAKE, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.realproc
def test_kill_9_mid_job_then_rerun_reattaches_and_reuses(tmp_path: Path, fake_trainer_env: None) -> None:
    (tmp_path / "cell.yml").write_text(CELL)
    store = tmp_path / ".xlatune" / "cell.jsonl"
    first = run_pytest(tmp_path)
    deadline = time.time() + 60
    # Wait until two results are stored and a third job is in flight, then kill -9.
    while time.time() < deadline:
        kinds = Counter(e["event"] for e in events(store))
        if kinds["result"] >= 2 and kinds["submitted"] > kinds["result"]:
            break
        time.sleep(0.05)
    else:
        first.kill()
        pytest.fail(f"sweep did not reach the kill point: {first.communicate()[0]}")
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    finished_before = {e["key"] for e in events(store) if e["event"] == "result"}
    in_flight = {e["key"] for e in events(store) if e["event"] == "submitted"} - finished_before

    second = run_pytest(tmp_path)
    output = second.communicate(timeout=120)[0]
    assert second.returncode == 0, output
    assert output.count("REUSED") == len(finished_before), output
    assert "re-attached to job" in output
    submitted = Counter(e["key"] for e in events(store) if e["event"] == "submitted")
    assert all(count == 1 for count in submitted.values()), submitted  # nothing submitted twice
    results = {e["key"] for e in events(store) if e["event"] == "result"}
    assert finished_before | in_flight <= results
    # baseline, evidence, a, b, c, the winner's evidence run, and the adaptive sweep's confirming
    # runs of the two wins at or above +5 % (a +10 %, b +20 %; c is a variant of the recipe's flag),
    # each with the control a win needs after its first run before it counts
    assert len(results) == 10


INERT_CELL = """\
model_tag: inertk
nodes: 1
parallelism: FSDP=8
baseline_repeats: 1
overrides: {fake_step_sleep: 0.02}
waves:
  2:
    - {name: noop, xla_flags: [--xla_fake_noop_compile_sleep=120]}
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"fake_trainer" in handle.read()
    except OSError:
        return False


@pytest.mark.realproc
def test_kill_9_right_after_an_inert_cut_then_rerun_shares_the_result_and_submits_nothing_again(
    tmp_path: Path, fake_trainer_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake trainer "compiles" (FAKE_TRAINER_PROGRAM): noop's flag leaves the program as the
    baseline's, so its job is cut after its compile line (it would then sleep 120 s). The session
    is killed as soon as that decision is stored; the rerun stores the shared result, cuts the job
    if it still runs, and submits nothing twice."""
    monkeypatch.setenv("FAKE_TRAINER_PROGRAM", "1")
    (tmp_path / "cell.yml").write_text(INERT_CELL)
    store = tmp_path / ".xlatune" / "cell.jsonl"
    first = run_pytest(tmp_path)
    deadline = time.time() + 120
    while not any(e["event"] == "inert" for e in events(store)):  # the cut is decided: kill -9 now
        if time.time() > deadline or first.poll() is not None:
            first.kill()
            pytest.fail(f"no inert cut: {first.communicate()[0]}")
        time.sleep(0.02)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    (cut,) = [e for e in events(store) if e["event"] == "inert"]
    pid = int(next(e["handle"] for e in events(store) if e["event"] == "submitted" and e["job_id"] == cut["job_id"]))
    finished_before = {e["key"] for e in events(store) if e["event"] == "result"}

    second = run_pytest(tmp_path)
    output = second.communicate(timeout=120)[0]
    assert second.returncode == 0, output
    assert output.count("REUSED") == len(finished_before), output
    found = events(store)
    submitted = Counter(e["key"] for e in found if e["event"] == "submitted")
    assert all(count == 1 for count in submitted.values()), submitted  # nothing submitted twice
    results = {e["item"]: e for e in found if e["event"] == "result"}
    noop = results["wave2::noop[default]"]
    assert noop["inert"] and noop["shared_from"] == "wave1::baseline[default]" == cut["source_item"]
    assert noop["tgs"] == results["wave1::baseline[default]"]["tgs"]
    assert finished_before <= {e["key"] for e in found if e["event"] == "result"}
    # PASSED when the rerun stored the share, REUSED when the killed session got to it first
    assert any(
        re.search(r"noop\[default\] (PASSED|REUSED) ", line) and f"({noop['reason']})" in line
        for line in output.splitlines()
    ), output
    # the cut job's own record (its cost) is kept, and it runs no more (it would sleep 120 s)
    assert [(e["verdict"], e["reason"]) for e in found if e["event"] == "attempt" and e["job_id"] == cut["job_id"]] == [
        ("cancelled", cut["reason"])
    ]
    end = time.time() + 60
    while alive(pid) and time.time() < end:
        time.sleep(0.1)
    assert not alive(pid)
