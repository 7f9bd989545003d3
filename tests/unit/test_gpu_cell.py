"""The GPU cell: real XLA GPU flags that pass the grammar, and a one-line refusal without a GPU."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_xlatune.cell import grammar
from pytest_xlatune.cell.load import load_cell
from pytest_xlatune.cell.model import ConfigTag, Profile
from pytest_xlatune.launch.devices import check_gpu, needs_gpu, nvidia_gpus
from pytest_xlatune.launch.preflight import PreflightError
from pytest_xlatune.workload import ArgError, parse_args, prepare_env

REPO = Path(__file__).resolve().parents[2]
GPU_CELL = REPO / "cells" / "demo_gpu.yml"


def test_gpu_cell_flags_are_xla_gpu_flags_that_pass_the_grammar() -> None:
    cell = load_cell(GPU_CELL)
    flags = [f for p in cell.profiles for f in p.xla_flags] + [e.deployed for e in cell.env_file]
    assert len(flags) == 7
    for flag in flags:
        assert grammar.XLA_FLAG.check(flag).startswith("--xla_gpu_")
    assert dict(cell.overrides)["hardware"] == "gpu"
    # the workload accepts every override the cell passes (no key falls into "ignored")
    cfg = parse_args([f"{k}={v}" for k, v in (*cell.overrides, *cell.parallelism.overrides())])
    assert (cfg.hardware, cfg.num_devices, cfg.ignored) == ("gpu", 1, ())


def test_gpu_cell_is_refused_in_one_line_without_a_gpu() -> None:
    cell = load_cell(GPU_CELL)
    with pytest.raises(PreflightError) as refused:
        check_gpu(cell, probe=list)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{GPU_CELL}: overrides.hardware: expected an NVIDIA GPU")
    assert "this cell needs a GPU" in message
    check_gpu(cell, probe=lambda: ["/dev/nvidia0"])  # a GPU: nothing to refuse


def test_only_cells_that_ask_for_a_gpu_need_one() -> None:
    cpu = load_cell(REPO / "cells" / "demo_fsdp8.yml")
    assert not needs_gpu(cpu)
    check_gpu(cpu, probe=list)  # never refused, GPU or not
    tagged = dataclasses.replace(cpu, config_tags=(ConfigTag("default"), ConfigTag("gpu", (("hardware", "gpu"),))))
    with pytest.raises(PreflightError, match=r": config_tags\.gpu\.overrides\.hardware: expected an NVIDIA GPU"):
        check_gpu(tagged, probe=list)
    profiled = dataclasses.replace(cpu, profiles=(Profile("on_gpu", 2, overrides=(("hardware", "gpu"),)),))
    with pytest.raises(PreflightError, match=r": waves\.2\.on_gpu\.overrides\.hardware: "):
        check_gpu(profiled, probe=list)


@pytest.mark.skipif(bool(nvidia_gpus()), reason="this machine has an NVIDIA GPU")
def test_gpu_cell_fails_every_item_at_preflight_here(pytester: pytest.Pytester) -> None:
    cell = pytester.path / "demo_gpu.yml"
    cell.write_text(GPU_CELL.read_text())
    result = pytester.runpytest(str(cell), "-p", "no:cacheprovider", "--xlatune-no-report")
    result.assert_outcomes(failed=11)
    result.stdout.fnmatch_lines(["*demo_gpu.yml: overrides.hardware: expected an NVIDIA GPU on this machine*"
                                 "this cell needs a GPU*"])
    assert not list(pytester.path.glob(".xlatune/**/*.log")), "no job may start"


def test_workload_hardware_pins_the_platform() -> None:
    assert parse_args([]).hardware == "cpu"  # the default the CPU tests rely on
    with pytest.raises(ArgError, match="hardware='tpu': expected one of cpu, gpu, auto"):
        parse_args(["hardware=tpu"])
    env = {"XLA_FLAGS": "--xla_gpu_autotune_level=0", "JAX_PLATFORMS": "cpu"}
    prepare_env(1, env, hardware="gpu")
    assert env == {"XLA_FLAGS": "--xla_gpu_autotune_level=0", "JAX_PLATFORMS": "cuda"}
    env = {"JAX_PLATFORMS": "cpu"}
    prepare_env(8, env, hardware="auto")  # unpinned: the GPU if jax finds one, else 8 CPU devices
    assert env == {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
