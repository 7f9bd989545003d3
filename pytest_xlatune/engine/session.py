"""The per-session state: one Sweep per cell, created on first use, closed at session end."""

from __future__ import annotations

from collections.abc import Callable, Sequence
import time
from pathlib import Path

import pytest

from ..launch.registry import Factory, LaunchContext, make_backend, open_transport
from ..plan.request import possible_specs
from ..cell.model import BackendKind, Cell
from ..judge.lock import Lock, LockError, build_lock, dumps, load_lock, lock_change, unconfirmed
from ..paths import CellPaths, lock_path
from ..report.build import CellReport, from_store
from ..report.files import Output, write_atomic, write_reports
from ..results import JobResult, Spent
from ..plan.expand import RunSpec, expand, expand_gate
from ..plan.repair import candidates, removed_flags, repair_specs
from ..notify import Notifier
from ..launch.devices import NoGpuHere
from ..launch.preflight import PreflightError, failure_line
from ..judge.stop import stop_message
from .watch import SweepStopped
from ..adaptive.cache import request_for
from ..adaptive.stored import summary_lines
from .recover import recover_submissions
from .sweep import Sweep
from .gate_outputs import environments, gate_item, measured_on, write_gate_reports
from ..report.gate import GateItem
from ..report.repair import Repair
from ..settings import CellSettings, Settings
from ..store import ResultStore, StoreError, StoreWriteError
from ..transport.base import Transport


