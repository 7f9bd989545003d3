"""Ctrl-C mid-sweep on the real local Slurm: exactly this session's jobs are cancelled."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REAL_FIXED as FAKE  # interrupt mechanics: every item once, in order (fixed protocol)
from tests.integration.waits import ENDS_S, FOREIGN_SLEEP, wait_until

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
    out = subprocess.run(
        ["squeue", "-h", "-t", "PENDING,RUNNING,COMPLETING", "-o", "%i"], capture_output=True, text=True, check=True
    )
    return set(out.stdout.split())


def events(store: Path) -> list[dict]:
    if not store.exists():
        return []
    return [json.loads(x) for x in store.read_bytes().splitlines(keepends=True) if x.endswith(b"\n")]


def test_ctrl_c_cancels_exactly_the_sessions_jobs_and_rerun_resumes(
    tmp_path: Path, local_slurm: None, fake_trainer_env: None
) -> None:
    foreign = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--nodelist=node03",
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
        (tmp_path / "cell.yml").write_text(CELL)
        store = tmp_path / ".xlatune" / "cell.jsonl"
        argv = [sys.executable, "-m", "pytest", "cell.yml", "-v", *FAKE, "--xlatune-poll-interval=0.2"]
        first = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_until(
            "a result and three submissions",
            lambda: (
                len([e for e in events(store) if e["event"] == "result"]) >= 1
                and len([e for e in events(store) if e["event"] == "submitted"]) >= 3
            ),
            proc=first,
        )
        before = {e["job_id"] for e in events(store) if e["event"] == "submitted"}
        first.send_signal(signal.SIGINT)
        output = first.communicate(timeout=ENDS_S)[0]
        assert "KeyboardInterrupt" in output or "Interrupted" in output, output
        # A submission in flight when the signal came is finished and recorded first (the signal
        # waits for its record), so the session may own one job more than the store showed before.
        ours = {e["job_id"] for e in events(store) if e["event"] == "submitted"}
        assert before <= ours and len(ours - before) <= 1, (before, ours)
        # scancel is asynchronous: a running job is COMPLETING until slurmstepd has killed its
        # processes (longer on a loaded machine). Every job of ours goes; the other one stays.
        wait_until("the cancels to land", lambda: not ours & active())
        assert foreign in active()  # the other job was never touched
        cancelled = {e["job_id"] for e in events(store) if e["event"] == "cancelled"}
        finished = {e["job_id"] for e in events(store) if e["event"] == "result"}
        assert ours == cancelled | finished

        second = subprocess.run(argv, check=False, cwd=tmp_path, capture_output=True, text=True, timeout=ENDS_S)
        assert second.returncode == 0, second.stdout
        assert second.stdout.count("REUSED") == len(finished)
        results = [e for e in events(store) if e["event"] == "result"]
        assert len({e["key"] for e in results}) == 6  # baseline, evidence, a, b, c, winner evidence
        assert foreign in active()
    finally:
        subprocess.run(["scancel", foreign], check=False)
