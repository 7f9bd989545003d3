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
aside and starts the next record on a fresh line. Events (each one frozen dataclass in
records.py, with its fields and JSON form; `write` takes them, `append` checks the kind):

- `sweep`: the frozen nodelist and backend of a cell (first run of the cell);
- `submitting`: a submission about to be made, with its mark (Slurm: the job comment), written
  before the scheduler is asked: a session killed before the `submitted` record leaves it, and
  the rerun looks the job up by its mark (engine/recover.py);
- `submitted`: a job id for a run key (lets a rerun re-attach instead of resubmitting);
- `unsubmitted`: a `submitting` mark the rerun found no job for (the run is submitted again);
- `result`: a finished job (JobResult.to_dict());
- `cancelled`: a submitted job this session cancelled before its result (submitted again next run);
- `attempt`: a failed job the playbook retried (the item's final `result` comes later);
- `stop`: a stop trigger fired (the reason; a rerun resumes from the store);
- `quarantined`: a damaged record of this key was set aside (its submission is not waited for);
- `environment`, `inventory`: what pre-flight found (a lock's measured_on; maxtext-slurm's files);
- `node_resume`, `cleanup`, `tune_arm_added`: a node resumed, TUNE_PROFILE blocks added and removed;
- `drift`, `conclude`, `skipped`, `early_stop`: the adaptive sweep's controls and decisions.

Every line carries a checksum (store_lines.py). A line that fails it, contradicts itself or is no
record is never used: the session that takes the store moves it into `<cell>.jsonl.quarantine`
with one line saying so, and the item it belonged to runs again. No file of the store is opened
through a symbolic link (safefs.py). Reads are incremental: a session parses each line once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import records, store_heal, store_lines
from .errors import XlatuneError
from .records import R, Record
from .results import JobResult
from .safefs import LinkRefused, file_kind, link_message, open_nofollow
from .store_lines import SCHEMA_VERSION, Parsed

NOTE_SIZE = 4096  # the owner's note in the lock file: written whole, so rewriting it takes no space


class StoreError(XlatuneError):
    """The store file exists but cannot be used (e.g. a newer schema)."""


class StoreLocked(StoreError):
    """Another session owns the store: its lock file is held."""


class StoreWriteError(StoreError):
    """A record could not be written durably (disk full, I/O error): the session must stop."""


class ResultStore:
    """Results of one cell, in `<store_dir>/<cell slug>.jsonl`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_fd: int | None = None
        self._note: dict[str, Any] = {}
        self.noted_cancelled: frozenset[str] = frozenset()  # the previous owner's noted cancels
        self._parsed: Parsed | None = None

    # ---- ownership ----------------------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    @property
    def torn_path(self) -> Path:
        return self.path.with_name(self.path.name + ".torn")

    @property
    def quarantine_path(self) -> Path:
        return self.path.with_name(self.path.name + ".quarantine")

    def acquire(self, session: str = "") -> list[str]:
        """Take the store for this session (the kernel frees it when the process dies) and heal
        it; return what the healing did, one line each. StoreLocked names the holder."""
        if self._lock_fd is not None:
            return []
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_nofollow(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except LinkRefused as error:
            raise StoreError(str(error.strerror)) from None
        except OSError as error:
            raise StoreError(
                f"{error.filename or self.lock_path}: cannot open the store's lock: {error.strerror or error}"
            ) from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # a FIFO read as the owner's note: "Illegal seek" later
            os.close(fd)
            raise StoreError(
                f"{self.lock_path}: expected the store's lock (a regular file), found {file_kind(mode)}; move it away"
            )
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
                + (
                    "run the cell's items in one worker: --dist loadgroup"
                    if same
                    else "wait for it to end, or pass another --xlatune-store"
                )
            ) from None
        try:
            for side in (self.path, self.torn_path, self.quarantine_path):
                self._check_file(side)
            notes = self.heal() + store_heal.record_noted_cancels(self, _holder(os.pread(fd, NOTE_SIZE, 0)))
        except LinkRefused as error:
            os.close(fd)
            raise StoreError(str(error.strerror)) from None
        except OSError as error:  # healing needs to write (a full disk): nothing is submitted
            os.close(fd)
            raise StoreError(
                f"{error.filename or self.path}: cannot heal the results store "
                f"({error.strerror or error}); free space or fix the disk, then rerun"
            ) from None
        except BaseException:
            os.close(fd)  # e.g. the missing records cannot be written yet: the note stays
            raise
        self._lock_fd = fd
        self._note = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "session": session,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        }
        self._write_note()  # without it the lock still holds; a refused session says "?"
        return notes

    def adopt(self, legacy: Path | None) -> list[str]:
        """Move a store an older version kept under this cell's former name to this one (with
        its torn and quarantine side files), unless this one exists or the old one is in use."""
        if legacy is None or self.path.exists() or not legacy.is_file() or legacy.is_symlink():
            return []
        old = ResultStore(legacy)
        try:
            old.acquire()
        except StoreError:
            return []
        try:
            for side in ("", ".torn", ".quarantine"):
                source = legacy.with_name(legacy.name + side)
                if source.is_file() and not source.is_symlink():
                    os.replace(source, self.path.with_name(self.path.name + side))
        finally:
            old.release()
        return [f"{legacy}: moved to {self.path} (store names are now unique per cell path)"]

    @staticmethod
    def _check_file(path: Path) -> None:
        """A store file is a regular file or absent: never a link, a folder or a device."""
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return
        except OSError as error:
            raise StoreError(f"{path}: cannot read the results store: {error.strerror}") from None
        if stat.S_ISLNK(mode):
            raise StoreError(link_message(path))
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "no regular file"
            raise StoreError(
                f"{path}: expected the results store (a file of JSON lines), found "
                f"{kind}; move it away or pass another --xlatune-store"
            )

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

    def heal(self) -> list[str]:
        """Set a torn last line aside and quarantine every line that is no usable record
        (store_heal.py); return what it did, one line each."""
        return store_heal.heal(self)

    def forget_parsed(self) -> None:
        """The file was rewritten: the next read parses it from the start."""
        self._parsed = None

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    # ---- writing ------------------------------------------------------------------------

    def write(self, record: Record) -> None:
        """Append one record, durably (StoreWriteError when it cannot be)."""
        self.append(record.EVENT, **record.to_json())

    def append(self, event: str, **payload: Any) -> None:
        """Append an event's fields as given; `event` must name a records.py class (RecordError)."""
        records.record_class(event)
        line = store_lines.encode({"schema": SCHEMA_VERSION, "event": event, "time": time.time(), **payload})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write_raw(self.path, line)
        except LinkRefused as error:
            raise StoreWriteError(str(error.strerror)) from None
        except OSError as error:
            what = f"the {event} record" + (f" of {payload['item']}" if payload.get("item") else "")
            raise StoreWriteError(
                f"{self.path}: cannot write the results store ({error.strerror or error}); {what} "
                "is not stored: free space or fix the disk, then rerun (stored results are kept)"
            ) from None

    @staticmethod
    def _write_raw(path: Path, data: bytes) -> None:
        """Write all of `data` at the end of `path` and fsync, or leave the file as it was."""
        fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:  # a short write (a filling disk) is continued, never left cut
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except OSError:
                with contextlib.suppress(OSError):  # else a torn tail the next owner sets aside
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)

    def add_result(self, result: JobResult) -> None:
        self.write(records.Result(result))

    # ---- reading ------------------------------------------------------------------------

    def _open_read(self) -> int | None:
        try:
            return open_nofollow(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except LinkRefused as error:
            raise StoreError(str(error.strerror)) from None
        except OSError as error:
            raise StoreError(f"{self.path}: cannot read the results store: {error.strerror}") from None

    def _read_all(self) -> bytes | None:
        fd = self._open_read()
        if fd is None:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                self._check_file(self.path)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        except OSError as error:
            raise StoreError(f"{self.path}: cannot read the results store: {error.strerror}") from None
        finally:
            os.close(fd)

    def _parse(self) -> Parsed:
        """Parse the lines added since the last read (all of them for a new or rewritten file)."""
        fd = self._open_read()
        if fd is None:
            self._parsed = None
            return Parsed((0, 0))
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                self._check_file(self.path)
            parsed = self._parsed
            if parsed is None or parsed.ident != (info.st_dev, info.st_ino) or info.st_size < parsed.offset:
                parsed = Parsed((info.st_dev, info.st_ino))
            if info.st_size > parsed.offset:
                data = os.pread(fd, info.st_size - parsed.offset, parsed.offset)
                found = parsed.take(data[: data.rfind(b"\n") + 1])  # a torn last line waits
                if found is not None:
                    self._parsed = None  # asked again, it says so again
                    raise StoreError(store_lines.schema_message(self.path, found[0], found[1]))
        except OSError as error:
            raise StoreError(f"{self.path}: cannot read the results store: {error.strerror}") from None
        finally:
            os.close(fd)
        self._parsed = parsed
        return parsed

    def events(self) -> Iterator[dict[str, Any]]:
        """Every usable record, in file order (damaged lines are skipped: heal() sets them aside)."""
        return iter(self._parse().records)

    def results(self) -> list[JobResult]:
        """Every stored result, latest last."""
        return list(self._parse().results)

    def jobs(self) -> list[JobResult]:
        """Every job the cell ran, as stored: results and the retried attempts (for accounting)."""
        return list(self._parse().jobs)

    def latest_by_key(self) -> dict[str, JobResult]:
        return dict(self._parse().latest)

    def records(self, kind: type[R]) -> list[R]:
        """The usable records of one kind, as its dataclass, in file order."""
        return [kind.from_json(r) for r in self._parse().by_event.get(kind.EVENT, ())]

    def events_of(self, event: str) -> list[dict[str, Any]]:
        """The usable records of one event, in file order."""
        return list(self._parse().by_event.get(event, ()))

    def pending_submissions(self) -> dict[str, dict[str, Any]]:
        """Run key → its `submitted` record, for jobs submitted but without a result yet."""
        return dict(self._parse().pending)

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
        sweeps = self._parse().by_event.get("sweep", [])
        return sweeps[-1] if sweeps else None

    def max_job_number(self) -> int:
        numbers = [
            int(r["job_id"])
            for r in self.events()
            if r["event"] in ("submitted", "result") and str(r.get("job_id", "")).isdigit()
        ]
        return max(numbers, default=0)


def _holder(raw: bytes) -> dict[str, Any]:
    try:
        holder = json.loads(raw.decode("utf-8", "replace").strip() or "{}")
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}
