"""ResultStore: append-only, one owner, heals a torn tail, durable writes, refuses a foreign schema."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.store import ResultStore, StoreError, StoreLocked, StoreWriteError


def result(key: str, job_id: str, tgs: float | None = 100.0) -> JobResult:
    return JobResult(
        key=key,
        item=f"wave2::{key}[default]",
        wave="wave2",
        profile=key,
        config_tag="default",
        kind="profile",
        job_id=job_id,
        verdict=Verdict.SUCCESS,
        xla_flags=("--xla_a=1",),
        env=(("NCCL_X", "8"),),
        tgs=tgs,
        tgs_values=() if tgs is None else (tgs - 1.0, tgs + 1.0),
        steps_used=(5, 6),
    )


def test_results_round_trip_and_latest_wins(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "s.jsonl")
    store.add_result(result("a", "1", 100.0))
    store.add_result(result("a", "2", 110.0))
    store.add_result(result("b", "3"))
    latest = store.latest_by_key()
    assert latest["a"].tgs == 110.0 and latest["a"].job_id == "2"
    assert latest["a"] == result("a", "2", 110.0)
    assert store.max_job_number() == 3


def test_torn_last_line_is_ignored(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "s.jsonl")
    store.add_result(result("a", "1"))
    with (tmp_path / "s.jsonl").open("ab") as handle:
        handle.write(b'{"schema": 1, "event": "result", "key": "b"')  # killed mid-write
    assert list(store.latest_by_key()) == ["a"]


def test_submitted_without_result_is_pending(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "s.jsonl")
    store.append("submitted", key="a", job_id="7")
    store.append("submitted", key="b", job_id="8")
    store.add_result(result("a", "7"))
    pending = store.pending_submissions()
    assert list(pending) == ["b"] and pending["b"]["job_id"] == "8"


def test_foreign_schema_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"schema": 99, "event": "result"}) + "\n")
    with pytest.raises(StoreError, match=r"s.jsonl:1: schema: expected 1, found 99; a newer pytest-xlatune wrote it"):
        list(ResultStore(path).events())


def test_a_long_or_odd_schema_value_is_shortened_and_says_what_to_do(tmp_path: Path) -> None:
    """A 500-character schema string was printed whole, with nothing to do about it."""
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"schema": "<b>9</b>" + "x" * 500, "event": "result"}) + "\n")
    with pytest.raises(StoreError) as refused:
        list(ResultStore(path).events())
    assert str(refused.value) == (
        f"{path}:1: schema: expected 1, found '<b>9</b>{'x' * 48}...; the line is no record of this tool: "
        "remove it, or pass another --xlatune-store"
    )


# ---- one owner per store ------------------------------------------------------------------


def test_a_second_owner_is_refused_naming_the_holder(tmp_path: Path) -> None:
    first, second = ResultStore(tmp_path / "s.jsonl"), ResultStore(tmp_path / "s.jsonl")
    first.acquire("session-a")
    with pytest.raises(StoreLocked) as refused:
        second.acquire("session-b")
    message = str(refused.value)
    assert "\n" not in message
    assert f"pid {os.getpid()}" in message and f"host {socket.gethostname()}" in message
    assert "another pytest session" in message and "--xlatune-store" in message
    first.release()
    assert second.acquire("session-b") == []  # free again


def test_a_worker_of_the_same_session_is_told_to_use_loadgroup(tmp_path: Path) -> None:
    ResultStore(tmp_path / "s.jsonl").acquire("run-1")
    with pytest.raises(StoreLocked, match=r"another xdist worker of this session.*--dist loadgroup"):
        ResultStore(tmp_path / "s.jsonl").acquire("run-1")


def test_the_kernel_frees_the_lock_of_a_killed_owner(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pytest_xlatune.store import ResultStore; "
            f"ResultStore(__import__('pathlib').Path({str(path)!r})).acquire('x'); print('held', flush=True); "
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreLocked, match=f"pid {holder.pid}"):
            ResultStore(path).acquire("y")
    finally:
        holder.kill()  # kill -9: no clean-up runs in the holder
        holder.wait()
    assert ResultStore(path).acquire("y") == []


# ---- healing ----------------------------------------------------------------------------


def test_a_torn_tail_is_set_aside_and_the_next_record_starts_on_a_fresh_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    store = ResultStore(path)
    store.add_result(result("a", "1"))
    with path.open("ab") as handle:
        handle.write(b'{"schema": 1, "event": "submitted", "key": "b", "job')  # a crash mid-write
    notes = store.acquire()
    assert len(notes) == 1 and "set aside a torn last line" in notes[0] and "s.jsonl.torn" in notes[0]
    assert (tmp_path / "s.jsonl.torn").read_bytes().startswith(b'{"schema": 1, "event": "submitted"')
    store.append("submitted", key="b", job_id="2", log_path="l", job_dir="d")
    assert list(store.pending_submissions()) == ["b"]  # not glued onto the fragment
    assert list(store.latest_by_key()) == ["a"]
    assert store.heal() == []  # healed once, quiet after


def test_a_lost_last_newline_keeps_the_last_result(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    store = ResultStore(path)
    store.add_result(result("a", "1"))
    store.add_result(result("b", "2"))
    path.write_bytes(path.read_bytes()[:-1])  # the last byte gone
    notes = store.acquire()
    assert notes == [f"{path}: the last record had no newline; completed it"]
    assert sorted(store.latest_by_key()) == ["a", "b"]
    assert not (tmp_path / "s.jsonl.torn").exists()


def test_lines_that_are_not_records_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    store = ResultStore(path)
    store.add_result(result("a", "1"))
    with path.open("ab") as handle:
        handle.write(b'42\n[1, 2]\n"text"\n{"schema": 1, "event": "result", "key": "x"}\nnot json\n')
    store.add_result(result("b", "2"))
    assert sorted(store.latest_by_key()) == ["a", "b"]
    assert store.pending_submissions() == {} and store.max_job_number() == 2
    notes = store.acquire()
    quarantine = tmp_path / "s.jsonl.quarantine"
    assert notes == [
        f"{path}:5: the result record of x was quarantined into {quarantine} (it has no checksum "
        "(every record after the first summed one has one)); it is not used, and the item runs again",
        f"{path}: skipped 4 line(s) that are not well-formed records (line 2, 3, 4, 6); set aside into {quarantine}",
    ]
    assert quarantine.read_bytes().splitlines()[0] == b"42"
    assert [e["event"] for e in store.events()] == ["result", "result", "quarantined"]


# ---- durable writes ---------------------------------------------------------------------


def test_a_failed_write_is_undone_and_names_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    store = ResultStore(path)
    store.add_result(result("a", "1"))
    before = path.read_bytes()
    real_write = os.write
    calls = []

    def filling_disk(fd: int, data: bytes) -> int:  # 4096 bytes fit, then the disk is full
        calls.append(len(data))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, bytes(data[:4096]))

    monkeypatch.setattr("pytest_xlatune.store.os.write", filling_disk)
    big = replace(result("b", "2"), log_tail="x" * 10000)
    with pytest.raises(StoreWriteError) as failed:
        store.add_result(big)
    assert str(failed.value).startswith(f"{path}: cannot write the results store (No space left on device)")
    assert "the result record of wave2::b[default] is not stored" in str(failed.value)
    assert path.read_bytes() == before  # no 4096-byte cut left behind
    monkeypatch.undo()
    store.add_result(big)
    assert store.latest_by_key()["b"].log_tail == "x" * 10000


def test_a_short_write_is_continued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    monkeypatch.setattr("pytest_xlatune.store.os.write", lambda fd, data: real_write(fd, bytes(data[:1000])))
    store = ResultStore(tmp_path / "s.jsonl")
    store.add_result(replace(result("a", "1"), log_tail="y" * 5000))
    monkeypatch.undo()
    assert store.latest_by_key()["a"].log_tail == "y" * 5000


def test_a_cancel_the_full_store_cannot_take_is_noted_and_recorded_by_the_next_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    first = ResultStore(path)
    first.acquire("one")
    for key, job in (("a", "7"), ("b", "8")):
        first.append(
            "submitted",
            key=key,
            item=f"wave2::{key}[default]",
            job_id=job,
            log_path=f"/logs/{job}.log",
            job_dir=f"/jobs/{job}",
        )

    def full(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(ResultStore, "_write_raw", staticmethod(full))
    with pytest.raises(StoreWriteError):
        first.append("cancelled", job_id="7", key="a")
    assert first.note_cancelled("7")  # the session cancelled 7 on its way out; 8 is cancelled by hand
    monkeypatch.undo()
    first.release()
    second = ResultStore(path)
    notes = second.acquire("two")
    assert len(notes) == 1 and notes[0].startswith(
        f"{path}: recorded job(s) 7 as cancelled by the session before (pid {os.getpid()}, started "
    )
    assert notes[0].endswith("which cancelled them on its way out but could not write the store; their runs go again")
    assert set(second.pending_submissions()) == {"b"}  # 7 is submitted again, 8 re-attached to
    assert [e["job_id"] for e in second.events() if e["event"] == "cancelled"] == ["7"]
    second.release()
    assert ResultStore(path).acquire("three") == []  # recorded once: the new owner's note is clean


# Every verdict value a store written before Verdict was built from FailureClass can hold
# (results.py at d7e056f): each must still load, and be written back byte for byte.
STORED_VERDICTS = (
    "success",
    "soft_success",
    "unknown_flag",
    "oom",
    "failed",
    "cancelled",
    "no_steps",
    "rccl_init_flake",
    "coordination_timeout",
    "heartbeat_timeout",
    "nccl_timeout",
    "xla_compile_fail",
    "python_exception",
    "node_fail",
    "gpu_runtime_error",
    "nic_fault",
    "hang",
    "disk_full",
    "infra_flake",
)


def test_a_store_of_every_earlier_verdict_loads_and_writes_the_same_bytes(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    records = [
        {**result(value, str(n)).to_dict(), "verdict": value, "event": "result", "schema": 1}
        for n, value in enumerate(STORED_VERDICTS, 1)
    ]
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    latest = ResultStore(path).latest_by_key()
    assert {key: r.verdict.value for key, r in latest.items()} == {v: v for v in STORED_VERDICTS}
    assert {v.value for v in Verdict} >= set(STORED_VERDICTS)  # none lost (a new class adds one)
    again = ResultStore(tmp_path / "new.jsonl")
    for value in STORED_VERDICTS:
        again.add_result(latest[value])
    written = [json.loads(line) for line in (tmp_path / "new.jsonl").read_text().splitlines()]
    assert [r["verdict"] for r in written if r.get("event") == "result"] == list(STORED_VERDICTS)
