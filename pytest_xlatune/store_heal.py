"""Healing a store its new owner just took (store.py's `acquire` calls these): a torn last line
set aside into `.torn`, damaged lines moved into `.quarantine` with a `quarantined` record per
run, and the `cancelled` records the previous owner noted in the lock file but could not write.
A part of the store split off for its length: it uses ResultStore's private read and write
primitives (`_read_all`, `_write_raw`, `_parse`), which nothing outside these two modules does."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from . import records, store_lines
from .safefs import open_nofollow
from .store_lines import Parsed

if TYPE_CHECKING:
    from .store import ResultStore

SHOWN = 5  # quarantined lines named one per line; the rest in one line


def record_noted_cancels(store: ResultStore, previous: dict[str, Any]) -> list[str]:
    """Write the `cancelled` records the previous owner noted but could not store (only for
    jobs still waiting for one: a record never ends a later submission of the run)."""
    noted = [str(j) for j in previous.get("cancelled", []) if isinstance(j, (str, int))]
    store.noted_cancelled = frozenset(noted)  # also jobs it never recorded (engine/recover.py)
    pending = {str(r["job_id"]): key for key, r in store.pending_submissions().items()}
    done = [job for job in noted if job in pending]
    for job in done:
        store.write(records.Cancelled(job_id=job, key=pending[job], noted_by=previous.get("pid", "?")))
    if not done:
        return []
    return [
        f"{store.path}: recorded job(s) {', '.join(done)} as cancelled by the session before "
        f"(pid {previous.get('pid', '?')}, started {previous.get('started', '?')}), which "
        "cancelled them on its way out but could not write the store; their runs go again"
    ]


def heal(store: ResultStore) -> list[str]:
    """Set a torn last line aside into `.torn` and end the file on a newline; move every
    line that is no usable record into `.quarantine` (its item runs again)."""
    data = store._read_all()
    if data is None:
        return []
    notes = []
    if data and not data.endswith(b"\n"):
        start = data.rfind(b"\n") + 1
        fragment = data[start:]
        if store_lines.parse(fragment).record is not None:  # only the newline was lost
            store._write_raw(store.path, b"\n")
            data += b"\n"
            notes.append(f"{store.path}: the last record had no newline; completed it")
        else:
            store._write_raw(store.torn_path, fragment + b"\n")
            fd = open_nofollow(store.path, os.O_WRONLY)
            try:
                os.ftruncate(fd, start)
                os.fsync(fd)
            finally:
                os.close(fd)
            data = data[:start]
            notes.append(
                f"{store.path}: set aside a torn last line ({len(fragment)} bytes) into "
                f"{store.torn_path}; the next record starts on a fresh line"
            )
    store.forget_parsed()
    parsed = store._parse()
    if parsed.bad:
        notes += _quarantine(store, data, parsed)
    return notes


def _quarantine(store: ResultStore, data: bytes, parsed: Parsed) -> list[str]:
    """Move the bad lines into `.quarantine` and rewrite the store without them (one rename);
    a `quarantined` record per key ends the wait for its job, so its item runs again."""
    bad = {number for number, _, _, _ in parsed.bad}
    kept = [raw for number, raw in enumerate(data.splitlines(keepends=True), start=1) if number not in bad]
    store._write_raw(
        store.quarantine_path, b"".join(raw if raw.endswith(b"\n") else raw + b"\n" for _, raw, _, _ in parsed.bad)
    )
    tmp = store.path.with_name(f".{store.path.name}.rewrite")
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(b"".join(kept))
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, store.path)
    store.forget_parsed()
    notes: list[str] = []
    garbage: list[int] = []
    for number, _, why, said in parsed.bad:
        key = said.get("key")
        if not isinstance(key, str) or said.get("event") not in ("result", "attempt", "submitted"):
            garbage.append(number)
            continue
        store.write(records.Quarantined(key=key, of=said["event"], line=number, why=why))
        if len(notes) < SHOWN:
            what = f"the {said['event']} record of {said.get('item') or key}"
            notes.append(
                f"{store.path}:{number}: {what} was quarantined into "
                f"{store.quarantine_path} ({why}); it is not used, and the item runs again"
            )
    if len(parsed.bad) - len(garbage) > SHOWN:
        notes.append(
            f"{store.path}: {len(parsed.bad) - len(garbage) - SHOWN} more damaged "
            f"record(s) quarantined into {store.quarantine_path}; their items run again"
        )
    if garbage:
        shown = ", ".join(map(str, garbage[:SHOWN])) + (", …" if len(garbage) > SHOWN else "")
        notes.append(
            f"{store.path}: skipped {len(garbage)} line(s) that are not well-formed "
            f"records (line {shown}); set aside into {store.quarantine_path}"
        )
    return notes
