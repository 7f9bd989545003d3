"""Backend kind → factory (built in, or registered by a plugin): a cell's backend into a launcher and a nodelist."""

from __future__ import annotations

import hashlib
import os
import posixpath
import shlex
import socket
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from .. import records
from ..cell.grammar import CONTAINER_IMAGE, GrammarError
from ..cell.values import BackendKind, Cell
from ..evidence.fetch import fetch_evidence
from ..paths import CellPaths, slug_of_workdir, store_file
from ..plan.expand import restore_default_changes
from ..settings import CellSettings, Settings
from ..slurm.client import SlurmClient
from ..store import ResultStore
from ..transport.base import LocalTransport, Transport, TransportError
from ..transport.hostcmd import HostCmdTransport
from ..transport.ssh import SSHTransport
from .base import CommandRefused, Launcher, LauncherError
from .devices import check_gpu
from .environment import check_interpreters, remedy
from .local import LocalLauncher
from .maxtext.launcher import DEFAULT_TIME, MaxTextSlurmLauncher, RestoreDefault
from .preflight import FrozenSlot, PreflightError, reach_hint, resolve_slot
from .sbatch import SbatchLauncher
from .slurm_jobs import SlurmPlacement

LOCAL_NODELIST = "localhost"


def open_transport(settings: Settings) -> Transport:
    """One transport per session: local commands, the checkout's host-cmd bridge (from inside
    maxtext-slurm's container), or ONE SSH connection to the login node."""
    if settings.host_cmd:
        return HostCmdTransport(settings.host_cmd)
    if not settings.ssh_host:
        return LocalTransport()
    return SSHTransport(
        settings.ssh_host, ssh_config=settings.ssh_config or None, accept_new_host_key=settings.accept_new_host_key
    )


def remote_dir(transport: Transport, settings: Settings, store_dir: Path, relative: str) -> str:
    """An absolute cluster-side directory: relative ones live under the store (local), under the
    bridge checkout's outputs/ (host-cmd: the one tree the host shares) or $HOME (SSH)."""
    if relative.startswith("/"):
        return relative
    if isinstance(transport, HostCmdTransport):
        return posixpath.join(transport.checkout, "outputs", relative)
    if isinstance(transport, LocalTransport):
        return str((store_dir / relative).resolve())
    home = transport.run(["printenv", "HOME"], timeout=30).check().stdout.strip()
    return posixpath.join(home, relative)


def slurm_backend(
    cell: Cell,
    settings: Settings,
    transport: Transport,
    workdir: str,
    store: ResultStore | None = None,
    other_images: tuple[str, ...] = (),
) -> tuple[Launcher, FrozenSlot]:
    """Pre-flight on the cluster, then the launcher pinned to the frozen nodelist.

    `store` is the cell's results store (default: the one Session.store_for gives the cell).
    """
    image = container_image(cell, settings) if cell.backend.kind is BackendKind.MAXTEXT_SLURM else ""
    client = SlurmClient(transport)
    store = store or cell_store(settings, workdir)
    info = store.sweep_info()
    # A `nodes: N` slot stays on the nodes the sweep froze (busy with its own jobs or not).
    stored = str(info["nodelist"]) if info is not None and not settings.fresh_baseline else None
    try:
        frozen = resolve_slot(cell.path, cell.slot, client, stored=stored)
    except CommandRefused as error:  # the bridge's policy said no: not a Slurm failure
        raise PreflightError(f"{cell.path}: --xlatune-host-cmd: {error}") from None
    except (LauncherError, TransportError) as error:
        raise PreflightError(
            f"{cell.path}: backend: cannot reach Slurm: {error}; {reach_hint(settings.ssh_host, settings.host_cmd)}"
        ) from None
    placement = SlurmPlacement(
        nodelist=frozen.nodelist,
        nodes=frozen.nodes,
        partition=cell.backend.option("partition") or cell.slot.partition,
        time_limit=cell.backend.option("time"),
    )
    if cell.backend.kind is BackendKind.SBATCH:

        def command(image: str | None) -> list[str]:
            python = (
                settings.for_cell(cell).python if image is None else settings.python_for(cell, image)
            ) or sys.executable
            return shlex.split(cell.backend.option("command") or f"{shlex.quote(python)} -m {settings.workload}")

        return SbatchLauncher(
            transport, client, workdir, placement, command(None), {image: command(image) for image in other_images}
        ), frozen
    if cell.backend.kind is BackendKind.MAXTEXT_SLURM:
        # Session refuses a sweep on another nodelist next: then leave the checkout untouched.
        refused = info is not None and info["nodelist"] != frozen.nodelist and not settings.fresh_baseline
        return maxtext_backend(cell, transport, client, placement, store, prepare=not refused, image=image), frozen
    raise PreflightError(
        f"{cell.path}: backend.kind: expected sbatch or maxtext-slurm for Slurm, found {cell.backend.kind.value!r}"
    )


