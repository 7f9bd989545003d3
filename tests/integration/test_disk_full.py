"""A full disk on a real small tmpfs: the session stops saying where, the store keeps every whole
record (no cut line), a full disk is never an OOM, and the rerun after freeing space loses
nothing and runs nothing twice; jobs the session cancelled while the store could not record it
run again on the rerun, while a job cancelled by hand stays `cancelled`. Needs root (mount); in
CI it must run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

# The fixed protocol: these pin what a full disk does to each job of the plan (one job per item,
# queued ahead on Slurm), not the adaptive sweep's choices.
from tests.conftest import REAL_FIXED as FIXED
from tests.integration.fixtures_infra import unavailable
from tests.integration.test_ownership_slurm import active
from tests.integration.waits import ENDS_S
from tests.integration.waits import wait_until as wait_for


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


# The sbatch runs take the local Slurm (and so its xdist group, tests/conftest.py); the local ones do not.
BACKENDS = [pytest.param("local"), pytest.param("sbatch", marks=pytest.mark.slurm)]


def events(store: Path) -> list[dict]:
    raw = store.read_bytes()
    assert raw.endswith(b"\n"), "the store ends in a cut line"
    return [json.loads(line) for line in raw.splitlines()]  # every line whole


def run(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "cell.yml", "-v", *args],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_on_a_full_disk_stops_the_session_naming_it_and_the_rerun_loses_nothing(
    tmp_path: Path, tmpfs: Path, fake_trainer_env: None, backend: str, request: pytest.FixtureRequest
) -> None:
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
    first = run(tmp_path, *FIXED, f"--xlatune-store={store_dir}")
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
    second = run(tmp_path, *FIXED, f"--xlatune-store={store_dir}")
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


def test_xla_dumping_onto_a_full_disk_is_disk_full_never_oom_and_stops(tmp_path: Path, tmpfs: Path) -> None:
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
        verdicts = [e["verdict"] for e in events(tmp_path / ".xlatune" / "cell.jsonl") if e["event"] == "result"]
        assert verdicts == ["disk_full"] * attempt


# ---- who cancelled a job: the session on its way out (re-run it) or a person (keep it) ----------

CANCELS = """\
model_tag: {tag}
{slot}
parallelism: FSDP=8
baseline_repeats: 1
overrides: {{fake_step_sleep: 0.3}}
waves:
  2:
    - {{name: a, xla_flags: [--xla_fake_tgs=1100]}}
    - {{name: b, xla_flags: [--xla_fake_tgs=1200]}}
    - {{name: c, xla_flags: [--xla_fake_tgs=900]}}
{backend}"""
CANCELS_ITEMS = 6  # baseline, evidence, a, b, c, the winner's evidence run


def cancels_cell(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> tuple[str, list[str]]:
    """(the cell's tag, the session's arguments); job logs and scripts live off the tmpfs, so only
    the store's disk is full."""
    tag = f"cn{uuid.uuid4().hex[:6]}"
    if backend == "sbatch":
        request.getfixturevalue("local_slurm")
        text = CANCELS.format(tag=tag, slot="nodelist: node[01-02]", backend="backend: {kind: sbatch}\n")
        args = [f"--xlatune-workdir={tmp_path / 'slurm-jobs'}"]
    else:
        text, args = CANCELS.format(tag=tag, slot="nodes: 1", backend=""), []
    (tmp_path / "cell.yml").write_text(text)
    return tag, args


def start(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "cell.yml", "-v", *FIXED, *args],
        cwd=cwd,
        stdout=(cwd / "out.txt").open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )


def store_events(store: Path) -> list[dict]:
    raw = store.read_bytes() if store.exists() else b""
    return [
        json.loads(line) for line in raw.splitlines(keepends=True) if line.endswith(b"\n") and line.strip()
    ]  # fill() leaves blank lines


def unfinished(store: Path) -> set[str]:
    """Job ids submitted without a result or a cancelled record (yet)."""
    recorded = store_events(store)
    ended = {str(e["job_id"]) for e in recorded if e["event"] in ("result", "cancelled", "attempt")}
    return {str(e["job_id"]) for e in recorded if e["event"] == "submitted"} - ended


def scheduler_states(tag: str) -> dict[str, str]:
    """Job id → Slurm state of this test's jobs (by the tag in their names)."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-o", "JobID,JobName%200,State", "-S", "now-3hours"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        job: state
        for line in out.splitlines()
        if line.count("|") == 2
        for job, name, state in [line.split("|")]
        if tag in name
    }


def fill(mount: Path, store: Path) -> Path:
    """Fill the disk to the last byte: a filler, then blank lines (which readers skip) in the rest
    of the store's last page, which would otherwise still take a short record."""
    filler = mount / "filler"
    for path, flags in ((filler, os.O_CREAT), (store, os.O_APPEND)):
        fd = os.open(path, os.O_WRONLY | flags)
        try:
            while os.write(fd, b"\n" * 4096):  # short writes up to the page's end, then ENOSPC
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
    return filler


