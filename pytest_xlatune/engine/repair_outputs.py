"""Under --xlatune-gate-repair: whether a cell's repair runs, what it found (report/repair.py's
Repair), the proposed lock `<cell>.lock.proposed.json` beside the lock, and the exit code."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..cell.values import Cell
from ..evidence.artifacts import load
from ..evidence.collective_table import describe_diff, diff
from ..paths import lock_path
from ..plan.repair import REPAIR_WAVE, TOP_K, WINNER, candidates, removed_flags
from ..report.files import Output, write_atomic
from ..report.gate import Outcome
from ..report.repair import EXIT_CODES, Figure, Repair, RepairVerdict
from ..results import JobResult, RunKind, Spent
from ..verdict import figures
from ..verdict.gate_flags import FlagState
from ..verdict.lock import Lock, LockError, build_lock, dumps, load_lock
from .inert import gate_flag_states, gate_runs

if TYPE_CHECKING:
    from .session import Session

BUDGET = (
    f"at most {TOP_K} candidates of the previous sweep plus the locked recipe without its removed or "
    "inert flags, one run each on the new image, the winner once more and once with its HLO dump"
)
_NEW_IMAGE_KINDS = (RunKind.BASELINE, RunKind.PROFILE, RunKind.WINNER_EVIDENCE)


def proposed_path(cell_path: Path) -> Path:
    """`<cell>.lock.proposed.json` beside `<cell>.lock.json`."""
    return lock_path(cell_path).with_suffix(".proposed.json")


def session_results(runtime: Session, cell: Cell) -> list[JobResult]:
    """The results of the cell's runs as planned in this session (their keys: this image's), read
    from the store (under xdist the controller has no sweep of its own)."""
    stored = runtime.stored(cell)
    return list(stored.results) if stored is not None else []


def session_spent(runtime: Session, cell: Cell, results: list[JobResult]) -> Spent:
    """What the jobs of these runs cost in this session (every attempt, each once)."""
    keys = {r.key for r in results}
    return Spent.of(r for r in runtime.store_for(cell).jobs() if r.key in keys and r.finished_at >= runtime.started_at)


def repair_reason(runtime: Session, cell: Cell) -> str:
    """Why the cell's repair runs ("" when the gate passed and no locked flag is inert)."""
    failed = [i.item for i in runtime.gate_items.get(cell.path, []) if i.outcome in (Outcome.FAILED, Outcome.ADVISORY)]
    inert = runtime.inert_flags.get(cell.path) or found_inert(runtime, cell)
    parts = ([f"gate item(s) failed: {', '.join(failed)}"] if failed else []) + (
        [f"locked flag(s) inert on the new image: {', '.join(inert)}"] if inert else []
    )
    return "; ".join(parts)


def found_inert(runtime: Session, cell: Cell) -> tuple[str, ...]:
    """The locked flags the gate's runs so far found inert on the new image (verdict/gate_flags.py:
    the recipe compiles to the new baseline's program)."""
    try:
        lock = load_lock(lock_path(cell.path))
    except LockError:
        return ()
    flags = gate_flag_states(lock, runtime.store_for(cell), gate_runs(runtime, cell))
    return tuple(f.setting for f in flags if f.state is FlagState.INERT)


def skip_reason(runtime: Session, cell: Cell) -> str:
    """A repair item's skip line when nothing needs repair ("" to run it)."""
    if repair_reason(runtime, cell):
        return ""
    return "the gate passed and no locked flag is inert: no repair needed"


def _figure(run: JobResult | None, results: list[JobResult]) -> Figure | None:
    if run is None:
        return None
    fig = figures.figure(run, results)
    if fig is None:
        return Figure(run.profile, run.xla_flags, None)
    c = fig.comparison
    return Figure(
        run.profile,
        run.xla_flags,
        fig.tgs,
        c.delta_pct if c else None,
        c.ci_low_pct if c else None,
        c.ci_high_pct if c else None,
        fig.job_ids,
    )


def _inventory_diff(
    lock: Lock, primary: str, latest: list[JobResult], winner: JobResult | None
) -> tuple[tuple[str, ...], str]:
    locked = lock.recipe(primary)
    old = [
        r
        for r in latest
        if r.kind is RunKind.WINNER_EVIDENCE
        and r.image == lock.image
        and r.measured
        and locked is not None
        and r.xla_flags == locked.xla_flags
        and r.wave != REPAIR_WAVE
    ]
    if winner is None or not old:
        missing = (
            "the repair's winner ran no evidence run"
            if winner is None
            else "the lock's sweep kept no evidence run of its recipe"
        )
        return (), f"no HLO inventory to compare: {missing}"
    a, b = load(old[-1]).inventory, load(winner).inventory
    if a is None or b is None:
        return (), "no HLO inventory to compare: an evidence run's HLO dump is missing"
    return tuple(describe_diff(diff(a, b))), ""


