"""One store line: a JSON record with its checksum, and why a line is no usable record (pure).

A record is written as its JSON (sorted keys) with `"sum"` appended last: the first 16 hex
digits of the SHA-256 of the JSON without it. A line is checked byte for byte, so a flipped
digit anywhere (a TGS, a job id, a flag) fails it. Lines written before checksums (no `"sum"`)
are read while no summed line came before them (old stores stay readable); after the first
summed line, a line without one is a damaged or forged record. A result whose TGS is not the
mean of its own per-step values (beyond rounding) contradicts itself and is refused as well.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from .results import JOB_ID_EXPECTED, JOB_ID_RE, JobResult

SCHEMA_VERSION = 1
SUM_KEY = "sum"
_SUM_RE = re.compile(rb', "sum": "([0-9a-f]{16})"\}\r?\n?$')
_NEEDS = {
    "submitted": ("key", "job_id"),
    "submitting": ("key", "mark", "job_name"),
    "unsubmitted": ("key", "mark"),
    "quarantined": ("key",),
    "result": ("key", "item", "wave", "profile", "config_tag", "kind", "job_id", "verdict"),
    "attempt": ("key",),
    "sweep": ("nodelist",),
}
# A stored TGS is the plain mean of the stored per-step values (verdict/steady.py): JSON keeps
# floats exactly, so anything beyond float rounding is damage.
REL_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Line:
    """A parsed line: its record (None: no usable record), why not, and whether it is summed."""

    record: dict[str, Any] | None
    problem: str = ""
    summed: bool = False
    result: JobResult | None = None  # a `result` or `attempt` record, read


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:16]


def encode(record: dict[str, Any]) -> bytes:
    """The line of a record: sorted-key JSON with its checksum as the last key, and a newline."""
    body = json.dumps(record, sort_keys=True, default=str, allow_nan=True).encode()
    return body[:-1] + f', "{SUM_KEY}": "{digest(body)}"}}\n'.encode()


def parse(raw: bytes, *, summed_before: bool = False) -> Line:
    """Parse and check one line (with or without its newline)."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return Line(None, "not JSON")
    if not isinstance(record, dict):
        return Line(None, f"a JSON {type(record).__name__}, not a record")
    if not isinstance(record.get("event"), str):
        return Line(None, "no event")
    summed = SUM_KEY in record
    if summed:
        found = _SUM_RE.search(raw)
        if found is None or digest(raw[: found.start()] + b"}") != found.group(1).decode():
            return Line(None, "it fails its checksum", True)
        del record[SUM_KEY]
    elif summed_before:
        return Line(None, "it has no checksum (every record after the first summed one has one)")
    if record.get("schema") != SCHEMA_VERSION:
        return Line(record, summed=summed)  # another schema: the reader says so, naming the line
    missing = [key for key in _NEEDS.get(record["event"], ()) if key not in record]
    if missing:
        return Line(None, f"no {missing[0]!r}", summed)
    wrong = [
        key
        for key in _NEEDS.get(record["event"], ())
        if not isinstance(record[key], str) and not (key == "job_id" and type(record[key]) is int)
    ]
    if wrong:
        return Line(None, f"{wrong[0]}: expected a string, found {record[wrong[0]]!r}"[:200], summed)
    job_id = record.get("job_id")
    if isinstance(job_id, str) and not JOB_ID_RE.fullmatch(job_id):  # it reaches the terminal, junit, HTML
        return Line(None, f"job_id: expected {JOB_ID_EXPECTED}, found {job_id!r}"[:200], summed)
    if record["event"] in ("result", "attempt"):
        problem = _contradiction(record)
        if not problem:
            try:
                result = JobResult.from_dict(record)
            except (TypeError, ValueError, KeyError, AttributeError) as error:
                problem = f"not a job result ({type(error).__name__}: {error})"[:200]
            else:
                return Line(record, summed=summed, result=result)
        return Line(None, problem, summed)
    return Line(record, summed=summed)


