"""A cell's sweep opened: its store owned, its backend started, pre-flight run, its runs planned;
a pre-flight failure remembered so the cell's later items fail with one line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import records
from ..adaptive.cache import request_for
from ..cell.values import BackendKind, Cell
from ..launch.devices import NoGpuHere
from ..launch.preflight import PreflightError, failure_line
from ..launch.registry import LaunchContext
from ..paths import lock_path
from ..plan.expand import RunSpec, expand, expand_gate
from ..plan.repair import candidates, removed_flags, repair_specs
from ..plan.request import possible_specs
from ..results import JobResult
from ..settings import Settings
from ..store import ResultStore, StoreError
from ..verdict.lock import load_lock
from .gate_outputs import environments
from .recover import recover_submissions
from .sweep import Sweep

if TYPE_CHECKING:
    from .session import Session


def sweep_for(session: Session, cell: Cell, item: str) -> Sweep:
    """The cell's sweep, opened on the first call (pre-flight). A failure fails the item that ran
    it with the whole message, and every later item of the cell with one line pointing there."""
    if cell.path in session.no_gpu:  # skipped, not failed: the machine, not the cell, is wrong
        raise NoGpuHere(session.no_gpu[cell.path])
    if cell.path in session.failed:
        first = session.failed_first.get(cell.path, "")
        raise PreflightError(
            f"{cell.path.name}: not run: pre-flight failed"
            + (f" (see {first} above)" if first else f": {session.failed[cell.path]}")
        )
    if cell.path not in session.sweeps:
        try:
            session.sweeps[cell.path] = _own_and_open(session, cell)
        except StoreError as error:  # another session owns the store: nothing is submitted
            _fail(session, cell, str(error), item)
            session.refused.add(cell.path)  # its owner writes the cell's report, not this session
            raise PreflightError(str(error)) from None
        except NoGpuHere as error:
            session.no_gpu[cell.path] = str(error)
            raise
        except PreflightError as error:
            _fail(session, cell, str(error), item)
            raise
        except Exception as error:  # a backend or transport failure: one line, never a traceback
            line = failure_line(
                cell.path,
                error,
                session.settings.ssh_host,
                session.settings.host_cmd,
                cell.backend.kind is not BackendKind.LOCAL,
            )
            _fail(session, cell, line, item)
            raise PreflightError(line) from None
    return session.sweeps[cell.path]


def _fail(session: Session, cell: Cell, message: str, item: str) -> None:
    session.failed[cell.path] = message
    session.failed_first.setdefault(cell.path, item)
    for store in [s for s in session.held if s.path == session.store_for(cell).path]:
        store.release()  # never a false "in use" for the cell's later items or sessions
        session.held.remove(store)


def _own_and_open(session: Session, cell: Cell) -> Sweep:
    store = session.store_for(cell)
    for note in store.adopt(session.paths(cell).legacy_store) + store.acquire(session.session_id):
        session.warn(note)
    session.held.append(store)
    return open_sweep(session, cell, store)


def open_sweep(session: Session, cell: Cell, store: ResultStore) -> Sweep:
    """Start the cell's backend on its (owned) store, run pre-flight and build its Sweep."""
    settings, cell_settings = session.settings, session.cell_settings(cell)
    backend = session.make_backend(
        LaunchContext(
            cell,
            settings,
            cell_settings,
            session.paths(cell),
            store,
            session.transport,
            session.warn,
            other_images=gate_images(cell, settings),
            kinds=session.kinds,
        )
    )
    launcher, nodelist = backend.launcher, backend.nodelist
    if backend.environments and dict(backend.environments) != environments(store):
        store.write(records.Environment(images=dict(backend.environments)))  # a lock's measured_on
    specs = plan_for(session, cell)
    try:
        recover_submissions(store, launcher, session.report)  # before anything is submitted
        _warn_busy(session, cell, store, nodelist, backend.busy)
        _freeze(cell, store, nodelist, settings)
        # maxtext-slurm: every JOB_NAME fits and every run has its TUNE_PROFILE arm.
        image, cache = cell_settings.image, not settings.fixed_protocol
        launcher.check_requests(request_for(cell, spec, image, cache=cache) for spec in possible_specs(specs))
    except PreflightError:
        launcher.close()  # e.g. remove a TUNE_PROFILE block installed by pre-flight
        raise
    if backend.other_jobs.strip():
        session.report(f"{cell.path.name}: other jobs on the partition:\n{backend.other_jobs.rstrip()}")
    sweep = Sweep(
        cell=cell,
        specs=specs,
        store=store,
        launcher=launcher,
        nodelist=nodelist,
        nodes=backend.nodes,
        poll_interval=settings.poll_interval,
        # A gate compares runs of one time window: its runs are measured in this session, never
        # reused from an earlier one (a job a killed gate left running is re-attached to).
        remeasure=settings.remeasure or settings.gate,
        rerun_failed=session.rerun_failed,
        report=session.report,
        warn=session.warn,
        queue_depth=launcher.queue_depth,
        log_source=launcher.log_source,
        image=cell_settings.image,
        playbook=cell_settings.playbook,
        hang=cell_settings.hang,
        numerics=settings.numerics,
        fetch_artifacts=backend.fetch_artifacts,
        fixed_protocol=settings.fixed_protocol,
        budget=settings.budget,
        prior=session.prior(cell),
    )
    sweep.set_upcoming(session.upcoming.get(cell.path, []))
    sweep.adopt_orphans()
    return sweep


