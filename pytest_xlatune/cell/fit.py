"""Nodes vs parallelism (pure): the DCN axes of a cell must fit the nodes its slot holds.

In a cell, `FSDP=N` and `PP=N` are DCN axes: MaxText's `dcn_fsdp_parallelism` and
`dcn_pipeline_parallelism`, one shard or stage per NODE (each node's own GPUs are the ICI axes,
which the cell does not set; `TP` is `ici_tensor_parallelism`, within a node). The upstream
configs leave `dcn_data_parallelism: -1`, so MaxText gives the remaining factor to data
parallelism: the slot's node count must be a multiple of FSDP x PP (the xla-tuning skill:
"ensure N x M = num_dcn_replicas"). A PP=4,FSDP=2 cell on 4 nodes cannot start, nor an FSDP=8
cell on one node (its GPUs are ICI, not DCN); either is refused at collection instead of failing
on the cluster after its queue wait.
"""

from __future__ import annotations

import math
import re

from .values import BackendKind, Cell

RULE = "FSDP and PP are DCN axes, one shard or stage per node; TP is within a node"


def host_count(nodelist: str) -> int:
    """How many hosts a grammar-checked Slurm hostlist names (`node[01-04,07]` → 5)."""
    hosts = 0
    for host in re.split(r",(?![^\[]*\])", nodelist):
        count = 1
        for body in re.findall(r"\[([^\]]*)\]", host):
            count *= sum(
                int(high) - int(low) + 1 if high else 1 for low, high in re.findall(r"([0-9]+)(?:-([0-9]+))?", body)
            )
        hosts += count
    return hosts


def spans_nodes(cell: Cell) -> bool:
    """Whether the cell's DCN axes span Slurm nodes: maxtext-slurm runs MaxText across the
    slot's nodes, as does an sbatch `command`. The embedded workload (the local backend, and
    sbatch without a command) runs every axis on one host's virtual devices."""
    kind = cell.backend.kind
    return kind is BackendKind.MAXTEXT_SLURM or (kind is BackendKind.SBATCH and bool(cell.backend.option("command")))


def dcn_misfit(cell: Cell) -> tuple[str, str] | None:
    """(what was expected, what was found) when the DCN axes do not fit the slot's nodes."""
    if not spans_nodes(cell):
        return None
    slot = cell.slot
    nodes = host_count(slot.nodelist) if slot.nodelist else slot.nodes
    if not nodes:
        return None
    dcn = math.prod(cell.parallelism.size(axis) for axis in ("FSDP", "PP"))
    if nodes % dcn == 0:
        return None
    where = f"nodelist {slot.nodelist}" if slot.nodelist else "nodes"
    return (
        f"the slot's node count a multiple of FSDP x PP ({RULE})",
        f"{cell.parallelism.text} (FSDP x PP = {dcn}) on {nodes} node(s) ({where})",
    )