def _contradiction(record: dict[str, Any]) -> str:
    """Why a result's values cannot all be true, or ''."""
    tgs, values = record.get("tgs"), record.get("tgs_values") or []
    if (tgs is not None and not isinstance(tgs, (int, float))) or isinstance(tgs, bool):
        return f"tgs: expected a number, found {tgs!r}"
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "tgs_values: expected a list of numbers"
    if tgs is None or not values:
        return ""
    mean = math.fsum(values) / len(values)
    if not math.isfinite(mean) or not math.isfinite(tgs):
        return "" if str(mean) == str(tgs) else f"tgs {tgs} is not the mean of its per-step values"
    if abs(tgs - mean) > REL_TOLERANCE * max(abs(mean), 1.0):
        return f"it contradicts itself: tgs {tgs:.6g} vs {mean:.6g}, the mean of its own {len(values)} per-step values"
    return ""


class Parsed:
    """What the reads of one store file found so far, extended by the lines added since: the
    usable records, the results, the latest result per run key, the pending submissions and
    the refused lines (line number, bytes, why, what the line claimed to be)."""

    def __init__(self, ident: tuple[int, int]) -> None:
        self.ident = ident  # (device, inode): another file (a rewrite) is parsed from the start
        self.offset = 0  # bytes parsed (complete lines only)
        self.lines = 0
        self.summed = False
        self.records: list[dict[str, Any]] = []
        self.results: list[JobResult] = []
        self.jobs: list[JobResult] = []
        self.latest: dict[str, JobResult] = {}
        self.by_event: dict[str, list[dict[str, Any]]] = {}
        self.pending: dict[str, dict[str, Any]] = {}  # key → `submitted` record without a result
        self.bad: list[tuple[int, bytes, str, dict[str, Any]]] = []

    def take(self, data: bytes) -> tuple[int, Any] | None:
        """Parse complete lines; stop at a record of another schema: (its line, its schema)."""
        for raw in data.splitlines(keepends=True):
            self.lines += 1
            self.offset += len(raw)
            if not raw.strip():
                continue
            line = parse(raw, summed_before=self.summed)
            self.summed = self.summed or line.summed
            record = line.record
            if record is None:
                self.bad.append((self.lines, raw, line.problem, said(raw)))
                continue
            if record.get("schema") != SCHEMA_VERSION:
                return self.lines, record.get("schema")
            self._add(record, line.result)
        return None

    def _add(self, record: dict[str, Any], result: JobResult | None) -> None:
        event = record["event"]
        self.records.append(record)
        self.by_event.setdefault(event, []).append(record)
        if event == "submitted":
            self.pending[record["key"]] = record
        elif event in ("result", "cancelled", "attempt", "quarantined"):
            key = record.get("key", "")
            self.pending.pop(key if isinstance(key, str) else "", None)
        if result is not None:
            self.jobs.append(result)
            if event == "result":
                self.results.append(result)
                self.latest[result.key] = result
        elif event == "quarantined" and record.get("of") == "result":
            self.latest.pop(record["key"], None)  # an older result is not reused: it runs again


def said(raw: bytes) -> dict[str, Any]:
    """What a refused line claims to be (its event, key, item), for the line that names it."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return {k: record[k] for k in ("event", "key", "item") if k in record} if isinstance(record, dict) else {}


def schema_message(path: object, line: int, schema: object) -> str:
    """A record of another schema: one line, the value shortened, what to do."""
    shown = repr(schema)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    newer = isinstance(schema, int) and not isinstance(schema, bool) and schema > SCHEMA_VERSION
    remedy = "a newer pytest-xlatune wrote it: upgrade" if newer else "the line is no record of this tool: remove it"
    return f"{path}:{line}: schema: expected {SCHEMA_VERSION}, found {shown}; {remedy}, or pass another --xlatune-store"
