"""run_key covers the cell: any Cell field that changes what a job is submitted with changes run_key.

A new Cell field fails the first test until it is given an altered value below; the second then
fails if the field changes a JobRequest but plan.expand.run_key leaves it out (stale results reused).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_xlatune.cell.values import (
    Backend,
    BackendKind,
    CatalogWave,
    Cell,
    ClusterSlot,
    ConfigTag,
    EnvFileEntry,
    Parallelism,
    PipelineShape,
    Profile,
    Stack,
    Thresholds,
)
from pytest_xlatune.plan.expand import RunSpec, expand, run_key
from pytest_xlatune.plan.request import job_request

BASE = Cell(
    path=Path("cells/x.yml"),
    model_tag="m",
    slot=ClusterSlot(nodes=1),
    parallelism=Parallelism((("PP", 2), ("FSDP", 4))),
    config_tags=(ConfigTag("sparse", (("sparse_matmul", "true"),)), ConfigTag("dense", (("sparse_matmul", "false"),))),
    env_file=(EnvFileEntry("xla", "--xla_a", "1", "8"), EnvFileEntry("env", "NCCL_X", "4", None)),
    profiles=(Profile("w2", 2, ("--xla_b=2",), (("NCCL_Z", "8"),)),),
    pipeline_shapes=(PipelineShape(4, 1),),
    backend=Backend(BackendKind.SBATCH),
)

# One different value per Cell field.
ALTERED: dict[str, object] = {
    "path": Path("cells/y.yml"),
    "model_tag": "n",
    "slot": ClusterSlot(nodes=2),
    "parallelism": Parallelism((("PP", 2), ("FSDP", 2))),
    "pdbs": 3,
    "steps": 30,
    "baseline_repeats": 3,
    "config_tags": (ConfigTag("sparse", (("sparse_matmul", "maybe"),)), ConfigTag("dense")),
    "overrides": (("remat_policy", "full"),),
    "env_file": (EnvFileEntry("xla", "--xla_a", "2", "8"), EnvFileEntry("env", "NCCL_X", "5", None)),
    "profiles": (Profile("w2", 2, ("--xla_b=3",), (("NCCL_Z", "9"),)),),
    "catalog_waves": (CatalogWave(3, "fsdp"),),
    "stacks": (Stack(4, 3),),
    "pipeline_shapes": (PipelineShape(8, 2),),
    "thresholds": Thresholds(win_pct=9.0),
    "backend": Backend(BackendKind.LOCAL),
    "image": "registry/other:2",
    "hardware": "h200",
    "policy": '{"oom": "stop"}',
}


def test_every_cell_field_has_an_altered_value() -> None:
    assert sorted(ALTERED) == sorted(f.name for f in dataclasses.fields(Cell))


def _check(name: str, key: Callable[[Cell, RunSpec, str], str]) -> None:
    altered = dataclasses.replace(BASE, **{name: ALTERED[name]})
    before = {spec.name: spec for spec in expand(BASE)}
    for spec in expand(altered):
        if spec.name not in before:
            continue  # a new run has its own name, hence its own key
        old = before[spec.name]
        if job_request(BASE, old) != job_request(altered, spec):
            assert key(BASE, old, "n1") != key(altered, spec, "n1"), (
                f"Cell.{name} changes the job of {spec.name} but not its run_key"
            )


@pytest.mark.parametrize("name", sorted(ALTERED))
def test_a_field_that_changes_a_job_request_changes_run_key(name: str) -> None:
    _check(name, run_key)


def test_the_check_fails_for_a_run_key_that_leaves_a_job_field_out() -> None:
    def forgetful(cell: Cell, spec: RunSpec, nodelist: str) -> str:
        return run_key(dataclasses.replace(cell, steps=BASE.steps), spec, nodelist)

    with pytest.raises(AssertionError, match=re.escape("Cell.steps changes the job")):
        _check("steps", forgetful)
