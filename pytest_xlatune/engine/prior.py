"""The prior across sweeps (adaptive.order): what the other cells' stores in the store directory
measured of this cell's candidates, read (never locked, never healed) when its sweep opens."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..adaptive.order import UNKNOWN, Prior, Seen, effects, family, prior_settings
from ..cell.values import Cell
from ..errors import XlatuneError
from ..plan.expand import RunKind, RunSpec
from ..store import ResultStore


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
