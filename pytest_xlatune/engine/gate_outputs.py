"""Under --xlatune-gate: each gated cell's verdict, gathered from its items' reports, written to
`<MODEL_TAG>-gate.md` (never into the sweep's tuning report) and shown in the HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..paths import lock_path
from ..report.files import Output, write_if_changed
from ..report.gate import GateCell, GateItem, Outcome, render_document
from ..store import ResultStore
from ..verdict.lock import LockError, load_lock
from .inert import gate_flag_states, gate_runs
from .outcome import warnings_of
from .repair_outputs import repair_of

if TYPE_CHECKING:
    from .session import Session


def gate_item(report: pytest.TestReport) -> GateItem | None:
    """How a gate item's call ended (None for the setup and teardown phases)."""
    if report.when != "call":
        return None
    item = str(dict(report.user_properties).get("xlatune_item", report.nodeid))  # gate::fast[sparse]
    warned = warnings_of(report.user_properties)
    if hasattr(report, "wasxfail"):
        return GateItem(item, Outcome.ADVISORY, str(report.wasxfail).removeprefix("advisory gate: "), warned)
    if report.passed:
        return GateItem(item, Outcome.PASSED, warnings=warned)
    if report.skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        return GateItem(item, Outcome.SKIPPED, reason.removeprefix("Skipped: "), warned)
    return GateItem(item, Outcome.FAILED, report.longreprtext, warned)


def gate_cells(runtime: Session) -> dict[str, list[GateCell]]:
    """model tag → the gated cells whose items ran in this session."""
    by_tag: dict[str, list[GateCell]] = {}
    for cell in runtime.cells_that_ran():
        items = runtime.gate_items.get(cell.path)
        if not items:
            continue
        try:
            lock = load_lock(lock_path(cell.path))
        except LockError:
            continue  # its items failed with that line already
        store = runtime.store_for(cell)
        new_image = runtime.cell_settings(cell).image
        runs = gate_runs(runtime, cell)
        if cell.path not in runtime.repairs:  # once: it writes the proposed lock
            runtime.repairs[cell.path] = repair_of(runtime, cell, lock, measured_on(store, new_image))
        by_tag.setdefault(cell.model_tag, []).append(
            GateCell(
                cell_id=runtime.paths(cell).cell_id,
                lock_file=_shown(lock_path(cell.path), runtime.root),
                lock=lock,
                new_image=new_image,
                new_measured_on=measured_on(store, new_image),
                old_measured_on=measured_on(store, lock.image) if lock.image != new_image else "",
                items=tuple(items),
                runs=runs,
                flags=gate_flag_states(lock, store, runs),
                repair=runtime.repairs[cell.path],
            )
        )
    return by_tag


def environments(store: ResultStore) -> dict[str, str]:
    """image → what it ran on, as the latest pre-flight of the cell's local backend saw it."""
    found = [e["images"] for e in store.events() if e["event"] == "environment"]
    return dict(found[-1]) if found else {}


def measured_on(store: ResultStore, image: str) -> str:
    """What runs on `image` measured on: the interpreter and JAX version (local backend), else the
    container image maxtext-slurm's pre-flight recorded (container_env.sh's DOCKER_IMAGE)."""
    if on := environments(store).get(image):
        return on
    inventories = [e for e in store.events() if e["event"] == "inventory"]
    docker = inventories[-1].get("container_env", {}).get("DOCKER_IMAGE", "") if inventories else ""
    return f"image {image or docker}" if image or docker else ""


def write_gate_reports(runtime: Session) -> list[Output]:
    """`<MODEL_TAG>-gate.md` per model tag gated in this session."""
    return [
        write_if_changed(runtime.settings.report_dir / f"{tag}-gate.md", render_document(tag, cells), "gate report")
        for tag, cells in gate_cells(runtime).items()
    ]


def _shown(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
