"""Ctrl-C mid-sweep on the real local Slurm: exactly this session's jobs are cancelled."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FIXED as FAKE  # interrupt mechanics: every item once, in order (fixed protocol)

pytestmark = pytest.mark.slurm

CELL = """\
model_tag: intr
nodelist: node[01-02]
parallelism: FSDP=8
baseline_repeats: 1
overrides: {fake_step_sleep: 0.25}
waves:
  2:
    - {name: a, xla_flags: [--xla_fake_tgs=1100]}
    - {name: b, xla_flags: [--xla_fake_tgs=900]}
    - {name: c, xla_flags: [--xla_fake_tgs=950]}
backend: {kind: sbatch}
"""


def active() -> set[str]:
    out = subprocess.run(["squeue", "-h", "-t", "PENDING,RUNNING,COMPLETING", "-o", "%i"],
                         capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def events(store: Path) -> list[dict]:
    if not store.exists():
        return []
    return [json.loads(x) for x in store.read_bytes().splitlines(keepends=True) if x.endswith(b"\n")]


def test_ctrl_c_cancels_exactly_the_sessions_jobs_and_rerun_resumes(
        tmp_path: Path, local_slurm: None, fake_trainer_env: None) -> None:
    foreign = subprocess.run(["sbatch", "--parsable", "--nodelist=node03", "--nodes=1",
                              "--job-name=someone-else", "--output=/dev/null",
                              "--wrap=sleep 120"],
                             capture_output=True, text=True, check=True).stdout.strip()
    try:
        (tmp_path / "cell.yml").write_text(CELL)
        store = tmp_path / ".xlatune" / "cell.jsonl"
        argv = [sys.executable, "-m", "pytest", "cell.yml", "-v", *FAKE, "--xlatune-poll-interval=0.2"]
        first = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 90
        while time.time() < deadline:
            done = [e for e in events(store) if e["event"] == "result"]
            if len(done) >= 1 and len([e for e in events(store) if e["event"] == "submitted"]) >= 3:
                break
            time.sleep(0.1)
        before = {e["job_id"] for e in events(store) if e["event"] == "submitted"}
        first.send_signal(signal.SIGINT)
        output = first.communicate(timeout=60)[0]
        assert "KeyboardInterrupt" in output or "Interrupted" in output, output
        time.sleep(1)
        # A submission in flight when the signal came is finished and recorded first (the signal
        # waits for its record), so the session may own one job more than the store showed before.
        ours = {e["job_id"] for e in events(store) if e["event"] == "submitted"}
        assert before <= ours and len(ours - before) <= 1, (before, ours)
        assert not ours & active(), (ours, active())  # every job of ours is gone
        assert foreign in active()  # the other job was never touched
        cancelled = {e["job_id"] for e in events(store) if e["event"] == "cancelled"}
        finished = {e["job_id"] for e in events(store) if e["event"] == "result"}
        assert ours == cancelled | finished

        second = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=180)
        assert second.returncode == 0, second.stdout
        assert second.stdout.count("REUSED") == len(finished)
        results = [e for e in events(store) if e["event"] == "result"]
        assert len({e["key"] for e in results}) == 6  # baseline, evidence, a, b, c, winner evidence
        assert foreign in active()
    finally:
        subprocess.run(["scancel", foreign], check=False)
