"""A full disk on a real small tmpfs: the session stops saying where, the store keeps every whole
record (no cut line), a full disk is never an OOM, and the rerun after freeing space loses
nothing and runs nothing twice. Needs root (mount); in CI it must run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FAKE
from tests.integration.fixtures_infra import unavailable


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 200 KiB tmpfs, unmounted in teardown."""
    if os.geteuid() != 0:
        unavailable("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def events(store: Path) -> list[dict]:
    raw = store.read_bytes()
    assert raw.endswith(b"\n"), "the store ends in a cut line"
    return [json.loads(line) for line in raw.splitlines()]  # every line whole


def run(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "cell.yml", "-v", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


FILLING = """\
model_tag: full
nodes: 1
parallelism: FSDP=8
baseline_repeats: 1
waves:
  2:
    - {name: fills, xla_flags: [--xla_fake_tgs=1100], overrides: {fake_log_bytes: 400000, fake_junk_at: start}}
    - {name: after, xla_flags: [--xla_fake_tgs=1200]}
"""


@pytest.mark.parametrize("backend", ["local", "sbatch"])
def test_a_store_on_a_full_disk_stops_the_session_naming_it_and_the_rerun_loses_nothing(
        tmp_path: Path, tmpfs: Path, fake_trainer_env: None, backend: str,
        request: pytest.FixtureRequest) -> None:
    """The job fills the disk its log and the store share; the next record cannot be written."""
    if backend == "sbatch":
        request.getfixturevalue("local_slurm")  # the real local Slurm runs the jobs
        cell = FILLING.replace("nodes: 1", "nodelist: node03") + "backend: {kind: sbatch}\n"
        logs = "xlatune-jobs/cell/outputs/*.log"
    else:
        cell, logs = FILLING, "cell/jobs/*.log"
    (tmp_path / "cell.yml").write_text(cell)
    store_dir = tmpfs / "store"
    store = store_dir / "cell.jsonl"
    first = run(tmp_path, *FAKE, f"--xlatune-store={store_dir}")
    out = first.stdout + first.stderr
    assert first.returncode == pytest.ExitCode.INTERRUPTED, out  # stopped
    assert f"xlatune STOP: {store}: cannot write the results store (No space left on device)" in out
    assert "Traceback" not in out and "OSError" not in out
    # stopped there: the later item never ran (the lock line may still name it as not run)
    assert "wave2::fills[default] FAILED" in out
    assert not any(line.startswith("cell.yml::wave2::after") for line in out.splitlines())
    recorded = events(store)
    passed = [line.split(" ")[0] for line in out.splitlines() if " PASSED " in line]
    stored = {e["item"] for e in recorded if e["event"] == "result"}
    assert passed and all(item.split("::", 1)[1] in stored for item in passed)  # passed ⇒ stored

    subprocess.run(["mount", "-o", "remount,size=50m", str(tmpfs)], check=True)  # space freed
    second = run(tmp_path, *FAKE, f"--xlatune-store={store_dir}")
    out2 = second.stdout + second.stderr
    assert second.returncode == 0, out2
    assert out2.count("REUSED") == len(stored)  # nothing finished was lost
    assert "re-attached to job" in out2 and "Traceback" not in out2
    recorded = events(store)
    results = Counter(e["item"] for e in recorded if e["event"] == "result")
    assert len(results) == 5 and set(results.values()) == {1}
    ids = Counter(e["job_id"] for e in recorded if e["event"] == "submitted")
    assert set(ids.values()) == {1}  # nothing submitted twice
    # Every job log is a recorded job (a queued sbatch job cancelled before it started has none),
    # and each result comes from the one job of its run that ran to its end.
    found = {log.name.split("-", 1)[0]: log.read_text() for log in store_dir.glob(logs)}
    assert set(found) <= set(ids) and (backend == "sbatch" or set(found) == set(ids))
    complete = {job for job, text in found.items() if "completed step: 14," in text}
    assert complete == {e["job_id"] for e in recorded if e["event"] == "result"}


def test_xla_dumping_onto_a_full_disk_is_disk_full_never_oom_and_stops(
        tmp_path: Path, tmpfs: Path) -> None:
    """The real embedded JAX workload with its HLO dump pointed at the full tmpfs."""
    (tmpfs / "filler").write_bytes(b"\0" * (196 << 10))  # leave the dump no room
    (tmp_path / "cell.yml").write_text(f"""\
model_tag: dumpfull
nodes: 1
parallelism: FSDP=2
pdbs: 1
steps: 10
baseline_repeats: 1
overrides: {{emb_dim: 32}}
waves:
  2:
    - {{name: dumps, xla_flags: [--xla_dump_to={tmpfs}/dump]}}
""")
    for attempt in (1, 2):  # the rerun judges it again: still disk_full, never OOM
        done = run(tmp_path, "-k", "dumps", "-p", "no:cacheprovider", timeout=600)
        out = done.stdout + done.stderr
        assert done.returncode == pytest.ExitCode.INTERRUPTED, out  # stopped
        assert "xlatune STOP" in out and "disk_full" in out and f"{tmpfs}/dump" in out, out
        assert "No space left on device" in out
        assert "XFAIL" not in out and "out of memory" not in out and "Traceback" not in out
        verdicts = [e["verdict"] for e in events(tmp_path / ".xlatune" / "cell.jsonl")
                    if e["event"] == "result"]
        assert verdicts == ["disk_full"] * attempt
