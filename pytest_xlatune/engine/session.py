"""The Session: the pytest session's xlatune state (one Sweep per cell, created on first use,
closed at session end), registered as a plugin object whose hooks read and write that state.

plugin.py builds it in pytest_configure (`Session.start`); its hooks are methods here, so no hook
reaches the state through the config's stash, and a test can build one without pytest.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from contextvars import Token
from pathlib import Path
from types import MappingProxyType

import pytest

from .. import records, shareable
from ..adaptive.order import Prior
from ..cell.load import CellError, load_cell
from ..cell.values import Cell
from ..launch.registry import BackendKinds, Factory, checks, make_backend, open_transport
from ..notify import Notifier
from ..paths import CellPaths, lock_path
from ..plan.expand import RunKind, RunSpec
from ..report.build import CellReport, from_store
from ..report.files import Output
from ..report.gate import GateItem
from ..report.repair import Repair
from ..report.stop import stop_message
from ..settings import CellSettings, Settings
from ..shareable import Masker, clean
from ..store import ResultStore, StoreWriteError
from ..transport.base import Transport
from ..verdict.lock import Lock, load_lock
from . import outputs
from .final_figures import FinalFigures
from .gate_outputs import gate_item
from .milestones import Milestones
from .opening import gate_images, plan_for, specs_for, sweep_for
from .prior import planned_orders, prior_for
from .stopsignals import StopSignals
from .sweep import Sweep
from .watch import SweepStopped

__all__ = ["SESSION_KEY", "Session", "gate_images", "specs_for"]


class Session:
    """The sweeps and bookkeeping of this pytest session; a plugin object (`xlatune-session`)."""

    def __init__(
        self,
        settings: Settings,
        root: Path,
        report: Callable[[str], None],
        warn: Callable[[str], None] | None = None,
        session_id: str = "",
        make_backend: Factory = make_backend,
        rerun_failed: bool = False,
        kinds: BackendKinds = MappingProxyType({}),
    ) -> None:
        self.settings = settings
        self.kinds = kinds  # the backend kinds plugins added (hook pytest_xlatune_backend_kinds)
        self.kind_checks = checks(kinds)  # ... as the cell loader takes them
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
        self.milestones = Milestones()  # --xlatune-notify's progress messages (the controller's)
        self.on_worker = False  # an xdist worker: its controller notifies
        self.held: list[ResultStore] = []  # stores this session owns (their locks)
        self.refused: set[Path] = set()  # cells whose store another session owns
        self._cell_settings: dict[Path, CellSettings] = {}
        self.gate_items: dict[Path, list[GateItem]] = {}  # under --xlatune-gate: each item's outcome
        # Locked flags the gate's per-flag classification found inert on the new image (their
        # compiled program did not change): a reason to repair, and dropped by its suggestion.
        self.inert_flags: dict[Path, tuple[str, ...]] = {}
        self.repairs: dict[Path, Repair | None] = {}  # --xlatune-gate-repair: each gated cell's
        self.started_at = time.time()  # this session's jobs end after it (history, repair cost)
        self.signals = StopSignals()  # SIGTERM/SIGHUP as Ctrl-C while the session runs
        self.masking: Token[Masker | None] | None = None  # its masker (shareable.py), put back at the end
        self.figures = FinalFigures(self)

    @classmethod
    def start(cls, config: pytest.Config, settings: Settings, kinds: BackendKinds = MappingProxyType({})) -> Session:
        """Build the session's Session, stash it, register it (and its parts) as plugins."""

        def write(text: str, always: bool) -> None:
            terminal = config.pluginmanager.get_plugin("terminalreporter")
            capture = config.pluginmanager.get_plugin("capturemanager")
            if terminal is None or (config.option.verbose <= 0 and not always):
                return
            # Written while the item runs, so step around output capturing.
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
                terminal.write_line(clean(f"  [xlatune] {text}", terminal=True))

        # Progress (steps, re-attach) with -v; incidents (retries, RESUMEs, failed polls, cancels on
        # sight, notifications not sent) always: a sweep runs for hours while nobody watches.
        worker = getattr(config, "workerinput", None)
        session = cls(
            settings,
            config.rootpath,
            lambda text: write(text, False),
            warn=lambda text: write(text, True),
            session_id=worker["testrunuid"] if worker else uuid.uuid4().hex,
            make_backend=lambda context: config.hook.pytest_xlatune_make_launcher(context=context),
            rerun_failed=bool(config.getoption("lf", False)),
            kinds=kinds,
        )
        session.masking = shareable.configure(settings.mask)
        session.on_worker = worker is not None
        config.stash[SESSION_KEY] = session
        config.pluginmanager.register(session, "xlatune-session")
        config.pluginmanager.register(session.figures, "xlatune-final-figures")
        if config.pluginmanager.hasplugin("html"):
            from ..report import html as htmlreport
            from .html_hooks import HtmlHooks

            config.pluginmanager.register(htmlreport, "xlatune-html")
            config.pluginmanager.register(HtmlHooks(session), "xlatune-html-session")
        session.signals.install()
        return session

    # The hooks that need the session's state (the stateless ones are plugin.py's).

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from .items import CellItem  # items.py reads SESSION_KEY from here

        for item in session.items:
            if isinstance(item, CellItem):
                self.note_item(item.cell, item.spec)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Under xdist the controller collects nothing: it learns the cells from workers' reports,
        so it can write each cell's report once, at the end."""
        props = dict(report.user_properties)
        if not props.get("xlatune_cell"):
            return
        cell_path = Path(str(props["xlatune_cell"]))
        if cell_path not in self.cells:
            try:
                self.note_cell(load_cell(cell_path, self.kind_checks))
            except CellError:
                return  # already reported by the worker that collected it
        if self.settings.gate:
            self.note_gate(cell_path, report)
        if report.when == "call":
            self.note_ran(cell_path, str(props["xlatune_item"]))
            self.notify_progress(cell_path, str(props["xlatune_item"]), props)
            if props.get("xlatune_sweep_stop"):  # from a worker too: the controller writes the lock
                self.note_stopped(cell_path)
            if props.get("xlatune_needs"):
                self.needs[report.nodeid] = str(props["xlatune_needs"])

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        settings = self.settings
        return [
            clean(
                f"xlatune: store {settings.store_dir}, reports in {settings.report_dir}, "
                f"poll every {settings.poll_interval:g} s" + (", remeasure" if settings.remeasure else ""),
                terminal=True,
            )
        ]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        try:
            self.close()
            self._write_outputs(session)
            if self.settings.notify and not self.on_worker and not session.config.option.collectonly:
                for cell in self.cells_that_ran():
                    done = len(self.ran[cell.path])
                    final = self.milestones.final(cell, done, self.outputs, self.root, self.settings.report_dir)
                    self.notifier(cell).send(final)  # over the session's one connection, still open
        finally:
            self.close_transport()

    def _write_outputs(self, session: pytest.Session) -> None:
        """--collect-only and a session that ran no item write nothing; the report and the lock
        only for cells whose items ran, each only when its content changes."""
        if (
            self.settings.write_report
            and not hasattr(session.config, "workerinput")
            and not session.config.option.collectonly
        ):
            written, failures = outputs.write_all(self, session)
            self.outputs += written
            self.stops += failures

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
        def write(text: str) -> None:
            terminalreporter.write_line(clean(text, terminal=True))

        for message in self.stops:
            terminalreporter.write_sep("=", "xlatune STOP", red=True)
            write(message)
        if self.needs:
            terminalreporter.write_sep("-", "xlatune: runs the selected items needed (not run)")
            for nodeid, text in self.needs.items():
                write(f"{nodeid}: {text}")
        for output in self.outputs:
            write(output.line(config.invocation_params.dir))
        for cell, spent in outputs.costs(self):
            write(f"xlatune: {cell.path.name}: sweep cost {spent}")
        for cell, line in outputs.adaptive_lines(self):
            write(f"xlatune: {cell.path.name}: {line}")
        for cell, line in planned_orders(self):
            write(f"xlatune: {cell.path.name}: {line}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.signals.restore()
        shareable.reset(self.masking)
        self.masking = None

    # The state.

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

    def sweep_for(self, cell: Cell, item: str = "") -> Sweep:
        """The cell's sweep; the first call runs pre-flight (engine/opening.py: a failure fails the
        item that ran it with the whole message, every later item of the cell with one line)."""
        return sweep_for(self, cell, item)

    def prior(self, cell: Cell) -> Prior:
        """Other sweeps' effects on the cell's selected candidates (none under the fixed protocol
        or the gate: they run in list order)."""
        if self.settings.fixed_protocol or self.settings.gate:
            return Prior()
        return prior_for(cell, self.upcoming.get(cell.path, []), self.settings.store_dir, self.paths(cell).store)

    def cell_settings(self, cell: Cell) -> CellSettings:
        """The cell's image, interpreter, playbook and hang thresholds (resolved once per cell)."""
        if cell.path not in self._cell_settings:
            self._cell_settings[cell.path] = self.settings.for_cell(cell)
        return self._cell_settings[cell.path]

    def notifier(self, cell: Cell) -> Notifier:
        """Notifications run where Slurm runs (in the maxtext-slurm checkout when there is one)."""
        if self._notifier is None:
            transport = self.transport() if self.settings.notify else None
            self._notifier = Notifier(
                transport, self.settings.notify, cwd=cell.backend.option("checkout"), warn=self.warn
            )
        return self._notifier

    def notify_progress(self, cell_path: Path, item: str, props: dict[str, object]) -> None:
        """Kickoff, a positive result, the mid-point (engine/milestones.py), when notifying."""
        if self.settings.notify and not self.on_worker:
            cell, specs = self.cells[cell_path], self.upcoming.get(cell_path, [])
            rerun = any(s.name == item and s.kind is RunKind.WINNER_EVIDENCE for s in specs)
            for message in self.milestones.after_item(cell, item, props, len(self.ran[cell_path]), len(specs), rerun):
                self.notifier(cell).send(message)

    def stop(self, cell: Cell, stop: SweepStopped, session: pytest.Session) -> str:
        """A stop trigger fired: record it, cancel our queued jobs, notify, stop the session."""
        sweep = self.sweeps[cell.path]
        sweep.cancel_all()
        results = sweep.results()
        done = {r.item for r in results}
        pending = [s.name for s in self.upcoming.get(cell.path, []) if s.name not in done]
        message = stop_message(cell, stop.reason, sweep.nodelist, results, pending, stop.failing_nodes, stop.recovery)
        try:
            sweep.store.write(records.Stop(reason=stop.reason, pending=tuple(pending)))
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
        return [
            stored
            for cell in (self.cells.values() if cells is None else cells)
            if (stored := self.stored(cell)) is not None
        ]

    def note_gate(self, cell_path: Path, report: pytest.TestReport) -> None:
        """A gate item of the cell ended: its outcome goes into `<MODEL_TAG>-gate.md`."""
        if (item := gate_item(report)) is not None:
            self.gate_items.setdefault(cell_path, []).append(item)

    def write_reports(self, cells: list[Cell] | None = None) -> list[Output]:
        """The tuning reports (or under --xlatune-gate the gate reports) of these cells."""
        return outputs.session_reports(self, cells)

    def write_locks(self) -> list[Output]:
        """The locks of the cells whose whole sweep ran (engine/outputs.py)."""
        return outputs.session_locks(self)

    def lock_for(self, cell: Cell) -> Lock:
        if cell.path not in self.locks:
            self.locks[cell.path] = load_lock(lock_path(cell.path))
        return self.locks[cell.path]

    def transport(self) -> Transport:
        """The session's one transport (one SSH connection), opened on first use."""
        if self._transport is None:
            self._transport = open_transport(self.settings)
        return self._transport

    def plan_for(self, cell: Cell) -> list[RunSpec]:
        """The cell's planned runs (opening.plan_for: with the repair wave under --xlatune-gate-repair)."""
        return plan_for(self, cell)

    def specs_of(self, cell: Cell) -> list[RunSpec]:
        """The cell's runs: its live sweep's, else the plan's (opening.plan_for)."""
        return self.sweeps[cell.path].specs if cell.path in self.sweeps else plan_for(self, cell)

    def stored(self, cell: Cell) -> CellReport | None:
        """The cell's results as the report reads them, from its store alone (no launcher, no
        sweep); None for a cell whose store this session was refused or that never began."""
        if cell.path in self.refused:
            return None
        return from_store(
            cell,
            self.store_for(cell),
            self.specs_of(cell),
            self.root,
            self.cell_settings(cell).image,
            self.settings.numerics,
        )

    def close(self) -> None:
        """Cancel what will not run now, close the launchers, release the stores; the transport
        stays open for the session's last notifications (`close_transport`)."""
        try:
            for sweep in self.sweeps.values():
                sweep.cancel_all()  # queued jobs that will not run now (-x, Ctrl-C, a stop)
                sweep.launcher.close()
        finally:
            for store in self.held:
                store.release()

    def close_transport(self) -> None:
        if self._transport is not None:
            self._transport.close()


SESSION_KEY = pytest.StashKey[Session]()