@pytest.mark.parametrize("backend", BACKENDS)
def test_jobs_the_session_cancels_on_a_full_disk_run_again_on_the_rerun(
    tmp_path: Path, tmpfs: Path, fake_trainer_env: None, backend: str, request: pytest.FixtureRequest
) -> None:
    """SIGTERM while the store's disk is full: the `cancelled` records cannot be written; the
    lock file's note keeps them, and the rerun records them and runs those items again instead
    of taking the jobs for cancels by hand (the CI run where job 885 failed as `cancelled`)."""
    tag, args = cancels_cell(tmp_path, backend, request)
    store_dir = tmpfs / "store"
    store = store_dir / "cell.jsonl"
    if backend == "local":  # the job logs beside the store, but on the big disk: a bind mount (a
        # link there is refused: the tool never writes through one, docs/explanation/store.md)
        (store_dir / "cell" / "jobs").mkdir(parents=True)
        (tmp_path / "jobs").mkdir()
        subprocess.run(["mount", "--bind", str(tmp_path / "jobs"), str(store_dir / "cell" / "jobs")], check=True)
        request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(store_dir / "cell" / "jobs")], check=False))
    args.append(f"--xlatune-store={store_dir}")
    first = start(tmp_path, *args)
    in_flight = 2 if backend == "sbatch" else 1  # sbatch: a running and a queued job
    wait_for(
        "a result and jobs in flight",
        lambda: any(e["event"] == "result" for e in store_events(store)) and len(unfinished(store)) >= in_flight,
    )
    filler = fill(tmpfs, store)
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=ENDS_S) == pytest.ExitCode.INTERRUPTED
    out = (tmp_path / "out.txt").read_text()
    assert "SIGTERM received" in out and "Traceback" not in out, out
    cancelled = unfinished(store)
    assert len(cancelled) >= in_flight and not [e for e in store_events(store) if e["event"] == "cancelled"]
    note = json.loads((store_dir / "cell.jsonl.lock").read_text())
    # Kept where no new space is needed: every job in flight, and a job submitted after the disk
    # filled (its `submitted` record failed, so it was cancelled at once: the store never knew it;
    # on a loaded machine the session gets that far while the disk is being filled).
    known = {str(e["job_id"]) for e in store_events(store) if e["event"] == "submitted"}
    assert set(cancelled) <= set(note["cancelled"]) and not (set(note["cancelled"]) - set(cancelled)) & known, (
        note,
        cancelled,
    )
    if backend == "sbatch":
        wait_for("the cancels to land", lambda: not cancelled & active())

    filler.unlink()  # space freed
    second = subprocess.run(
        [sys.executable, "-m", "pytest", "cell.yml", "-v", *FIXED, *args],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out2 = second.stdout + second.stderr
    assert second.returncode == 0, out2
    assert f"recorded job(s) {', '.join(sorted(cancelled, key=int))} as cancelled by the session before" in out2
    assert not any(f"re-attached to job {job} " in out2 for job in cancelled), out2
    recorded = store_events(store)
    results = Counter(e["item"] for e in recorded if e["event"] == "result")
    assert len(results) == CANCELS_ITEMS and set(results.values()) == {1}, results
    ids = Counter(str(e["job_id"]) for e in recorded if e["event"] == "submitted")
    assert set(ids.values()) == {1} and not cancelled & {str(e["job_id"]) for e in recorded if e["event"] == "result"}
    if backend == "sbatch":  # every job Slurm saw is one the store knows, but for a job submitted
        # after the disk filled: its `submitted` record failed, so it was cancelled at once
        states = scheduler_states(tag)
        assert set(ids) <= set(states), (ids, states)
        assert all(states[job].startswith("CANCELLED") for job in set(states) - set(ids)), states


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_job_cancelled_by_hand_is_cancelled_and_not_retried(
    tmp_path: Path, fake_trainer_env: None, backend: str, request: pytest.FixtureRequest
) -> None:
    _tag, args = cancels_cell(tmp_path, backend, request)
    store = tmp_path / ".xlatune" / "cell.jsonl"
    first = start(tmp_path, *args)
    wait_for(
        "a result and a running job",
        lambda: any(e["event"] == "result" for e in store_events(store)) and unfinished(store),
    )
    victim = min(unfinished(store), key=int)
    record = next(e for e in store_events(store) if e["event"] == "submitted" and str(e["job_id"]) == victim)
    if backend == "sbatch":
        subprocess.run(["scancel", victim], check=True)
    else:
        os.kill(int(record["handle"]), signal.SIGTERM)  # what a person's `kill` does
    assert first.wait(timeout=900) == 1  # that item failed, the others ran
    out = (tmp_path / "out.txt").read_text()
    # The reason quotes slurmstepd's `*** JOB N ... CANCELLED AT` line when the log shows it by
    # the time the job is judged (`Slurm cancelled the job: …`), else Slurm's state (`cancelled
    # (CANCELLED …) with no failure before it`): which one is a race with slurmstepd's write.
    assert re.search(rf"job {victim} \(cancelled\): (cancelled \(|Slurm cancelled the job(?: on \S+)?: )", out), out
    assert "Traceback" not in out, out
    recorded = store_events(store)
    runs = [e for e in recorded if e["event"] == "submitted" and e["key"] == record["key"]]
    assert [str(e["job_id"]) for e in runs] == [victim]  # not retried
    assert [e["verdict"] for e in recorded if e["event"] == "result" and e["key"] == record["key"]] == ["cancelled"]
