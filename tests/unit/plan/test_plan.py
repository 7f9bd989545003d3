"""plan.expand: which runs a cell becomes, in which order, with which flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_xlatune.cell.values import Cell, ClusterSlot, ConfigTag, EnvFileEntry, Parallelism, PipelineShape, Profile
from pytest_xlatune.plan.expand import RunKind, expand, predicted_bubble, run_key


def make_cell(**changes: object) -> Cell:
    base = {
        "path": Path("cells/x.yml"),
        "model_tag": "m",
        "slot": ClusterSlot(nodes=1),
        "parallelism": Parallelism((("FSDP", 8),)),
        "config_tags": (
            ConfigTag("sparse", (("sparse_matmul", "true"),)),
            ConfigTag("dense", (("sparse_matmul", "false"),)),
        ),
        "env_file": (
            EnvFileEntry("xla", "--xla_a", "1", "8"),
            EnvFileEntry("env", "NCCL_X", "4", None),
            EnvFileEntry("env", "NCCL_Y", "2", "1"),
        ),
        "profiles": (
            Profile("w3", 3, ("--xla_c=1",)),
            Profile("w2", 2, ("--xla_b=2",), (("NCCL_Z", "8"),), (("remat_policy", "full"),)),
        ),
    }
    base.update(changes)
    return Cell(**base)  # type: ignore[arg-type]


def test_runs_come_in_wave_order_with_stable_names() -> None:
    names = [spec.name for spec in expand(make_cell())]
    assert names == [
        "wave1::baseline[sparse]",
        "wave1::baseline-r2[sparse]",
        "wave1::restore_default[sparse]",
        "wave1::baseline[dense]",
        "wave1::baseline-r2[dense]",
        "wave1::restore_default[dense]",
        "wave1.5::evidence[sparse]",
        "wave2::w2[sparse]",
        "wave3::w3[sparse]",
        "evidence2::winner[sparse]",
        "wave6::best[dense]",
    ]


def test_restore_default_appends_image_defaults_and_unsets_env_without_default() -> None:
    spec = next(s for s in expand(make_cell()) if s.kind is RunKind.RESTORE_DEFAULT)
    assert spec.xla_flags == ("--xla_a=8",)
    assert spec.env == (("NCCL_Y", "1"),)
    assert spec.unset_env == ("NCCL_X",)


def test_profile_overrides_follow_config_tag_overrides() -> None:
    spec = next(s for s in expand(make_cell()) if s.profile == "w2")
    assert spec.overrides == (("sparse_matmul", "true"), ("remat_policy", "full"))
    assert spec.env == (("NCCL_Z", "8"),)


def test_cross_config_run_takes_the_source_profile_flags_but_keeps_its_tag() -> None:
    specs = expand(make_cell())
    cross = specs[-1]
    assert cross.needs_resolution
    resolved = cross.resolve(next(s for s in specs if s.profile == "w2"))
    assert not resolved.needs_resolution
    assert resolved.xla_flags == ("--xla_b=2",)
    assert resolved.overrides == (("sparse_matmul", "false"), ("remat_policy", "full"))
    assert resolved.resolved_from == "w2"


def test_no_restore_default_without_env_file_and_one_baseline_when_asked() -> None:
    cell = make_cell(env_file=(), baseline_repeats=1, config_tags=(ConfigTag("default"),))
    names = [s.name for s in expand(cell)]
    assert names[:2] == ["wave1::baseline[default]", "wave1.5::evidence[default]"]
    assert not any("wave6" in n for n in names)


def test_pipeline_shapes_only_for_pp() -> None:
    shapes = (PipelineShape(4), PipelineShape(8), PipelineShape(8, 2))
    pp = make_cell(
        parallelism=Parallelism((("PP", 4),)), pipeline_shapes=shapes, overrides=(("num_decoder_layers", "16"),)
    )
    wave5 = [s for s in expand(pp) if s.wave == "wave5"]
    assert [s.profile for s in wave5] == ["mb4_v1", "mb8_v1", "mb8_v2"]
    assert ("num_layers_per_pipeline_stage", "2") in wave5[2].overrides
    fsdp = make_cell(pipeline_shapes=shapes)
    assert not [s for s in expand(fsdp) if s.wave == "wave5"]


def test_run_key_changes_with_flags_and_nodelist_but_not_between_calls() -> None:
    cell = make_cell()
    a, b = (s for s in expand(cell) if s.kind is RunKind.PROFILE)
    assert run_key(cell, a, "n[1-2]") == run_key(cell, a, "n[1-2]")
    assert run_key(cell, a, "n[1-2]") != run_key(cell, b, "n[1-2]")
    assert run_key(cell, a, "n[1-2]") != run_key(cell, a, "n[3-4]")


@pytest.mark.parametrize(
    ("stages", "microbatches", "v", "expected"), [(4, 4, 1, 3 / 7), (4, 16, 1, 3 / 19), (8, 8, 7, 7 / 63)]
)
def test_predicted_bubble(stages: int, microbatches: int, v: int, expected: float) -> None:
    assert predicted_bubble(stages, microbatches, v) == pytest.approx(expected)


def test_tokens_per_device_step_comes_from_the_jobs_own_args() -> None:
    from pytest_xlatune.cell.values import Backend, BackendKind
    from pytest_xlatune.plan.request import tokens_per_device_step

    spec = expand(make_cell())[0]
    # local: the embedded workload's defaults fill what the cell leaves out (pdbs 2 x 128)
    assert tokens_per_device_step(make_cell(), spec) == 256
    assert tokens_per_device_step(make_cell(pdbs=4, overrides=(("max_target_length", "512"),)), spec) == 2048
    slurm = Backend(BackendKind.MAXTEXT_SLURM)
    assert tokens_per_device_step(make_cell(backend=slurm, pdbs=24), spec) is None  # length from gpu.yml
    assert (
        tokens_per_device_step(
            make_cell(
                backend=slurm, pdbs=24, overrides=(("max_target_length", "2048"), ("gradient_accumulation_steps", "2"))
            ),
            spec,
        )
        == 24 * 2048 * 2
    )