def _warn_busy(session: Session, cell: Cell, store: ResultStore, nodelist: str, busy: str) -> None:
    """Say (without -v) which other jobs hold the pinned nodes: the sweep waits behind them."""
    own = {str(r["job_id"]) for r in store.pending_submissions().values()}
    lines = [ln for ln in busy.splitlines() if ln.strip() and ln.split("|", 1)[0] not in own]
    if lines:
        session.warn(
            f"{cell.path.name}: {len(lines)} other job(s) on the pinned nodes {nodelist}; "
            "the sweep's jobs will wait for them (id|user|state|nodes|name):\n" + "\n".join(lines)
        )


def _freeze(cell: Cell, store: ResultStore, nodelist: str, settings: Settings) -> None:
    """Record the frozen nodelist; refuse to mix results of another one unless asked."""
    info = store.sweep_info()
    if info is not None and info["nodelist"] == nodelist:
        return
    if info is not None and not settings.fresh_baseline:
        raise PreflightError(
            f"{cell.path}: nodelist: expected the sweep's frozen nodelist {info['nodelist']!r}, "
            f"found {nodelist!r}; pass --xlatune-fresh-baseline to start a new sweep there"
        )
    store.write(
        records.SweepOpened(
            nodelist=nodelist,
            backend=cell.backend.kind.value,
            model_tag=cell.model_tag,
            parallelism=cell.parallelism.text,
        )
    )


def specs_for(
    cell: Cell, settings: Settings, previous: Sequence[JobResult] = (), new_image: str = "", inert: Sequence[str] = ()
) -> list[RunSpec]:
    """The runs of a cell: the full sweep, or under --xlatune-gate the locked recipes (and each
    run's control on the lock's image, just before it), and with --xlatune-gate-repair the repair
    wave planned from the `previous` results on file (plan/repair.py)."""
    if not settings.gate:
        return expand(cell)
    lock = load_lock(lock_path(cell.path))
    specs = expand_gate(
        cell,
        {r.config_tag: (r.profile, r.xla_flags, r.env, r.overrides, r.unset_env) for r in lock.recipes},
        old_image=lock.image,
    )
    if settings.gate_repair:
        dropped = (*removed_flags(previous, new_image), *inert)
        specs += repair_specs(cell, candidates(previous, lock, cell.primary_config.name, dropped=dropped))
    return specs


def plan_for(session: Session, cell: Cell) -> list[RunSpec]:
    """specs_for with what a repair plans from: the cell's stored results, its new image and
    the locked flags found inert (`Session.inert_flags`)."""
    if not (session.settings.gate and session.settings.gate_repair):
        return specs_for(cell, session.settings)
    return specs_for(
        cell,
        session.settings,
        session.store_for(cell).results(),
        session.cell_settings(cell).image,
        session.inert_flags.get(cell.path, ()),
    )


def gate_images(cell: Cell, settings: Settings) -> tuple[str, ...]:
    """The images a session's runs use besides its own: under --xlatune-gate, the lock's."""
    return (load_lock(lock_path(cell.path)).image,) if settings.gate else ()
