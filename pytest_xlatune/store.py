"""Append-only results store: one JSON line per event, written and fsynced the moment it is known.

A line is written with a single `os.write` on an `O_APPEND` descriptor, so a `kill -9` leaves
at worst a torn last line, which `read` skips. Events:

- `sweep`: the frozen nodelist and backend of a cell (first run of the cell);
- `submitted`: a job id for a run key (lets a rerun re-attach instead of resubmitting);
- `result`: a finished job (JobResult.to_dict());
- `cancelled`: a submitted job this session cancelled before its result (submitted again next run);
- `attempt`: a failed job the playbook retried (the item's final `result` comes later);
- `stop`: a stop trigger fired (the reason; a rerun resumes from the store).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .results import JobResult

SCHEMA_VERSION = 1


class StoreError(Exception):
    """The store file exists but cannot be used (e.g. a newer schema)."""


class ResultStore:
    """Results of one cell, in `<store_dir>/<cell stem>.jsonl`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, event: str, **payload: Any) -> None:
        record = {"schema": SCHEMA_VERSION, "event": event, "time": time.time(), **payload}
        line = (json.dumps(record, sort_keys=True, default=str) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def add_result(self, result: JobResult) -> None:
        self.append("result", **result.to_dict())

    def events(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.endswith(b"\n"):
                    return  # torn last line from a kill: everything before it is intact
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                schema = record.get("schema")
                if schema != SCHEMA_VERSION:
                    raise StoreError(
                        f"{self.path}:{number}: schema: expected {SCHEMA_VERSION}, found {schema!r}"
                    )
                yield record

    def results(self) -> list[JobResult]:
        """Every stored result, latest last."""
        return [JobResult.from_dict(r) for r in self.events() if r["event"] == "result"]

    def latest_by_key(self) -> dict[str, JobResult]:
        latest: dict[str, JobResult] = {}
        for result in self.results():
            latest[result.key] = result
        return latest

    def pending_submissions(self) -> dict[str, dict[str, Any]]:
        """Run key → its `submitted` record, for jobs submitted but without a result yet."""
        pending: dict[str, dict[str, Any]] = {}
        for record in self.events():
            if record["event"] == "submitted":
                pending[record["key"]] = record
            elif record["event"] in ("result", "cancelled", "attempt"):
                pending.pop(record["key"], None)
        return pending

    def sweep_info(self) -> dict[str, Any] | None:
        """The latest `sweep` event: the frozen nodelist current results are tied to
        (a new one is appended only when the user asks for a fresh baseline elsewhere)."""
        sweeps = [r for r in self.events() if r["event"] == "sweep"]
        return sweeps[-1] if sweeps else None

    def max_job_number(self) -> int:
        numbers = [int(r["job_id"]) for r in self.events()
                   if r["event"] in ("submitted", "result") and str(r.get("job_id", "")).isdigit()]
        return max(numbers, default=0)
