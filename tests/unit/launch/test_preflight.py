"""Pre-flight slot resolution: a `nodes: N` / `partition` slot stays on the sweep's frozen nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_xlatune.cell.values import ClusterSlot
from pytest_xlatune.launch.preflight import PreflightError, resolve_slot
from pytest_xlatune.slurm.parsers import parse_sinfo_nodes

# sinfo -N -h -o '%N|%T|%P|%E' as the local cluster prints it: node01 runs the sweep's own orphan.
SINFO = "node01|allocated|debug*|none\nnode02|idle|debug*|none\nnode03|idle|debug*|none\nnode04|drained|debug*|test\n"


class Client:
    """The four SlurmClient calls pre-flight makes, over recorded text."""

    def __init__(self, sinfo: str = SINFO, busy: str = "") -> None:
        self.sinfo, self.busy = sinfo, busy

    def nodes(self, partition: str | None = None) -> dict:  # type: ignore[type-arg]
        return parse_sinfo_nodes(self.sinfo)

    def hostnames(self, nodelist: str) -> list[str]:
        return nodelist.split(",")

    def queue_of_partition(self, partition: str | None) -> str:
        return self.busy

    def queue_on_nodes(self, nodelist: str) -> str:
        return self.busy


def test_a_nodes_slot_keeps_its_stored_node_while_the_sweeps_own_job_runs_there() -> None:
    frozen = resolve_slot(Path("c.yml"), ClusterSlot(nodes=1), Client(), stored="node01")  # type: ignore[arg-type]
    assert frozen.nodelist == "node01"


def test_without_a_stored_nodelist_idle_nodes_are_picked() -> None:
    frozen = resolve_slot(Path("c.yml"), ClusterSlot(nodes=2), Client())  # type: ignore[arg-type]
    assert frozen.nodelist == "node02,node03"


def test_a_stored_nodelist_that_no_longer_fits_the_slot_is_not_reused() -> None:
    # nodes: 2 now, one node stored: picked anew (and Session refuses the change of nodelist).
    frozen = resolve_slot(Path("c.yml"), ClusterSlot(nodes=2), Client(), stored="node01")  # type: ignore[arg-type]
    assert frozen.nodelist == "node02,node03"


def test_a_stored_node_that_is_drained_is_reported_not_swapped() -> None:
    with pytest.raises(PreflightError, match=r"c.yml: nodes: expected every pinned node .* node04 \(drained: test\)"):
        resolve_slot(Path("c.yml"), ClusterSlot(nodes=1), Client(), stored="node04")  # type: ignore[arg-type]


def test_jobs_on_the_pinned_nodes_are_handed_on_for_the_warning() -> None:
    busy = "417|alice|RUNNING|node01|other-job\n"
    frozen = resolve_slot(Path("c.yml"), ClusterSlot(nodes=1), Client(busy=busy), stored="node01")  # type: ignore[arg-type]
    assert frozen.busy == busy
