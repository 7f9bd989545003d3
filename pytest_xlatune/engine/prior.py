"""The prior across sweeps (adaptive.order): what the other cells' stores in the store directory
measured of this cell's candidates, read (never locked, never healed) when its sweep opens; and
the cell's own evidence run's hints, added once that run has ended (`with_evidence`); and the
order they give, recorded in the store (`record_order`) and, for the cells that did not run,
said at the session's end (`planned_orders`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..adaptive.keys import ROLES
from ..adaptive.order import UNKNOWN, Prior, Seen, effects, family, order_line, prior_settings
from ..adaptive.values import Plan, Role
from ..cell.catalog import mechanisms_of
from ..cell.values import Cell
from ..errors import XlatuneError
from ..evidence.artifacts import evidence_facts
from ..plan.catalog import EvidenceFacts, hints
from ..plan.expand import RunKind, RunSpec, evidence_spec, run_key
from ..store import ResultStore

if TYPE_CHECKING:
    from .session import Session


def seen_in(store_dir: Path, own: Path) -> list[Seen]:
    """Every other store's measured candidate effects, with its recorded parallelism family (a
    store that cannot be read is left out: it is only a hint)."""
    seen: list[Seen] = []
    for path in sorted(store_dir.glob("*.jsonl")) if store_dir.is_dir() else ():
        if path.resolve() == own.resolve():
            continue
        store = ResultStore(path)
        try:
            info = store.sweep_info()
            seen += effects(
                store.latest_by_key().values(), family(str(info.get("parallelism", ""))) if info else UNKNOWN
            )
        except (XlatuneError, OSError, ValueError):
            continue
    return seen


def prior_for(cell: Cell, specs: Sequence[RunSpec], store_dir: Path, own: Path) -> Prior:
    """The expected gains of the cell's selected candidates (Prior() when no other sweep measured one)."""
    primary = cell.primary_config.name
    candidates = {
        s.name: prior_settings(s.xla_flags, s.env)
        for s in specs
        if s.kind is RunKind.PROFILE and s.config_tag == primary and (s.xla_flags or s.env)
    }
    if not candidates:
        return Prior()
    return Prior.across(candidates, seen_in(store_dir, own), family(cell.parallelism.text))


def stored_evidence_facts(cell: Cell, store: ResultStore, image: str) -> EvidenceFacts | None:
    """What the cell's stored evidence run shows (None: the store has none, or no readable HLO)."""
    info = store.sweep_info()
    if info is None:
        return None
    result = store.latest_by_key().get(run_key(cell, evidence_spec(cell), info["nodelist"], image))
    return evidence_facts(result) if result is not None else None


def hinted(prior: Prior, candidates: Mapping[str, RunSpec], facts: EvidenceFacts | None, win_pct: float) -> Prior:
    """`prior` plus the evidence run's hints for these candidates (name → run; plan.catalog.hints:
    those acting on what leads the step first); `prior` itself while there are no facts."""
    if facts is None:
        return prior
    mechanisms = {
        name: (spec.mechanism,) if spec.mechanism else mechanisms_of(spec.xla_flags, spec.env)
        for name, spec in candidates.items()
    }
    found = hints(mechanisms, facts, win_pct)
    return prior.with_hints(found) if found else prior


def with_evidence(plan: Plan, specs: Mapping[str, RunSpec], facts: EvidenceFacts | None) -> Plan:
    """The plan with the evidence run's hints added to its prior (`hinted`)."""
    candidates = {i.name: specs[i.name] for i in plan.items if i.role is Role.PROFILE and i.name in specs}
    prior = hinted(plan.prior, candidates, facts, plan.thresholds.win_pct)
    return plan if prior == plan.prior else replace(plan, prior=prior)


def record_order(store: ResultStore, plan: Plan) -> None:
    """Record the candidates' order where it is not the list's, once per change (an `order`
    event: the summary and the report say it, from the store)."""
    line = order_line([i.name for i in plan.items if i.role is Role.PROFILE], plan.prior)
    last = next((e for e in reversed(store.events_of("order"))), None)
    if line and (last is None or last.get("text") != line):
        store.append("order", text=line)


def planned_orders(runtime: Session) -> list[tuple[Cell, str]]:
    """Each cell's planned candidate order and why, where a prior or the stored evidence run's
    hints change list order — for the cells that did not run (a cell that ran says it among its
    adaptive lines, from its store)."""
    lines = []
    ran = {cell.path for cell in runtime.cells_that_ran()}
    settings = runtime.settings
    for cell in runtime.cells.values():
        sweep = runtime.sweeps.get(cell.path)
        if cell.path in ran and sweep is not None and sweep.adaptive is not None:
            continue
        prior = sweep.prior if sweep is not None else runtime.prior(cell)
        candidates = {
            s.name: s
            for s in runtime.upcoming.get(cell.path, [])
            # the planner's candidates (restore_default and pipeline shapes too), as the session orders them
            if ROLES.get(s.kind) is Role.PROFILE and s.config_tag == cell.primary_config.name
        }
        if not (settings.fixed_protocol or settings.gate):
            facts = stored_evidence_facts(cell, runtime.store_for(cell), runtime.cell_settings(cell).image)
            prior = hinted(prior, candidates, facts, cell.thresholds.win_pct)
        if line := order_line(list(candidates), prior):
            lines.append((cell, line))
    return lines