def cell_store(settings: Settings, workdir: str) -> ResultStore:
    """The cell's store: Session names the cell's workdir after the slug of its store file."""
    return ResultStore(store_file(settings.store_dir, slug_of_workdir(workdir)))


def sweep_id(store: ResultStore, model_tag: str) -> str:
    """Stable per cell store and machine, so a rerun replaces a block its killed predecessor left."""
    digest = hashlib.sha256(f"{socket.gethostname()}:{store.path.resolve()}".encode()).hexdigest()[:10]
    return f"{model_tag[:40]}.{digest}"


def maxtext_checkout(cell: Cell, transport: Transport) -> str:
    """The checkout on the cluster: absolute, under the remote home over SSH, else by the cell file;
    through host-cmd the bridge's own checkout unless the cell names one."""
    checkout = cell.backend.option("checkout")
    if not checkout and isinstance(transport, HostCmdTransport):
        return transport.checkout
    if not checkout:
        raise PreflightError(
            f"{cell.path}: backend.checkout: expected the path of a maxtext-slurm "
            "checkout on the cluster, found no 'checkout' option"
        )
    if checkout.startswith("/"):
        return posixpath.normpath(checkout)
    if not isinstance(transport, SSHTransport):
        return str((cell.path.parent / os.path.expanduser(checkout)).resolve())
    checkout = checkout.removeprefix("~/")
    try:
        home = transport.run(["printenv", "HOME"], timeout=30).check().stdout.strip()
    except TransportError as error:
        raise PreflightError(f"{cell.path}: backend.checkout: cannot find the remote home: {error}") from None
    return posixpath.normpath(posixpath.join(home, checkout))


def container_image(cell: Cell, settings: Settings) -> str:
    """The container image maxtext-slurm jobs run in: --xlatune-image, else the cell's `image`,
    else "" (container_env.sh's DOCKER_IMAGE)."""
    resolved = settings.for_cell(cell)
    image, where = resolved.image, resolved.image_source
    try:
        return CONTAINER_IMAGE.check(image) if image else ""
    except GrammarError as error:
        raise PreflightError(f"{cell.path}: {where}: {error}") from None


def maxtext_backend(
    cell: Cell,
    transport: Transport,
    client: SlurmClient,
    placement: SlurmPlacement,
    store: ResultStore,
    prepare: bool = True,
    image: str = "",
) -> MaxTextSlurmLauncher:
    """Pre-flight on the checkout, install the TUNE_PROFILE block(s), record the inventory."""
    launcher = MaxTextSlurmLauncher(
        transport,
        client,
        maxtext_checkout(cell, transport),
        placement,
        cell.model_tag,
        sweep_id=sweep_id(store, cell.model_tag),
        ray=cell.backend.option("ray") == "true",
        time_limit=cell.backend.option("time") or DEFAULT_TIME,
        restore_default=RestoreDefault(*restore_default_changes(cell.env_file)),
        cell=str(cell.path),
        record=store.append,
        image=image,
        profiles=[profile.name for profile in cell.profiles],
    )
    if not prepare:
        return launcher  # submit() refuses to run without the block
    launcher.prepare()
    try:
        store.write(records.Inventory.from_json(launcher.inventory()))
    except BaseException:
        launcher.close()  # the block goes again: this launcher will never reach Session.close
        raise
    return launcher


def local_backend(
    settings: Settings, cell: Cell, jobs_dir: Path, first_job_number: int, other_images: tuple[str, ...] = ()
) -> LocalLauncher:
    """Local jobs run under the image's interpreter (--xlatune-image or the cell's image); a run
    on one of `other_images` under that image's. Compilation caches live in the store's jax-cache/."""
    python = settings.for_cell(cell).python
    return LocalLauncher(
        jobs_dir,
        first_job_number,
        python=python,
        module=settings.workload,
        pythons={image: settings.python_for(cell, image) for image in other_images},
        cache_root=settings.store_dir / "jax-cache",
    )


def bridge_preflight(cell: Cell, transport: Transport) -> str | None:
    """The skill's pre-flight step 1 through host-cmd: ping the bridge, name the host it reaches."""
    if not isinstance(transport, HostCmdTransport):
        return None
    if transport.info is None:
        try:
            return transport.ping().describe()
        except TransportError as error:
            raise PreflightError(f"{cell.path}: --xlatune-host-cmd: {error}") from None
    return None


Fetch = Callable[[dict[str, str], str], tuple[dict[str, str], list[str]]]


@dataclass(frozen=True)
class LaunchContext:
    """What a backend factory is given: the cell, its settings and files, its store, the transport."""

    cell: Cell
    settings: Settings
    cell_settings: CellSettings
    paths: CellPaths
    store: ResultStore
    transport: Callable[[], Transport]  # the session's one transport, opened on first use
    warn: Callable[[str], None]
    other_images: tuple[str, ...] = ()  # images some runs use instead of the session's (the gate's lock image)
    kinds: BackendKinds = field(default_factory=dict)  # the backend kinds plugins added