def repair_of(runtime: Session, cell: Cell, lock: Lock, measured_on: str) -> Repair | None:
    """The cell's repair, None when not asked for or the gate passed."""
    if not runtime.settings.gate_repair:
        return None
    reason = repair_reason(runtime, cell)
    primary = cell.primary_config.name
    locked = lock.recipe(primary)
    if not reason or locked is None:
        return None
    store = runtime.store_for(cell)
    image = runtime.cell_settings(cell).image
    latest = list(store.latest_by_key().values())
    here = session_results(runtime, cell)
    # The candidates are judged as a sweep's wave-2 profiles (choice.winners reads waves 2-4).
    # The plain re-run confirms; the HLO-dump run (profiler on) joins the winner's runs as a
    # sweep's winner's evidence run does (verdicts.pooled_evidence), so the proposed lock's
    # figure is the one the terminal and the report show for the same settings.
    new = [
        replace(r, wave="wave2") if r.wave == REPAIR_WAVE and r.kind is RunKind.PROFILE else r
        for r in here
        if r.image == image and r.kind in _NEW_IMAGE_KINDS and r.config_tag == primary
    ]
    # Every run of the locked recipe on the new image (the gate measures a likely regression again).
    gate_runs = [
        r
        for r in latest
        if r.kind is RunKind.GATE_RECIPE
        and r.config_tag == primary
        and r.image == image
        and r.finished_at >= runtime.started_at
    ]
    gate_recipe = gate_runs[0] if gate_runs else None
    judged = new + gate_runs
    repair_runs = [r for r in here if r.wave == REPAIR_WAVE and r.image == image]
    winner = next(
        (
            r
            for r in repair_runs
            if r.kind is RunKind.WINNER_EVIDENCE and r.measured and r.item.startswith(f"{REPAIR_WAVE}::{WINNER}[")
        ),
        None,
    )
    info = store.sweep_info() or {}
    # No control runs after the repair's candidates: the proposal is a proposal, which the next
    # gate run measures against its own same-window controls before anyone commits it.
    built = build_lock(
        cell,
        new,
        str(info.get("nodelist", "")),
        image,
        mode=runtime.settings.numerics,
        measured_on=measured_on,
        require_control=False,
    )
    proposed = built.recipe(primary) if built is not None else None
    if proposed is not None and (proposed.xla_flags, proposed.env) == (locked.xla_flags, locked.env):
        proposed = None
    why_not = (
        ""
        if proposed is not None
        else (
            "no candidate beat the new image's baseline beyond the noise with a second run agreeing"
            if repair_runs
            else "no candidate ran (the previous sweep left none on file)"
        )
    )
    proposed_file = ""
    if proposed is not None and built is not None:
        path = proposed_path(cell.path)
        write_atomic(path, dumps(built))
        proposed_file = str(path.relative_to(runtime.root)) if path.is_relative_to(runtime.root) else str(path)
    diff_lines, diff_note = _inventory_diff(lock, primary, latest, winner)
    profiles = [r for r in repair_runs if r.kind is RunKind.PROFILE]
    previous = store.results()
    dropped = (*removed_flags(previous, image), *runtime.inert_flags.get(cell.path, ()))
    why = {c.profile: c.why for c in candidates(previous, lock, primary, dropped=dropped)}
    proposed_run = next(
        (r for r in profiles if proposed is not None and r.xla_flags == proposed.xla_flags and r.env == proposed.env),
        None,
    )
    return Repair(
        cell_id=runtime.paths(cell).cell_id,
        reason=reason,
        verdict=RepairVerdict.PROPOSED if proposed is not None else RepairVerdict.NONE_FOUND,
        locked_at_lock_time=Figure(
            locked.profile,
            locked.xla_flags,
            locked.tgs,
            locked.delta_pct,
            locked.ci_low_pct,
            locked.ci_high_pct,
            locked.job_ids,
        ),
        locked_now=_figure(gate_recipe, judged) or Figure(locked.profile, locked.xla_flags, None),
        proposed=_figure(proposed_run, judged),
        proposed_file=proposed_file,
        why_not=why_not,
        candidates=tuple(
            (r.profile, why.get(r.profile, "repair candidate"), fig.text() if (fig := _figure(r, judged)) else "")
            for r in profiles
        ),
        diff_lines=diff_lines,
        diff_note=diff_note,
        node_hours=session_spent(runtime, cell, [r for r in here if r.wave == REPAIR_WAVE]).node_hours,
        budget=BUDGET,
    )


def exit_code(repairs: list[Repair | None], status: int) -> int:
    """The session's exit code with --xlatune-gate-repair: 6 when every repaired cell has a
    proposal, 1 when one has none, pytest's own otherwise (0 passed; 2-5 as pytest)."""
    found = [r for r in repairs if r is not None]
    if status != 1 or not found:
        return status
    if any(r.verdict is RepairVerdict.NONE_FOUND for r in found):
        return EXIT_CODES[RepairVerdict.NONE_FOUND]
    return EXIT_CODES[RepairVerdict.PROPOSED]


def proposal_outputs(repairs: list[Repair | None], root: Path) -> list[Output]:
    """The terminal lines of the proposed locks written."""
    return [
        Output(
            root / r.proposed_file,
            "proposed lock",
            True,
            f"{r.verdict.value}: review it, then replace the lock with it",
        )
        for r in repairs
        if r is not None and r.proposed_file
    ]
