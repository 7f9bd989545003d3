"""kill -9 of pytest mid-sweep: nothing finished is lost, nothing is submitted twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.cells import cell_yaml
from tests.conftest import FAKE

CELL = cell_yaml("slow", ("a", "--xla_fake_tgs=1100"), ("b", "--xla_fake_tgs=1200"),
                 ("c", "--xla_fake_tgs=900"), step_sleep=0.12)


def events(store: Path) -> list[dict]:
    if not store.exists():
        return []
    return [json.loads(line) for line in store.read_bytes().splitlines(keepends=True)
            if line.endswith(b"\n")]


def run_pytest(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pytest", "cell.yml", "-v", *FAKE, *args],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


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
