"""The per-session state: one Sweep per cell, created on first use, closed at session end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .launch.base import Launcher
from .launch.local import LocalLauncher
from .model import BackendKind, Cell
from .plan import RunSpec, expand
from .session import Sweep
from .settings import Settings
from .store import ResultStore

LOCAL_NODELIST = "localhost"


class BackendUnavailable(Exception):
    """The cell names a backend this installation cannot run."""


def cell_slug(cell_path: Path, root: Path) -> str:
    """A file-system-safe name for a cell, unique within the rootdir."""
    try:
        relative = cell_path.resolve().relative_to(root.resolve())
    except ValueError:
        relative = Path(cell_path.name)
    return "__".join(relative.with_suffix("").parts)


class Runtime:
    """Holds the sweeps of this pytest session (stashed on the config)."""

    def __init__(self, settings: Settings, root: Path, report: Callable[[str], None]) -> None:
        self.settings = settings
        self.root = root
        self.report = report
        self.sweeps: dict[Path, Sweep] = {}
        self.cells: dict[Path, Cell] = {}
        self.written_reports: list[Path] = []
        self.upcoming: dict[Path, list[RunSpec]] = {}

    def store_for(self, cell: Cell) -> ResultStore:
        return ResultStore(self.settings.store_dir / f"{cell_slug(cell.path, self.root)}.jsonl")

    def note_item(self, cell: Cell, spec: RunSpec) -> None:
        """Remember a selected run, in execution order; its cell gets a report at session end."""
        self.cells[cell.path] = cell
        self.upcoming.setdefault(cell.path, []).append(spec)

    def note_cell(self, cell: Cell) -> None:
        self.cells[cell.path] = cell

    def sweep_for(self, cell: Cell) -> Sweep:
        if cell.path not in self.sweeps:
            store = self.store_for(cell)
            nodelist = self._frozen_nodelist(cell, store)
            launcher = self._launcher(cell, store)
            sweep = Sweep(
                cell=cell, specs=expand(cell), store=store, launcher=launcher, nodelist=nodelist,
                poll_interval=self.settings.poll_interval, remeasure=self.settings.remeasure,
                report=self.report, queue_depth=getattr(launcher, "queue_depth", 0),
            )
            sweep.set_upcoming(self.upcoming.get(cell.path, []))
            self.sweeps[cell.path] = sweep
        return self.sweeps[cell.path]

    def sweep_if_stored(self, cell: Cell) -> Sweep | None:
        """A read-only sweep over stored results (for reports), without starting a launcher."""
        if cell.path in self.sweeps:
            return self.sweeps[cell.path]
        store = self.store_for(cell)
        info = store.sweep_info()
        if info is None:
            return None
        return Sweep(cell=cell, specs=expand(cell), store=store, launcher=_NoLauncher(),
                     nodelist=info["nodelist"])

    def _frozen_nodelist(self, cell: Cell, store: ResultStore) -> str:
        info = store.sweep_info()
        if info is not None:
            return str(info["nodelist"])
        if cell.backend.kind is not BackendKind.LOCAL:
            raise BackendUnavailable(
                f"{cell.path}: backend.kind: {cell.backend.kind.value!r} is not available in this "
                "version; only 'local' runs (the cell still collects)"
            )
        store.append("sweep", nodelist=LOCAL_NODELIST, backend=cell.backend.kind.value,
                     model_tag=cell.model_tag, parallelism=cell.parallelism.text)
        return LOCAL_NODELIST

    def _launcher(self, cell: Cell, store: ResultStore) -> Launcher:
        jobs_dir = self.settings.store_dir / cell_slug(cell.path, self.root) / "jobs"
        return LocalLauncher(jobs_dir, store.max_job_number() + 1, python=self.settings.python,
                             module=self.settings.workload)

    def close(self) -> None:
        for sweep in self.sweeps.values():
            sweep.cancel_all()  # queued jobs that will not run now (-x, Ctrl-C, a stop)
            sweep.launcher.close()


class _NoLauncher:
    """Stands in for a launcher when only stored results are read."""

    name = "none"

    def close(self) -> None:
        pass


RUNTIME_KEY = pytest.StashKey[Runtime]()
