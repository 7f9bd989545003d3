"""adaptive.keys: effective-settings keys resolved as XLA and the scripts do, from the package's own
request builder; plan items from a cell's runs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_xlatune.adaptive import Plan, Role
from pytest_xlatune.adaptive.keys import effective_key, last_wins, plan_items
from pytest_xlatune.cell.load import load_cell
from pytest_xlatune.cell.values import Backend, BackendKind, Cell
from pytest_xlatune.plan.expand import RunKind, RunSpec, expand

DEMO = Path(__file__).resolve().parents[3] / "cells" / "demo_fsdp8.yml"


@pytest.fixture(scope="module")
def demo() -> Cell:
    return load_cell(DEMO)


def keys(cell: Cell) -> dict[str, object]:
    return {spec.profile: effective_key(cell, spec) for spec in expand(cell)}


def test_last_wins_keeps_the_last_value_of_each_name() -> None:
    assert last_wins(["--xla_a=0", "--xla_b=1", "--xla_a=2"]) == {"--xla_a": "2", "--xla_b": "1"}


@pytest.mark.parametrize("kind", [BackendKind.LOCAL, BackendKind.MAXTEXT_SLURM, BackendKind.SBATCH])
def test_the_image_default_appended_after_the_env_files_value_is_restore_default(demo: Cell, kind: BackendKind) -> None:
    # The demo's env file deploys -O0; opt_o2 appends =2 and restore_default appends the image
    # default (2): XLA is last-wins, so both run -O2 (the pair the issue saw measured 38 % apart).
    cell = replace(demo, backend=Backend(kind))
    k = keys(cell)
    assert k["opt_o2"] == k["restore_default"]
    assert k["opt_o1"] != k["opt_o2"]
    assert k["o1_bf16"] != k["opt_o1"]  # same flags, but MaxText computes in bfloat16
    assert k["baseline"] == k["baseline-r2"]
    assert k["evidence"] != k["baseline"]  # the profiler's arguments and steps


def test_maxtext_slurm_keys_carry_the_env_files_flags_it_inherits(demo: Cell) -> None:
    cell = replace(demo, backend=Backend(BackendKind.MAXTEXT_SLURM))
    baseline = effective_key(cell, next(s for s in expand(cell) if s.profile == "baseline"))
    assert ("--xla_backend_optimization_level", "0") in baseline.xla_flags


def test_env_vars_resolve_env_file_then_profile_then_env_args(demo: Cell) -> None:
    spec = RunSpec("wave2", "a", "default", RunKind.PROFILE, env=(("NCCL_X", "1"),))
    same = RunSpec("wave2", "b", "default", RunKind.PROFILE, profile_overrides=(("_env_NCCL_X", "1"),))
    later = RunSpec(
        "wave2", "c", "default", RunKind.PROFILE, env=(("NCCL_X", "1"),), profile_overrides=(("_env_NCCL_X", "2"),)
    )
    assert effective_key(demo, spec) == effective_key(demo, same)
    assert dict(effective_key(demo, later).env)["NCCL_X"] == "2"  # _env_ args are exported last
    assert not any(k.startswith("_env_") for k, _ in effective_key(demo, same).args)


def test_an_unset_env_var_is_gone_from_the_key(demo: Cell) -> None:
    from pytest_xlatune.cell.values import EnvFileEntry

    cell = replace(demo, env_file=(*demo.env_file, EnvFileEntry("env", "NCCL_Y", "8", None)))
    plain = effective_key(cell, RunSpec("wave2", "a", "default", RunKind.PROFILE))
    unset = effective_key(cell, RunSpec("wave2", "b", "default", RunKind.PROFILE, unset_env=("NCCL_Y",)))
    assert ("NCCL_Y", "8") in plain.env and "NCCL_Y" not in dict(unset.env)


def test_plan_items_map_kinds_to_roles_and_find_the_duplicate(demo: Cell) -> None:
    items = plan_items(demo, expand(demo))
    roles = {i.name.split("::")[1].split("[")[0]: i.role for i in items}
    assert roles["baseline"] is Role.BASELINE and roles["evidence"] is Role.EVIDENCE
    assert roles["restore_default"] is Role.PROFILE and roles["winner"] is Role.WINNER_EVIDENCE
    the_plan = Plan(items)
    opt_o2 = next(i for i in items if "opt_o2" in i.name)
    source = the_plan.source_of(opt_o2)
    assert source is not None and "restore_default" in source.name
    o2_no_fastmath = next(i for i in items if "o2_no_fastmath" in i.name)
    assert o2_no_fastmath.settings_count == 2 and "--xla_cpu_enable_fast_math" in o2_no_fastmath.settings


def test_plan_items_refuse_runs_not_planned_adaptively_yet(demo: Cell) -> None:
    stack = RunSpec("wave4", "stack_top2", "default", RunKind.STACK, top=2)
    with pytest.raises(ValueError, match=r"wave4::stack_top2\[default\]: stack runs are not planned adaptively"):
        plan_items(demo, [stack])
