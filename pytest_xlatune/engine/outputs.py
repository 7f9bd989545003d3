"""What a session leaves behind for the cells that ran: tuning reports, locks, cost and
adaptive summary lines (all read back from the stores)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from ..adaptive.stored import summary_lines
from ..cell.values import Cell
from ..errors import XlatuneError
from ..evidence.inert import inert_lines
from ..paths import lock_path
from ..report.files import Output, write_atomic, write_reports
from ..results import Spent
from ..safefs import describe
from ..verdict.lock import Lock, LockError, build_lock, dumps, load_lock, lock_change, unconfirmed
from .gate_outputs import measured_on, write_gate_reports
from .history_outputs import after_session

if TYPE_CHECKING:
    from .session import Session


def write_all(runtime: Session, session: pytest.Session) -> tuple[list[Output], list[str]]:
    """The session's reports, locks and history (and --xlatune-gate-repair's exit code), each
    part on its own: a report that cannot be written (a folder or a FIFO in its place, a
    read-only directory) leaves the locks, the history and the exit code alone. Returns what was
    written and one line per part that failed."""
    parts: list[tuple[str, Callable[[], list[Output]]]] = [
        ("report", lambda: runtime.write_reports(runtime.cells_that_ran())),
        ("recipe lock", runtime.write_locks),
        ("history", lambda: after_session(runtime, session)),
    ]
    written: list[Output] = []
    failures = []
    for what, write in parts:
        try:
            written += write()
        except (OSError, XlatuneError) as error:  # e.g. a history file edited by hand
            text = describe(error) if isinstance(error, OSError) else str(error)
            failures.append(f"xlatune: the {what} could not be written: {text}")
    return written, failures


def session_reports(session: Session, cells: list[Cell] | None = None) -> list[Output]:
    """The tuning reports (and exports) of these cells, from their stored results; under
    --xlatune-gate the gate's own `<MODEL_TAG>-gate.md` instead (the tuning report stays)."""
    settings = session.settings
    if settings.gate:
        return write_gate_reports(session)
    return write_reports(
        session.report_inputs(cells),
        settings.report_dir,
        mode=settings.numerics,
        write_zh=settings.write_zh,
        export_dir=settings.export_dir,
    )


def session_locks(session: Session) -> list[Output]:
    """After a whole sweep of a cell ran (not a gate run): `<cell>.lock.json` when its
    recipe differs from the lock on file (`lock.lock_change` says why, or why not)."""
    outputs = []
    for cell in session.cells_that_ran():
        stored = session.stored(cell)
        if stored is None or session.settings.gate:
            continue
        path = lock_path(cell.path)
        ran = session.ran.get(cell.path, set())
        not_run = [spec.name for spec in session.specs_of(cell) if spec.name not in ran]
        try:
            existing: Lock | None = load_lock(path) if path.exists() else None
        except LockError:
            existing = None  # unreadable: a whole sweep replaces it
        stopped = cell.path in session.stopped
        image, mode = session.cell_settings(cell).image, session.settings.numerics
        built = (
            None
            if not_run or stopped
            else build_lock(
                cell,
                list(stored.results),
                stored.nodelist,
                image,
                mode=mode,
                measured_on=measured_on(session.store_for(cell), image),
            )
        )
        why_not = "" if built is not None or not_run or stopped else unconfirmed(cell, list(stored.results), mode=mode)
        change, why = lock_change(existing, built, not_run, stopped, why_not)
        if change and built is not None:
            write_atomic(path, dumps(built))
        outputs.append(Output(path, "recipe lock", change, why, exists=path.exists()))
    return outputs


def costs(session: Session) -> list[tuple[Cell, str]]:
    """What each cell that ran this session has cost so far (every job of its store), and what
    this session's own jobs cost where they are not all of them (a rerun, a gate, `--lf`)."""
    lines = []
    for cell in session.cells_that_ran():
        if (stored := session.stored(cell)) is None:
            continue
        total = stored.spent or Spent.of(())
        here = Spent.of(r for r in stored.jobs if r.finished_at >= session.started_at)
        text = total.text()
        if 0 < here.jobs + here.unknown < total.jobs + total.unknown:
            text += f" (this session: {here.text()})"
        lines.append((cell, text))
    return lines


def adaptive_lines(session: Session) -> list[tuple[Cell, str]]:
    """What the adaptive sweeps of this session saved, and the drift their controls saw."""
    lines = []
    for cell in session.cells_that_ran():
        sweep = session.sweeps.get(cell.path)
        if sweep is None or sweep.adaptive is None:
            continue
        stored = (
            *summary_lines(sweep.store.results(), list(sweep.store.events())),
            *inert_lines(sweep.store.latest_by_key().values()),
        )
        lines += [(cell, line) for line in stored]
        if not any(line.startswith("drift: ") for line in stored):  # no control recorded one
            lines.append((cell, sweep.adaptive.drift()))
    return lines