@dataclass(frozen=True)
class Backend:
    """A started backend: its launcher, the frozen nodelist, and what pre-flight saw there."""

    launcher: Launcher
    nodelist: str
    nodes: int = 1  # how many nodes each job holds (node-minutes accounting)
    other_jobs: str = ""  # other jobs on the partition (shown with -v)
    busy: str = ""  # other jobs on the pinned nodes (id|user|state|nodes|name lines)
    fetch_artifacts: Fetch | None = None  # remote clusters: copy an evidence run's artifacts here
    # image → what it runs on ("Python 3.11.7, JAX 0.4.35 (/venv/bin/python)"), as pre-flight saw
    # it; a lock records its image's, the gate report shows both (local backend only)
    environments: tuple[tuple[str, str], ...] = ()


Factory = Callable[[LaunchContext], Backend]


def _local(ctx: LaunchContext) -> Backend:
    check_gpu(ctx.cell)  # a jax_platform=gpu cell on a machine without one would measure no-op flags
    launcher = local_backend(
        ctx.settings, ctx.cell, ctx.paths.jobs_dir, ctx.store.max_job_number() + 1, ctx.other_images
    )
    found, problems = check_interpreters(
        LocalTransport(), {ctx.cell_settings.image: launcher.python, **launcher.pythons}, launcher.module
    )
    if problems:  # every interpreter at once, before any job: not one retried failure per item
        where = ctx.cell_settings.image_source if ctx.cell_settings.image else "--xlatune-python"
        raise PreflightError(
            f"{ctx.cell.path}: {where}: expected an interpreter that can run the workload, "
            f"found {'; '.join(problems)}: {remedy(launcher.module)}"
        )
    return Backend(launcher, LOCAL_NODELIST, environments=tuple((image, i.measured_on) for image, i in found.items()))


def _slurm(ctx: LaunchContext) -> Backend:
    transport = ctx.transport()
    if reached := bridge_preflight(ctx.cell, transport):
        ctx.warn(reached)  # once per session, before Slurm is asked anything
    workdir = remote_dir(transport, ctx.settings, ctx.settings.store_dir, ctx.paths.workdir(ctx.settings.workdir))
    launcher, frozen = slurm_backend(ctx.cell, ctx.settings, transport, workdir, ctx.store, ctx.other_images)
    fetch: Fetch | None = None
    if isinstance(transport, SSHTransport):  # over SSH: artifacts are copied into the store
        paths = ctx.paths
        fetch = lambda artifacts, job_id: fetch_evidence(transport, artifacts, paths.evidence_dir(job_id))  # noqa: E731
    return Backend(launcher, frozen.nodelist, frozen.nodes, frozen.other_jobs, frozen.busy, fetch)


FACTORIES: Mapping[BackendKind, Factory] = MappingProxyType(
    {
        BackendKind.LOCAL: _local,
        BackendKind.SBATCH: _slurm,
        BackendKind.MAXTEXT_SLURM: _slurm,
    }
)


def _accept_any(key: str, value: str) -> str | None:
    return None


@dataclass(frozen=True)
class BackendPlugin:
    """A backend kind from outside the package (hook pytest_xlatune_backend_kinds).

    `kind` is accepted as `backend.kind`; the backend section's other keys reach `check` one at
    a time as written (return None, or what was expected: the cell error names file, line and
    key) and then the factory as `context.cell.backend.option(key)`."""

    kind: str
    factory: Factory
    check: Callable[[str, str], str | None] = _accept_any


BackendKinds = Mapping[str, BackendPlugin]  # the kinds plugins added, by name (the Session holds them)


def backend_kinds(plugins: Iterable[BackendPlugin]) -> BackendKinds:
    """The added kinds by name: the cell schema accepts them (`load_cell(path, kinds)` with
    `checks(kinds)`), make_backend starts them. A built-in name is refused (ValueError)."""
    kinds: dict[str, BackendPlugin] = {}
    for plugin in plugins:
        if plugin.kind in {k.value for k in BackendKind}:
            raise ValueError(
                f"backend kind {plugin.kind!r} is built in; take it over with pytest_xlatune_make_launcher instead"
            )
        kinds[plugin.kind] = plugin
    return MappingProxyType(kinds)


def checks(kinds: BackendKinds) -> Mapping[str, Callable[[str, str], str | None]]:
    """Each added kind's check of its keys, as the cell loader takes them."""
    return MappingProxyType({name: plugin.check for name, plugin in kinds.items()})


def make_backend(ctx: LaunchContext) -> Backend:
    """The backends by `backend.kind`: built in, or added by a plugin (ctx.kinds); a plugin can
    take over any kind first through pytest_xlatune_make_launcher."""
    kind = ctx.cell.backend.kind
    return FACTORIES[kind](ctx) if isinstance(kind, BackendKind) else ctx.kinds[kind.value].factory(ctx)
