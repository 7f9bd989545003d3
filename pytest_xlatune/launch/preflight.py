"""Pre-flight for Slurm cells: resolve the cluster slot ONCE to a frozen nodelist and check it.

The decisions are pure functions over parsed sinfo/hostnames output; `resolve_slot` does the IO
through a SlurmClient. Every failure is a PreflightError with one line naming the cell and key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..cell.values import ClusterSlot
from ..errors import XlatuneError
from ..slurm.client import SlurmClient
from ..slurm.parsers import NodeState, NodeStatus
from ..transport.base import TransportError


class PreflightError(XlatuneError):
    """The cell cannot start on this cluster; nothing was submitted."""


@dataclass(frozen=True)
class FrozenSlot:
    """The nodes every job of the sweep is pinned to."""

    nodelist: str
    hosts: tuple[str, ...]
    partition: str | None
    other_jobs: str = ""  # squeue of the partition (shown with -v)
    busy: str = ""  # squeue of jobs on the pinned nodes (always shown: the sweep waits for them)

    @property
    def nodes(self) -> int:
        return len(self.hosts)


def pick_idle(nodes: dict[str, NodeStatus], count: int, partition: str | None) -> list[str]:
    """The first `count` idle, responding nodes (sorted by name) of the partition."""
    idle = sorted(
        n.name
        for n in nodes.values()
        if n.state is NodeState.IDLE and n.responding and (partition is None or n.partition == partition)
    )
    return idle[:count] if len(idle) >= count else []


def unusable(nodes: dict[str, NodeStatus], hosts: list[str]) -> list[str]:
    """`host (state: reason)` for every pinned host that cannot take jobs."""
    bad = []
    for host in hosts:
        status = nodes.get(host)
        if status is None:
            bad.append(f"{host} (not known to sinfo)")
        elif not status.state.usable or not status.responding:
            bad.append(f"{host} ({status.raw_state}{': ' + status.reason if status.reason else ''})")
    return bad


def fits(nodes: dict[str, NodeStatus], hosts: list[str], count: int, partition: str | None) -> bool:
    """Whether a stored frozen nodelist still answers a `nodes: N` / `partition` slot."""
    return len(hosts) == count and all(
        h in nodes and (partition is None or nodes[h].partition == partition) for h in hosts
    )


def resolve_slot(cell_path: Path, slot: ClusterSlot, client: SlurmClient, stored: str | None = None) -> FrozenSlot:
    """nodelist → checked as given; partition+nodes / nodes → the sweep's stored nodelist when it
    still fits the slot (its nodes may be busy with the sweep's own jobs), else N idle nodes
    picked from sinfo."""
    nodes = client.nodes(partition=slot.partition)
    reuse = client.hostnames(stored) if stored and not slot.nodelist else []
    if reuse and fits(nodes, reuse, slot.nodes or 0, slot.partition):
        hosts, nodelist = reuse, str(stored)
        key = "partition" if slot.partition else "nodes"
    elif slot.nodelist:
        hosts = client.hostnames(slot.nodelist)
        nodelist = slot.nodelist
        key = "nodelist"
    else:
        wanted = slot.nodes or 0
        hosts = pick_idle(nodes, wanted, slot.partition)
        key = "partition" if slot.partition else "nodes"
        if not hosts:
            idle = sum(1 for n in nodes.values() if n.state is NodeState.IDLE)
            raise PreflightError(
                f"{cell_path}: {key}: expected {wanted} idle nodes"
                f"{' in partition ' + slot.partition if slot.partition else ''},"
                f" found {idle} idle"
            )
        nodelist = ",".join(hosts)
    bad = unusable(nodes, hosts)
    if bad:
        raise PreflightError(
            f"{cell_path}: {key}: expected every pinned node idle/mixed/allocated, found {', '.join(bad)}"
        )
    return FrozenSlot(
        nodelist=nodelist,
        hosts=tuple(hosts),
        partition=slot.partition,
        other_jobs=client.queue_of_partition(slot.partition),
        busy=client.queue_on_nodes(nodelist),
    )


def reach_hint(ssh_host: str, host_cmd: str) -> str:
    """What to pass or check when Slurm (or the host behind it) could not be reached."""
    if ssh_host:
        return (
            f"check --xlatune-ssh-host {ssh_host} (the host, its key in known_hosts, your SSH key), "
            "or pass --xlatune-host-cmd CHECKOUT from inside the maxtext-slurm container"
        )
    if host_cmd:
        return f"check --xlatune-host-cmd {host_cmd}: is the checkout's .host-cmd bridge running on the host?"
    return (
        "no Slurm client here: reach the cluster with --xlatune-ssh-host HOST (SSH to its login node) "
        "or --xlatune-host-cmd CHECKOUT (from inside the maxtext-slurm container)"
    )


def failure_line(cell_path: Path, error: Exception, ssh_host: str, host_cmd: str, slurm: bool) -> str:
    """An exception a backend or transport raised at pre-flight, as one line naming the option
    that fixes it (never a traceback)."""
    text = " ".join(str(error).split()) or type(error).__name__
    where = "--xlatune-ssh-host" if ssh_host else "--xlatune-host-cmd" if host_cmd else "backend"
    kind = "" if isinstance(error, TransportError) else f"{type(error).__name__}: "  # ours say what failed
    line = f"{cell_path}: {where}: pre-flight failed: {kind}{text}"
    return f"{line}; {reach_hint(ssh_host, host_cmd)}" if slurm or ssh_host or host_cmd else line
