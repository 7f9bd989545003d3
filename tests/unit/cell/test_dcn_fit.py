"""Nodes vs parallelism: FSDP and PP are DCN axes (per node) and must fit the slot's nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_xlatune.cell.fit import host_count
from pytest_xlatune.cell.load import CellError, load_cell
from tests.conftest import refused_at_collection

MAXTEXT = "backend: {kind: maxtext-slurm, checkout: /x}\n"


def _cell(tmp_path: Path, slot: str, parallelism: str, backend: str = MAXTEXT) -> Path:
    path = tmp_path / "cell.yml"
    path.write_text(f"model_tag: ds3\n{slot}\nparallelism: {parallelism}\n{backend}")
    return path


@pytest.mark.parametrize(
    ("nodelist", "count"),
    [
        ("node01", 1),
        ("node[01-04]", 4),
        ("node[01-04,07]", 5),
        ("a,b,c", 3),
        ("rack[1-2]-gpu[1-8]", 16),
        ("chi[2766,2800,2810,2832,2835,2865,2872,2883]", 8),
        ("n[1-2],m7", 3),
    ],
)
def test_host_count_expands_a_slurm_hostlist(nodelist: str, count: int) -> None:
    assert host_count(nodelist) == count


def test_pp4_fsdp2_on_four_nodes_is_refused_with_the_rule_naming_file_and_key(tmp_path: Path) -> None:
    path = _cell(tmp_path, "nodelist: node[01-04]", "PP=4,FSDP=2")
    with pytest.raises(CellError) as info:
        load_cell(path)
    message = str(info.value)
    assert (info.value.key, info.value.line) == ("parallelism", 3), message
    assert message.startswith(f"{path}:3: parallelism: expected the slot's node count a multiple of FSDP x PP")
    assert "FSDP and PP are DCN axes, one shard or stage per node" in message
    assert "found PP=4,FSDP=2 (FSDP x PP = 8) on 4 node(s) (nodelist node[01-04])" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("slot", "parallelism"),
    [
        ("nodelist: node[01-08]", "PP=4,FSDP=2"),
        ("nodes: 8", "FSDP=8"),
        ("nodes: 16", "FSDP=8"),
        ("nodes: 4", "TP=8"),
        ("partition: gpu\nnodes: 4", "PP=4"),
        # One node: its GPUs are ICI (TP), never DCN; FSDP=1 leaves data parallelism the one node.
        ("nodes: 1", "TP=8"),
        ("nodelist: node01", "FSDP=1"),
        ("nodes: 1", "FSDP=1,PP=1,TP=4"),
    ],
)
def test_dcn_axes_that_fit_the_nodes_load(tmp_path: Path, slot: str, parallelism: str) -> None:
    # 16 nodes on FSDP=8: dcn_data_parallelism -1 (upstream's default) takes the factor 2.
    load_cell(_cell(tmp_path, slot, parallelism))


@pytest.mark.parametrize("slot", ["nodes: 6", "partition: gpu\nnodes: 2"])
def test_a_node_count_slot_is_checked_too(tmp_path: Path, slot: str) -> None:
    with pytest.raises(CellError, match=r"parallelism: .*found FSDP=8 \(FSDP x PP = 8\) on \d node\(s\) \(nodes\)"):
        load_cell(_cell(tmp_path, slot, "FSDP=8"))


@pytest.mark.parametrize(
    ("slot", "parallelism", "found"),
    [
        ("nodes: 1", "FSDP=8", "found FSDP=8 (FSDP x PP = 8) on 1 node(s) (nodes)"),
        ("nodelist: node01", "PP=2", "found PP=2 (FSDP x PP = 2) on 1 node(s) (nodelist node01)"),
        ("partition: gpu\nnodes: 1", "FSDP=2,TP=4", "found FSDP=2,TP=4 (FSDP x PP = 2) on 1 node(s) (nodes)"),
    ],
)
def test_a_one_node_slot_is_checked_too_dcn_axes_are_per_node(
    tmp_path: Path, slot: str, parallelism: str, found: str
) -> None:
    # An FSDP=8 cell on one node would ask MaxText for 8 DCN slices of a one-node job: it fails on
    # the cluster after the queue wait. The rule says what to write instead (TP splits a node).
    path = _cell(tmp_path, slot, parallelism)
    with pytest.raises(CellError) as info:
        load_cell(path)
    message = str(info.value)
    line = 2 + slot.count("\n")
    assert message.startswith(
        f"{path}:{line + 1}: parallelism: expected the slot's node count a multiple of "
        "FSDP x PP (FSDP and PP are DCN axes, one shard or stage per node; TP is within a "
        "node), "
    ), message
    assert message.endswith(found), message


def test_the_embedded_workload_runs_every_axis_on_one_host(tmp_path: Path) -> None:
    # The local backend and sbatch without a command run pytest_xlatune.workload: its axes are
    # one host's virtual devices whatever the slot; an sbatch command (MaxText) spans nodes.
    load_cell(_cell(tmp_path, "nodes: 2", "FSDP=8", "backend: {kind: sbatch}\n"))
    load_cell(_cell(tmp_path, "nodes: 2", "FSDP=8", "backend: {kind: local}\n"))
    load_cell(_cell(tmp_path, "nodes: 1", "FSDP=8", "backend: {kind: local}\n"))  # the demo cell's shape
    with pytest.raises(CellError, match="parallelism: expected"):
        load_cell(_cell(tmp_path, "nodes: 2", "FSDP=8", "backend: {kind: sbatch, command: ./train.sh}\n"))


def test_the_refusal_is_one_line_at_collection(pytester: pytest.Pytester) -> None:
    cell = pytester.makefile(
        ".yml", hybrid="model_tag: ds3\nnodelist: node[01-04]\nparallelism: PP=4,FSDP=2\n" + MAXTEXT
    )
    refused_at_collection(
        pytester,
        cell,
        "hybrid.yml:3: parallelism: expected the slot's node count a multiple of "
        "FSDP x PP (*), found PP=4,FSDP=2 (FSDP x PP = 8) on 4 node(s) (nodelist node[[]01-04[]])",
    )


def test_the_reference_quotes_the_one_node_refusal_as_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = (Path(__file__).parents[3] / "docs" / "reference" / "cell.md").read_text()
    quoted = next(line for line in page.splitlines() if line.startswith("cells/ds3.yml:3: parallelism:"))
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "ds3.yml").write_text(f"model_tag: ds3\nnodes: 1\nparallelism: FSDP=8\n{MAXTEXT}")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CellError) as info:
        load_cell(Path("cells/ds3.yml"))
    assert str(info.value) == quoted
