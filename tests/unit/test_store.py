"""ResultStore: append-only, survives a torn last line, refuses a foreign schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.store import ResultStore, StoreError


def result(key: str, job_id: str, tgs: float | None = 100.0) -> JobResult:
    return JobResult(key=key, item=f"wave2::{key}[default]", wave="wave2", profile=key,
                     config_tag="default", kind="profile", job_id=job_id, verdict=Verdict.SUCCESS,
                     xla_flags=("--xla_a=1",), env=(("NCCL_X", "8"),), tgs=tgs,
                     tgs_values=(99.0, 101.0), steps_used=(5, 6))


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
    with pytest.raises(StoreError, match=r"s.jsonl:1: schema: expected 1, found 99"):
        list(ResultStore(path).events())