class Runtime:
    """Holds the sweeps of this pytest session (stashed on the config)."""

    def __init__(self, settings: Settings, root: Path, report: Callable[[str], None],
                 warn: Callable[[str], None] | None = None, session_id: str = "",
                 make_backend: Factory = make_backend, rerun_failed: bool = False) -> None:
        self.settings = settings
        self.rerun_failed = rerun_failed  # --lf: stored failures run again
        self.make_backend = make_backend  # plugin.py: the pytest_xlatune_make_launcher hook
        self.session_id = session_id  # xdist workers of one session share it
        self.root = root
        self.report = report  # progress, shown with -v
        self.warn = warn or report  # incidents, always shown
        self.sweeps: dict[Path, Sweep] = {}
        self.cells: dict[Path, Cell] = {}
        self.outputs: list[Output] = []
        self.ran: dict[Path, set[str]] = {}  # cell → names of the items that ran this session
        self.stopped: set[Path] = set()  # cells an item of which ended in a STOP this session
        self.needs: dict[str, str] = {}  # item id → what it needed that is not in the store
        self.upcoming: dict[Path, list[RunSpec]] = {}
        self.failed: dict[Path, str] = {}
        self.failed_first: dict[Path, str] = {}  # the item that printed a cell's pre-flight failure
        self.no_gpu: dict[Path, str] = {}  # GPU cells on a machine without a GPU: skipped, one line
        self._transport: Transport | None = None
        self.locks: dict[Path, Lock] = {}
        self.stops: list[str] = []
        self._notifier: Notifier | None = None
        self._held: list[ResultStore] = []  # stores this session owns (their locks)
        self.refused: set[Path] = set()  # cells whose store another session owns
        self._cell_settings: dict[Path, CellSettings] = {}
        self.gate_items: dict[Path, list[GateItem]] = {}  # under --xlatune-gate: each item's outcome
        # Locked flags the gate's per-flag classification found inert on the new image (their
        # compiled program did not change): a reason to repair, and dropped by its suggestion.
        self.inert_flags: dict[Path, tuple[str, ...]] = {}
        self.repairs: dict[Path, Repair | None] = {}  # --xlatune-gate-repair: each gated cell's
        self.started_at = time.time()  # this session's jobs end after it (history, repair cost)

    def paths(self, cell: Cell) -> CellPaths:
        return CellPaths(cell.path, self.root, self.settings.store_dir)

    def store_for(self, cell: Cell) -> ResultStore:
        return ResultStore(self.paths(cell).store)

    def note_item(self, cell: Cell, spec: RunSpec) -> None:
        """Remember a selected run, in execution order; its cell gets a report at session end."""
        self.cells[cell.path] = cell
        self.upcoming.setdefault(cell.path, []).append(spec)

    def note_cell(self, cell: Cell) -> None:
        self.cells[cell.path] = cell

    def note_ran(self, cell_path: Path, item: str) -> None:
        """An item of the cell ran (passed, failed, skipped or reused) in this session."""
        self.ran.setdefault(cell_path, set()).add(item)

    def note_stopped(self, cell_path: Path) -> None:
        """An item of the cell ended in a STOP: its sweep is not whole, whatever else ran."""
        self.stopped.add(cell_path)

    def cells_that_ran(self) -> list[Cell]:
        """The cells with at least one item run this session: only their outputs are written."""
        return [cell for path, cell in self.cells.items() if self.ran.get(path)]

    def costs(self) -> list[tuple[Cell, Spent]]:
        """What each cell that ran this session has cost so far (every job of its store)."""
        return [(cell, stored.spent or Spent.of(())) for cell in self.cells_that_ran()
                if (stored := self.stored(cell)) is not None]

    def adaptive_lines(self) -> list[tuple[Cell, str]]:
        """What the adaptive sweeps of this session saved, and the drift their controls saw."""
        lines = []
        for cell in self.cells_that_ran():
            sweep = self.sweeps.get(cell.path)
            if sweep is None or sweep.adaptive is None:
                continue
            stored = summary_lines(sweep.store.results(), list(sweep.store.events()))
            lines += [(cell, line) for line in stored]
            if not any(line.startswith("drift: ") for line in stored):  # no control recorded one
                lines.append((cell, sweep.adaptive.drift()))
        return lines

    def sweep_for(self, cell: Cell, item: str = "") -> Sweep:
        """The cell's sweep; the first call runs pre-flight. A failure fails the item that ran it
        with the whole message, and every later item of the cell with one line pointing there."""
        if cell.path in self.no_gpu:  # skipped, not failed: the machine, not the cell, is wrong
            raise NoGpuHere(self.no_gpu[cell.path])
        if cell.path in self.failed:
            first = self.failed_first.get(cell.path, "")
            raise PreflightError(f"{cell.path.name}: not run: pre-flight failed"
                                 + (f" (see {first} above)" if first else f": {self.failed[cell.path]}"))
        if cell.path not in self.sweeps:
            try:
                self.sweeps[cell.path] = self._open_sweep(cell)
            except StoreError as error:  # another session owns the store: nothing is submitted
                self._fail(cell, str(error), item)
                self.refused.add(cell.path)  # its owner writes the cell's report, not this session
                raise PreflightError(str(error)) from None
            except NoGpuHere as error:
                self.no_gpu[cell.path] = str(error)
                raise
            except PreflightError as error:
                self._fail(cell, str(error), item)
                raise
            except Exception as error:  # a backend or transport failure: one line, never a traceback
                line = failure_line(cell.path, error, self.settings.ssh_host, self.settings.host_cmd,
                                    cell.backend.kind is not BackendKind.LOCAL)
                self._fail(cell, line, item)
                raise PreflightError(line) from None
        return self.sweeps[cell.path]

    def _fail(self, cell: Cell, message: str, item: str) -> None:
        self.failed[cell.path] = message
        self.failed_first.setdefault(cell.path, item)
        for store in [s for s in self._held if s.path == self.store_for(cell).path]:
            store.release()  # never a false "in use" for the cell's later items or sessions
            self._held.remove(store)

    def _open_sweep(self, cell: Cell) -> Sweep:
        store = self.store_for(cell)
        for note in store.adopt(self.paths(cell).legacy_store) + store.acquire(self.session_id):
            self.warn(note)
        self._held.append(store)
        backend = self.make_backend(LaunchContext(cell, self.settings, self.cell_settings(cell),
                                                  self.paths(cell), store, self.transport, self.warn,
                                                  other_images=gate_images(cell, self.settings)))
        launcher, nodelist = backend.launcher, backend.nodelist
        if backend.environments and dict(backend.environments) != environments(store):
            store.append("environment", images=dict(backend.environments))  # a lock's measured_on
        specs = self.plan_for(cell)
        try:
            recover_submissions(store, launcher, self.report)  # before anything is submitted
            self._warn_busy(cell, store, nodelist, backend.busy)
            self._freeze(cell, store, nodelist)
            # maxtext-slurm: every JOB_NAME fits and every run has its TUNE_PROFILE arm.
            image, cache = self.cell_settings(cell).image, not self.settings.fixed_protocol
            launcher.check_requests(request_for(cell, spec, image, cache=cache) for spec in possible_specs(specs))
        except PreflightError:
            launcher.close()  # e.g. remove a TUNE_PROFILE block installed by pre-flight
            raise
        if backend.other_jobs.strip():
            self.report(f"{cell.path.name}: other jobs on the partition:\n{backend.other_jobs.rstrip()}")
        sweep = Sweep(
            cell=cell, specs=specs, store=store, launcher=launcher,
            nodelist=nodelist, nodes=backend.nodes, poll_interval=self.settings.poll_interval,
            remeasure=self.settings.remeasure, rerun_failed=self.rerun_failed,
            report=self.report, warn=self.warn,
            queue_depth=launcher.queue_depth, log_source=launcher.log_source,
            image=self.cell_settings(cell).image,
            policy=self.cell_settings(cell).policy, hang=self.cell_settings(cell).hang,
            numerics=self.settings.numerics,
            fetch_artifacts=backend.fetch_artifacts, fixed_protocol=self.settings.fixed_protocol,
            budget=self.settings.budget,
        )
        sweep.set_upcoming(self.upcoming.get(cell.path, []))
        sweep.adopt_orphans()
        return sweep

    def _warn_busy(self, cell: Cell, store: ResultStore, nodelist: str, busy: str) -> None:
        """Say (without -v) which other jobs hold the pinned nodes: the sweep waits behind them."""
        own = {str(r["job_id"]) for r in store.pending_submissions().values()}
        lines = [ln for ln in busy.splitlines() if ln.strip() and ln.split("|", 1)[0] not in own]
        if lines:
            self.warn(f"{cell.path.name}: {len(lines)} other job(s) on the pinned nodes {nodelist}; "
                      "the sweep's jobs will wait for them (id|user|state|nodes|name):\n"
                      + "\n".join(lines))

    def _freeze(self, cell: Cell, store: ResultStore, nodelist: str) -> None:
        """Record the frozen nodelist; refuse to mix results of another one unless asked."""
        info = store.sweep_info()
        if info is not None and info["nodelist"] == nodelist:
            return
        if info is not None and not self.settings.fresh_baseline:
            raise PreflightError(
                f"{cell.path}: nodelist: expected the sweep's frozen nodelist {info['nodelist']!r}, "
                f"found {nodelist!r}; pass --xlatune-fresh-baseline to start a new sweep there"
            )
        store.append("sweep", nodelist=nodelist, backend=cell.backend.kind.value,
                      model_tag=cell.model_tag, parallelism=cell.parallelism.text)

    def cell_settings(self, cell: Cell) -> CellSettings:
        """The cell's image, interpreter, playbook and hang thresholds (resolved once per cell)."""
        if cell.path not in self._cell_settings:
            self._cell_settings[cell.path] = self.settings.for_cell(cell)
        return self._cell_settings[cell.path]

    def notifier(self, cell: Cell) -> Notifier:
        """Notifications run where Slurm runs (in the maxtext-slurm checkout when there is one)."""
        if self._notifier is None:
            transport = self.transport() if self.settings.notify else None
            self._notifier = Notifier(transport, self.settings.notify,
                                      cwd=cell.backend.option("checkout"), warn=self.warn)
        return self._notifier

    def stop(self, cell: Cell, stop: SweepStopped, session: pytest.Session) -> str:
        """A stop trigger fired: record it, cancel our queued jobs, notify, stop the session."""
        sweep = self.sweeps[cell.path]
        sweep.cancel_all()
        results = sweep.results()
        done = {r.item for r in results}
        pending = [s.name for s in self.upcoming.get(cell.path, []) if s.name not in done]
        message = stop_message(cell, stop.reason, sweep.nodelist, results, pending,
                               stop.failing_nodes, stop.recovery)
        try:
            sweep.store.append("stop", reason=stop.reason, pending=pending)
        except StoreWriteError as error:
            message += f"\n(not recorded: {error})"
        self.notifier(cell).send(message)
        self.stops.append(message)
        session.shouldstop = f"xlatune STOP: {stop.reason}"
        return message

    def store_failed(self, error: StoreWriteError, session: pytest.Session) -> str:
        """A record could not be written: cancel every sweep's unfinished jobs and stop."""
        for sweep in self.sweeps.values():
            sweep.cancel_all()
        message = f"xlatune STOP: {error}"
        if message not in self.stops:
            self.stops.append(message)
        session.shouldstop = message
        return message

    def report_inputs(self, cells: list[Cell] | None = None) -> list[CellReport]:
        """The stored results of these cells (default: all the session knows), as report inputs."""
        return [stored for cell in (self.cells.values() if cells is None else cells)
                if (stored := self.stored(cell)) is not None]

    def note_gate(self, cell_path: Path, report: pytest.TestReport) -> None:
        """A gate item of the cell ended: its outcome goes into `<MODEL_TAG>-gate.md`."""
        if (item := gate_item(report)) is not None:
            self.gate_items.setdefault(cell_path, []).append(item)

    def write_reports(self, cells: list[Cell] | None = None) -> list[Output]:
        """The tuning reports (and exports) of these cells, from their stored results; under
        --xlatune-gate the gate's own `<MODEL_TAG>-gate.md` instead (the tuning report stays)."""
        if self.settings.gate:
            return write_gate_reports(self)
        return write_reports(self.report_inputs(cells), self.settings.report_dir, mode=self.settings.numerics,
                             write_zh=self.settings.write_zh, export_dir=self.settings.export_dir)

    def lock_for(self, cell: Cell) -> Lock:
        if cell.path not in self.locks:
            self.locks[cell.path] = load_lock(lock_path(cell.path))
        return self.locks[cell.path]

    def write_locks(self) -> list[Output]:
        """After a whole sweep of a cell ran (not a gate run): `<cell>.lock.json` when its
        recipe differs from the lock on file (`lock.lock_change` says why, or why not)."""
        outputs = []
        for cell in self.cells_that_ran():
            stored = self.stored(cell)
            if stored is None or self.settings.gate:
                continue
            path = lock_path(cell.path)
            ran = self.ran.get(cell.path, set())
            not_run = [spec.name for spec in self.specs_of(cell) if spec.name not in ran]
            try:
                existing: Lock | None = load_lock(path) if path.exists() else None
            except LockError:
                existing = None  # unreadable: a whole sweep replaces it
            stopped = cell.path in self.stopped
            image = self.cell_settings(cell).image
            built = None if not_run or stopped else build_lock(
                cell, list(stored.results), stored.nodelist, image, mode=self.settings.numerics,
                measured_on=measured_on(self.store_for(cell), image))
            why_not = "" if built is not None or not_run or stopped else unconfirmed(
                cell, list(stored.results), mode=self.settings.numerics)
            change, why = lock_change(existing, built, not_run, stopped, why_not)
            if change and built is not None:
                write_atomic(path, dumps(built))
            outputs.append(Output(path, "recipe lock", change, why, exists=path.exists()))
        return outputs

    def transport(self) -> Transport:
        """The session's one transport (one SSH connection), opened on first use."""
        if self._transport is None:
            self._transport = open_transport(self.settings)
        return self._transport

    def specs_of(self, cell: Cell) -> list[RunSpec]:
        """The cell's runs: its live sweep's, else the plan's (specs_for)."""
        return self.sweeps[cell.path].specs if cell.path in self.sweeps else self.plan_for(cell)

    def plan_for(self, cell: Cell) -> list[RunSpec]:
        """specs_for with what a repair plans from: the cell's stored results, its new image and
        the locked flags found inert (`inert_flags`)."""
        if not (self.settings.gate and self.settings.gate_repair):
            return specs_for(cell, self.settings)
        return specs_for(cell, self.settings, self.store_for(cell).results(), self.cell_settings(cell).image,
                         self.inert_flags.get(cell.path, ()))

    def stored(self, cell: Cell) -> CellReport | None:
        """The cell's results as the report reads them, from its store alone (no launcher, no
        sweep); None for a cell whose store this session was refused or that never began."""
        if cell.path in self.refused:
            return None
        return from_store(cell, self.store_for(cell), self.specs_of(cell), self.root,
                          self.cell_settings(cell).image, self.settings.numerics)

    def close(self) -> None:
        try:
            for sweep in self.sweeps.values():
                sweep.cancel_all()  # queued jobs that will not run now (-x, Ctrl-C, a stop)
                sweep.launcher.close()
            if self._transport is not None:
                self._transport.close()
        finally:
            for store in self._held:
                store.release()


def specs_for(cell: Cell, settings: Settings, previous: Sequence[JobResult] = (), new_image: str = "",
              inert: Sequence[str] = ()) -> list[RunSpec]:
    """The runs of a cell: the full sweep, or under --xlatune-gate the locked recipes (and each
    run's control on the lock's image, just before it), and with --xlatune-gate-repair the repair
    wave planned from the `previous` results on file (plan/repair.py)."""
    if not settings.gate:
        return expand(cell)
    lock = load_lock(lock_path(cell.path))
    specs = expand_gate(cell, {r.config_tag: (r.profile, r.xla_flags, r.env, r.overrides)
                               for r in lock.recipes}, old_image=lock.image)
    if settings.gate_repair:
        dropped = (*removed_flags(previous, new_image), *inert)
        specs += repair_specs(cell, candidates(previous, lock, cell.primary_config.name, dropped=dropped))
    return specs


def gate_images(cell: Cell, settings: Settings) -> tuple[str, ...]:
    """The images a session's runs use besides its own: under --xlatune-gate, the lock's."""
    return (load_lock(lock_path(cell.path)).image,) if settings.gate else ()


RUNTIME_KEY = pytest.StashKey[Runtime]()
