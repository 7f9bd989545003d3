"""Turn a cell's backend section into a launcher and a frozen nodelist (pre-flight included)."""

from __future__ import annotations

import posixpath
import shlex
import sys
from pathlib import Path

from .launch.base import Launcher, LauncherError
from .launch.local import LocalLauncher
from .launch.sbatch import SbatchLauncher, SlurmPlacement
from .model import BackendKind, Cell
from .preflight import FrozenSlot, PreflightError, resolve_slot
from .settings import Settings
from .slurm.client import SlurmClient
from .transport import LocalTransport, SSHTransport, Transport, TransportError

LOCAL_NODELIST = "localhost"


def open_transport(settings: Settings) -> Transport:
    """One transport per session: local commands, or ONE SSH connection to the login node."""
    if not settings.ssh_host:
        return LocalTransport()
    return SSHTransport(settings.ssh_host, ssh_config=settings.ssh_config or None,
                        accept_new_host_key=settings.accept_new_host_key)


def remote_dir(transport: Transport, settings: Settings, store_dir: Path, relative: str) -> str:
    """An absolute cluster-side directory: relative ones live under the store (local) or $HOME (SSH)."""
    if relative.startswith("/"):
        return relative
    if isinstance(transport, LocalTransport):
        return str((store_dir / relative).resolve())
    home = transport.run(["printenv", "HOME"], timeout=30).check().stdout.strip()
    return posixpath.join(home, relative)


def slurm_backend(cell: Cell, settings: Settings, transport: Transport, workdir: str
                  ) -> tuple[Launcher, FrozenSlot]:
    """Pre-flight on the cluster, then the launcher pinned to the frozen nodelist."""
    client = SlurmClient(transport)
    try:
        frozen = resolve_slot(cell.path, cell.slot, client)
    except (LauncherError, TransportError) as error:
        raise PreflightError(f"{cell.path}: backend: cannot reach Slurm: {error}") from None
    placement = SlurmPlacement(nodelist=frozen.nodelist, nodes=frozen.nodes,
                               partition=cell.backend.option("partition") or cell.slot.partition,
                               time_limit=cell.backend.option("time"))
    if cell.backend.kind is BackendKind.SBATCH:
        default = f"{shlex.quote(settings.python or sys.executable)} -m {settings.workload}"
        command = shlex.split(cell.backend.option("command") or default)
        return SbatchLauncher(transport, client, workdir, placement, command), frozen
    raise PreflightError(f"{cell.path}: backend.kind: expected local or sbatch in this version, "
                         f"found {cell.backend.kind.value!r}")


def local_backend(settings: Settings, jobs_dir: Path, first_job_number: int) -> LocalLauncher:
    return LocalLauncher(jobs_dir, first_job_number, python=settings.python, module=settings.workload)
