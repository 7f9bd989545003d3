"""The gate's same-window controls: old-image runs interleaved with the new, keyed apart, and
launched on the lock's image."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_xlatune.cell.values import Cell, ClusterSlot, ConfigTag, Parallelism
from pytest_xlatune.launch.base import LauncherError, for_image
from pytest_xlatune.launch.local import LocalLauncher
from pytest_xlatune.plan.expand import RunKind, expand_gate, run_key
from pytest_xlatune.plan.request import job_request
from pytest_xlatune.verdict.lock import Lock, LockedRecipe, dumps, load_lock

RECIPES = {"default": ("fast", ("--xla_a=1",), (), (), ())}


def cell() -> Cell:
    return Cell(
        path=Path("c.yml"),
        model_tag="m",
        slot=ClusterSlot(nodes=1),
        parallelism=Parallelism((("FSDP", 8),)),
        config_tags=(ConfigTag("default"),),
    )


def test_each_gate_run_follows_its_control_on_the_old_image() -> None:
    specs = expand_gate(cell(), RECIPES, old_image="/img/old.tar")
    assert [(s.name, s.kind, s.image) for s in specs] == [
        ("gate::baseline-oldimage[default]", RunKind.GATE_OLD_BASELINE, "/img/old.tar"),
        ("gate::baseline[default]", RunKind.BASELINE, None),
        ("gate::baseline-r2-oldimage[default]", RunKind.GATE_OLD_BASELINE, "/img/old.tar"),
        ("gate::baseline-r2[default]", RunKind.BASELINE, None),
        ("gate::fast-oldimage[default]", RunKind.GATE_OLD_RECIPE, "/img/old.tar"),
        ("gate::fast[default]", RunKind.GATE_RECIPE, None),
    ]
    old_recipe = specs[4]
    assert old_recipe.xla_flags == ("--xla_a=1",)  # the same run, on the other image
    assert job_request(cell(), old_recipe).image == "/img/old.tar"
    assert job_request(cell(), specs[5]).image is None  # the session's image
    assert next(s.name for s in expand_gate(cell(), RECIPES)) == "gate::baseline[default]"  # no lock image: none


def test_an_old_image_control_is_measured_again_for_each_new_image() -> None:
    # Keyed by the new image it controls: gating another image never reuses it from the store.
    control = expand_gate(cell(), RECIPES, old_image="")[0]
    keys = {run_key(cell(), control, "n", new) for new in ("/img/a.tar", "/img/b.tar", "")}
    assert len(keys) == 3


def test_a_launcher_runs_a_request_on_the_image_it_was_given_for_it(tmp_path: Path) -> None:
    request = job_request(cell(), expand_gate(cell(), RECIPES, old_image="/venvs/old/bin/python")[0])
    assert (
        for_image("/new/python", {"/venvs/old/bin/python": "/venvs/old/bin/python"}, request) == "/venvs/old/bin/python"
    )
    with pytest.raises(
        LauncherError,
        match=r"m-baseline-oldimage-default: image: expected one of the "
        r"images this session was started for \(none\), found '/venvs/old/bin/python'",
    ):
        LocalLauncher(tmp_path, 1, python="/new/python").submit(request)


def test_a_recipe_that_unsets_a_variable_is_locked_and_gated_with_it_unset(tmp_path: Path) -> None:
    """restore_default as the recipe: the env-file variable it unsets is in its lock (a lock
    written before it was kept reads as none) and the gate's recipe runs, old and new image,
    unset it too."""
    recipe = LockedRecipe("default", "restore_default", ("--xla_a=2",), (), (), 1.0, 0.5, 1.5, 0.9, 10.0, ("3",))
    lock = Lock("m", "FSDP=8", "", "", "2026-12-04", (replace(recipe, unset_env=("JAX_LOG_COMPILES",)),))
    path = tmp_path / "c.lock.json"
    path.write_text(dumps(lock))
    (loaded,) = load_lock(path).recipes
    assert loaded.unset_env == ("JAX_LOG_COMPILES",)
    old = json.loads(path.read_text())
    del old["recipes"][0]["unset_env"]
    path.write_text(json.dumps(old))
    assert load_lock(path).recipes[0].unset_env == ()
    specs = expand_gate(cell(), {"default": ("restore_default", ("--xla_a=2",), (), (), ("JAX_LOG_COMPILES",))}, "")
    assert [s.unset_env for s in specs if s.kind in (RunKind.GATE_RECIPE, RunKind.GATE_OLD_RECIPE)] == [
        ("JAX_LOG_COMPILES",),
        ("JAX_LOG_COMPILES",),
    ]
