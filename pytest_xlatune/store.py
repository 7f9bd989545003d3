"""Append-only results store: one JSON line per event, written and fsynced the moment it is known.

It owns the `.jsonl` file of a cell, the OS lock beside it (`<cell>.jsonl.lock`, one session
per store) and the `.torn` side file its healing sets torn tails aside into.

The lock file holds the owner's note in NOTE_SIZE bytes written (and so allocated) when the
session takes the store. When a `cancelled` record cannot be written (a full disk), the job
ids go into that note in place, which needs no new disk space; the next owner writes the
missing records first, so a job the session cancelled on its way out is submitted again, while
a job cancelled by hand (no record, no note) stays `cancelled`.

A line is written with `os.write` on an `O_APPEND` descriptor until every byte is down, then
fsynced; a write that fails (disk full, EIO) is undone (the file is cut back to where it was)
and raised as StoreWriteError, so a result is never reported unless its record is durable.
A `kill -9` leaves at worst a torn last line: the session that next owns the store sets it
aside and starts the next record on a fresh line. Events:

- `sweep`: the frozen nodelist and backend of a cell (first run of the cell);
- `submitting`: a submission about to be made, with its mark (Slurm: the job comment), written
  before the scheduler is asked: a session killed before the `submitted` record leaves it, and
  the rerun looks the job up by its mark (engine/recover.py);
- `submitted`: a job id for a run key (lets a rerun re-attach instead of resubmitting);
- `unsubmitted`: a `submitting` mark the rerun found no job for (the run is submitted again);
- `result`: a finished job (JobResult.to_dict());
- `cancelled`: a submitted job this session cancelled before its result (submitted again next run);
- `attempt`: a failed job the playbook retried (the item's final `result` comes later);
- `stop`: a stop trigger fired (the reason; a rerun resumes from the store).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .results import JobResult, RunKind, Verdict
from .errors import XlatuneError

SCHEMA_VERSION = 1
NOTE_SIZE = 4096  # the owner's note in the lock file: written whole, so rewriting it takes no space


class StoreError(XlatuneError):
    """The store file exists but cannot be used (e.g. a newer schema)."""


class StoreLocked(StoreError):
    """Another session owns the store: its lock file is held."""


class StoreWriteError(StoreError):
    """A record could not be written durably (disk full, I/O error): the session must stop."""


class ResultStore:
    """Results of one cell, in `<store_dir>/<cell stem>.jsonl`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_fd: int | None = None
        self._note: dict[str, Any] = {}
        self.noted_cancelled: frozenset[str] = frozenset()  # the previous owner's noted cancels

    # ---- ownership ----------------------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    @property
    def torn_path(self) -> Path:
        return self.path.with_name(self.path.name + ".torn")

    def acquire(self, session: str = "") -> list[str]:
        """Take the store for this session (the kernel frees it when the process dies) and heal
        it; return what the healing did, one line each. StoreLocked names the holder."""
        if self._lock_fd is not None:
            return []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _holder(os.pread(fd, NOTE_SIZE, 0))
            os.close(fd)
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise StoreError(f"{self.lock_path}: cannot lock the store: {error.strerror}") from None
            same = session and holder.get("session") == session
            raise StoreLocked(
                f"{self.path}: in use by {'another xdist worker of this session' if same else 'another pytest session'}"
                f" (host {holder.get('host', '?')}, pid {holder.get('pid', '?')}, started "
                f"{holder.get('started', '?')}); "
                + ("run the cell's items in one worker: --dist loadgroup" if same else
                   "wait for it to end, or pass another --xlatune-store")) from None
        try:
            notes = self.heal() + self._record_noted_cancels(_holder(os.pread(fd, NOTE_SIZE, 0)))
        except BaseException:
            os.close(fd)  # e.g. the missing records cannot be written yet: the note stays
            raise
        self._lock_fd = fd
        self._note = {"host": socket.gethostname(), "pid": os.getpid(), "session": session,
                      "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        self._write_note()  # without it the lock still holds; a refused session says "?"
        return notes

    def _write_note(self) -> bool:
        """The owner's note, padded to NOTE_SIZE, in place at the start of the lock file."""
        data = json.dumps(self._note).encode()
        if self._lock_fd is None or len(data) >= NOTE_SIZE:
            return False
        try:
            os.pwrite(self._lock_fd, data + b"\n" + b" " * (NOTE_SIZE - len(data) - 1), 0)
            os.fsync(self._lock_fd)
        except OSError:
            return False
        return True

    def note_cancelled(self, job_id: str) -> bool:
        """The store could not take this job's `cancelled` record: keep it in the owner's note
        (space written at acquire), for the next owner to record. False: not kept either."""
        noted = self._note.setdefault("cancelled", [])
        noted.append(job_id)
        if self._write_note():
            return True
        noted.remove(job_id)
        return False

    def _record_noted_cancels(self, previous: dict[str, Any]) -> list[str]:
        """Write the `cancelled` records the previous owner noted but could not store (only for
        jobs still waiting for one: a record never ends a later submission of the run)."""
        noted = [str(j) for j in previous.get("cancelled", []) if isinstance(j, (str, int))]
        self.noted_cancelled = frozenset(noted)  # also jobs it never recorded (engine/recover.py)
        pending = {str(r["job_id"]): key for key, r in self.pending_submissions().items()}
        done = [job for job in noted if job in pending]
        for job in done:
            self.append("cancelled", job_id=job, key=pending[job], noted_by=previous.get("pid", "?"))
        if not done:
            return []
        return [f"{self.path}: recorded job(s) {', '.join(done)} as cancelled by the session before "
                f"(pid {previous.get('pid', '?')}, started {previous.get('started', '?')}), which "
                "cancelled them on its way out but could not write the store; their runs go again"]

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def heal(self) -> list[str]:
        """Set a torn last line aside into `.torn` and end the file on a newline; count the
        lines that are not records (they are skipped on every read)."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        notes = []
        if data and not data.endswith(b"\n"):
            start = data.rfind(b"\n") + 1
            fragment = data[start:]
            if _record(fragment) is not None:  # only the newline was lost: the record is whole
                self._write_raw(self.path, b"\n")
                notes.append(f"{self.path}: the last record had no newline; completed it")
            else:
                self._write_raw(self.torn_path, fragment + b"\n")
                with self.path.open("r+b") as handle:
                    handle.truncate(start)
                    os.fsync(handle.fileno())
                notes.append(f"{self.path}: set aside a torn last line ({len(fragment)} bytes) into "
                             f"{self.torn_path}; the next record starts on a fresh line")
        bad = [n for n, raw in enumerate(data.splitlines(), start=1)
               if raw.strip() and _record(raw) is None]
        if data and not data.endswith(b"\n") and bad and bad[-1] == len(data.splitlines()):
            bad.pop()  # the torn tail, already reported
        if bad:
            shown = ", ".join(map(str, bad[:5])) + (", …" if len(bad) > 5 else "")
            notes.append(f"{self.path}: skipped {len(bad)} line(s) that are not well-formed "
                         f"records (line {shown})")
        return notes

    # ---- writing ------------------------------------------------------------------------

    def append(self, event: str, **payload: Any) -> None:
        record = {"schema": SCHEMA_VERSION, "event": event, "time": time.time(), **payload}
        line = (json.dumps(record, sort_keys=True, default=str) + "\n").encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write_raw(self.path, line)
        except OSError as error:
            what = f"the {event} record" + (f" of {payload['item']}" if payload.get("item") else "")
            raise StoreWriteError(
                f"{self.path}: cannot write the results store ({error.strerror or error}); {what} "
                "is not stored: free space or fix the disk, then rerun (stored results are kept)"
            ) from None

    @staticmethod
    def _write_raw(path: Path, data: bytes) -> None:
        """Write all of `data` at the end of `path` and fsync, or leave the file as it was."""
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:  # a short write (a filling disk) is continued, never left cut
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError:
                try:
                    os.ftruncate(fd, size)
                except OSError:
                    pass  # a torn tail the next owner sets aside
                raise
        finally:
            os.close(fd)

    def add_result(self, result: JobResult) -> None:
        self.append("result", **result.to_dict())

    # ---- reading ------------------------------------------------------------------------

    def events(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.endswith(b"\n"):
                    return  # torn last line from a kill: everything before it is intact
                record = _record(raw)
                if record is None:
                    continue  # counted by heal() when the session took the store
                schema = record.get("schema")
                if schema != SCHEMA_VERSION:
                    raise StoreError(
                        f"{self.path}:{number}: schema: expected {SCHEMA_VERSION}, found {schema!r}"
                    )
                yield record

    def results(self) -> list[JobResult]:
        """Every stored result, latest last."""
        return [JobResult.from_dict(r) for r in self.events() if r["event"] == "result"]

    def jobs(self) -> list[JobResult]:
        """Every job the cell ran, as stored: results and the retried attempts (for accounting)."""
        return [JobResult.from_dict(r) for r in self.events() if r["event"] in ("result", "attempt")]

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
                pending.pop(record.get("key", ""), None)
        return pending

    def unconfirmed_submissions(self) -> list[dict[str, Any]]:
        """`submitting` records whose mark no `submitted` or `unsubmitted` record settled: the
        session that wrote them died between the record and the job id's."""
        intents: dict[str, dict[str, Any]] = {}
        for record in self.events():
            if record["event"] == "submitting":
                intents[str(record["mark"])] = record
            elif record["event"] in ("submitted", "unsubmitted") and record.get("mark"):
                intents.pop(str(record["mark"]), None)
        return list(intents.values())

    def sweep_info(self) -> dict[str, Any] | None:
        """The latest `sweep` event: the frozen nodelist current results are tied to
        (a new one is appended only when the user asks for a fresh baseline elsewhere)."""
        sweeps = [r for r in self.events() if r["event"] == "sweep"]
        return sweeps[-1] if sweeps else None

    def max_job_number(self) -> int:
        numbers = [int(r["job_id"]) for r in self.events()
                   if r["event"] in ("submitted", "result") and str(r.get("job_id", "")).isdigit()]
        return max(numbers, default=0)


_NEEDS = {"submitted": ("key", "job_id"), "submitting": ("key", "mark", "job_name"),
          "unsubmitted": ("key", "mark"),
          "result": ("key", "item", "wave", "profile", "config_tag", "kind", "job_id", "verdict"),
          "attempt": ("key",), "sweep": ("nodelist",)}


_VERDICTS = frozenset(v.value for v in Verdict)
_KINDS = frozenset(k.value for k in RunKind)


def _record(raw: bytes) -> dict[str, Any] | None:
    """A well-formed record (a JSON object with its event and that event's keys), else None."""
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("event"), str):
        return None
    if record.get("schema") != SCHEMA_VERSION:
        return record  # another schema: events() says so, naming the line
    if any(key not in record for key in _NEEDS.get(record["event"], ())):
        return None
    if record["event"] == "result" and (record["verdict"] not in _VERDICTS or record["kind"] not in _KINDS):
        return None
    return record


def _holder(raw: bytes) -> dict[str, Any]:
    try:
        holder = json.loads(raw.decode("utf-8", "replace").strip() or "{}")
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}
