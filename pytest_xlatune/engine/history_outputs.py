"""At the end of every sweep and gate session: each cell that ran appends its rows to its history
(`<store>/<slug>.history.csv`, report/history.py), from the runs of the items it ran."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import pytest

from ..report.files import Output
from ..report.history import HistoryRow, append_rows, gate_rows, history_path, sweep_rows
from ..verdict.lock import build_lock
from .repair_outputs import exit_code, proposal_outputs, session_results, session_spent

if TYPE_CHECKING:
    from .session import Session


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def append_history(runtime: Session, date: str = "") -> list[Output]:
    """One row per config tag of each cell that ran (gate: the locked recipe on the new image;
    sweep: the recipe it found, or none), the node-hours its items' jobs cost."""
    date = date or now()
    outputs = []
    for cell in runtime.cells_that_ran():
        stored = runtime.stored(cell)
        if stored is None:
            continue
        ran = runtime.ran.get(cell.path, set())
        image = runtime.cell_settings(cell).image
        here = [r for r in session_results(runtime, cell) if r.item in ran]
        sweep = runtime.sweeps.get(cell.path)
        if sweep is None or not any(sweep.runner.ran_in_session(r.key) for r in here):
            continue  # every item reused a stored result: nothing new to record
        spent = session_spent(runtime, cell, here).node_hours
        rows: list[HistoryRow]
        if runtime.settings.gate:
            rows = gate_rows(date, image, here, spent)
        else:
            # The recipe's figure as the lock and the reports show it: from every stored run.
            built = build_lock(cell, list(stored.results), stored.nodelist, image, mode=runtime.settings.numerics)
            recipes = {r.config_tag: r.profile for r in built.recipes} if built else {}
            rows = sweep_rows(date, image, list(stored.results), recipes, spent, {r.item for r in here})
        if rows:
            path = history_path(runtime.paths(cell).store)
            append_rows(path, rows)
            outputs.append(Output(path, "history", True, f"{len(rows)} row(s) appended"))
    return outputs


def after_session(runtime: Session, session: pytest.Session) -> list[Output]:
    """What the session writes after its reports and locks: the history rows; with
    --xlatune-gate-repair the proposed locks' lines and the exit code that tells them apart."""
    repairs = list(runtime.repairs.values())
    if runtime.settings.gate_repair:
        session.exitstatus = exit_code(repairs, int(session.exitstatus))
    return append_history(runtime) + proposal_outputs(repairs, runtime.root)
