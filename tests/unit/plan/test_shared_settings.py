"""Sweep.duplicate_of: which earlier run an item shares its job with (effective settings, same tag)."""

from __future__ import annotations

from pathlib import Path

from pytest_xlatune.cell.values import Cell, ClusterSlot, ConfigTag, EnvFileEntry, Parallelism, Profile
from pytest_xlatune.engine.sweep import Sweep
from pytest_xlatune.plan.expand import expand
from pytest_xlatune.store import ResultStore
from tests.unit.engine.test_poller import ScriptedLauncher


def cell() -> Cell:
    return Cell(
        path=Path("c.yml"),
        model_tag="m",
        slot=ClusterSlot(nodes=1),
        parallelism=Parallelism((("FSDP", 8),)),
        config_tags=(ConfigTag("sparse"), ConfigTag("dense", (("sparse_matmul", "false"),))),
        env_file=(EnvFileEntry("xla", "--xla_o", "0", "2"),),
        profiles=(
            Profile("o2", 2, ("--xla_o=2",)),
            Profile("o1", 2, ("--xla_o=1",)),
            Profile("o1_again", 3, ("--xla_o=2", "--xla_o=1")),  # last wins: o1
            Profile("deployed", 3, ("--xla_o=0",)),
        ),
    )  # the env file's own value


def sweep(tmp_path: Path, fixed: bool = False) -> Sweep:
    return Sweep(
        cell=cell(),
        specs=expand(cell()),
        store=ResultStore(tmp_path / "s.jsonl"),
        launcher=ScriptedLauncher(),
        nodelist="n",
        fixed_protocol=fixed,
    )


def shares(s: Sweep) -> dict[str, str]:
    return {spec.name: source.name for spec in s.specs if (source := s.duplicate_of(spec)) is not None}


def test_an_item_shares_the_first_earlier_run_with_its_effective_settings(tmp_path: Path) -> None:
    assert shares(sweep(tmp_path)) == {
        "wave2::o2[sparse]": "wave1::restore_default[sparse]",  # restore appends the image default 2
        "wave3::o1_again[sparse]": "wave2::o1[sparse]",
        "wave3::deployed[sparse]": "wave1::baseline[sparse]",
    }  # never a baseline repeat or the evidence run, never across config tags


def test_the_fixed_protocol_shares_nothing(tmp_path: Path) -> None:
    assert shares(sweep(tmp_path, fixed=True)) == {}
