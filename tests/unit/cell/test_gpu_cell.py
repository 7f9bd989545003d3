"""The GPU cell: real XLA GPU flags that pass the grammar, and a one-line refusal without a GPU."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_xlatune.cell import grammar
from pytest_xlatune.cell.load import load_cell
from pytest_xlatune.cell.values import ConfigTag, Profile
from pytest_xlatune.launch.devices import check_gpu, needs_gpu, nvidia_gpus
from pytest_xlatune.launch.preflight import PreflightError
from pytest_xlatune.report.build import build
from pytest_xlatune.report.export import export_texts
from pytest_xlatune.report.markdown import render_tuning_md
from pytest_xlatune.workload import ArgError, parse_args, prepare_env
from tests import report_cases as cases

REPO = Path(__file__).resolve().parents[3]
GPU_CELL = REPO / "cells" / "demo_gpu.yml"


def test_gpu_cell_flags_are_xla_gpu_flags_that_pass_the_grammar() -> None:
    cell = load_cell(GPU_CELL)
    flags = [f for p in cell.profiles for f in p.xla_flags] + [e.deployed for e in cell.env_file]
    assert len(flags) == 7
    for flag in flags:
        assert grammar.XLA_FLAG.check(flag).startswith("--xla_gpu_")
    assert dict(cell.overrides)["jax_platform"] == "gpu"
    # the workload accepts every override the cell passes (no key falls into "ignored")
    cfg = parse_args([f"{k}={v}" for k, v in (*cell.overrides, *cell.parallelism.overrides())])
    assert (cfg.jax_platform, cfg.num_devices, cfg.ignored) == ("gpu", 1, ())


def test_gpu_cell_is_refused_in_one_line_without_a_gpu() -> None:
    cell = load_cell(GPU_CELL)
    with pytest.raises(PreflightError) as refused:
        check_gpu(cell, probe=list)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{GPU_CELL}: overrides.jax_platform: expected an NVIDIA GPU")
    assert "this cell needs a GPU" in message
    check_gpu(cell, probe=lambda: ["/dev/nvidia0"])  # a GPU: nothing to refuse


def test_only_cells_that_ask_for_a_gpu_need_one() -> None:
    cpu = load_cell(REPO / "cells" / "demo_fsdp8.yml")
    assert not needs_gpu(cpu)
    check_gpu(cpu, probe=list)  # never refused, GPU or not
    tagged = dataclasses.replace(cpu, config_tags=(ConfigTag("default"), ConfigTag("gpu", (("jax_platform", "gpu"),))))
    with pytest.raises(PreflightError, match=r": config_tags\.gpu\.overrides\.jax_platform: expected an NVIDIA GPU"):
        check_gpu(tagged, probe=list)
    profiled = dataclasses.replace(cpu, profiles=(Profile("on_gpu", 2, overrides=(("jax_platform", "gpu"),)),))
    with pytest.raises(PreflightError, match=r": waves\.2\.on_gpu\.overrides\.jax_platform: "):
        check_gpu(profiled, probe=list)


@pytest.mark.skipif(bool(nvidia_gpus()), reason="this machine has an NVIDIA GPU")
def test_gpu_cell_skips_every_item_at_preflight_here(pytester: pytest.Pytester) -> None:
    """Skipped, not failed: `pytest cells/` on a machine without a GPU runs the CPU cells."""
    cell = pytester.path / "demo_gpu.yml"
    cell.write_text(GPU_CELL.read_text())
    result = pytester.runpytest(str(cell), "-p", "no:cacheprovider", "--xlatune-no-report", "-rs")
    result.assert_outcomes(skipped=11)
    result.stdout.fnmatch_lines(
        ["*demo_gpu.yml: overrides.jax_platform: expected an NVIDIA GPU on this machine*this cell needs a GPU*"]
    )
    assert not list(pytester.path.glob(".xlatune/**/*.log")), "no job may start"


def test_workload_hardware_pins_the_platform() -> None:
    assert parse_args([]).jax_platform == "cpu"  # the default the CPU tests rely on
    # MaxText's own `hardware: gpu` (every upstream gpu.yml, so every CPU stand-in job) is not it
    assert parse_args(["hardware=gpu"]).jax_platform == "cpu"
    with pytest.raises(ArgError, match="jax_platform='tpu': expected one of cpu, gpu, auto"):
        parse_args(["jax_platform=tpu"])
    env = {"XLA_FLAGS": "--xla_gpu_autotune_level=0", "JAX_PLATFORMS": "cpu"}
    prepare_env(1, env, hardware="gpu")
    assert env == {"XLA_FLAGS": "--xla_gpu_autotune_level=0", "JAX_PLATFORMS": "cuda"}
    env = {"JAX_PLATFORMS": "cpu"}
    prepare_env(8, env, hardware="auto")  # unpinned: the GPU if jax finds one, else 8 CPU devices
    assert env == {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}


@pytest.mark.skipif(bool(nvidia_gpus()), reason="this machine has an NVIDIA GPU")
def test_gpu_script_stops_in_one_line_without_a_gpu(tmp_path: Path) -> None:
    run = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu-cell.sh"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (run.returncode, run.stderr) == (3, "")
    assert run.stdout.splitlines() == [
        "gpu-cell: no NVIDIA GPU on this machine (no /dev/nvidia[0-9]*, nvidia-smi finds none): nothing run"
    ]
    assert not (tmp_path / "out").exists()


def test_gpu_summary_reads_export_report_dump_and_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The summary the GPU script keeps: runs with job times, the report's recipe, the evidence read."""
    spec = importlib.util.spec_from_file_location("gpu_cell_summary", REPO / "scripts" / "gpu_cell_summary.py")
    assert spec and spec.loader
    summary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summary)
    jobs = cases.Jobs(1)
    jobs.wave1(config_tag="default")
    jobs.profile("no_triton_gemm", 1080.0, "--xla_gpu_enable_triton_gemm=false", config_tag="default")
    data = build(cases.cpu_cell("demo_gpu", (("FSDP", 1),)), jobs.results, "localhost", "local", today=cases.DATE)
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "demo-gpu.json").write_text(export_texts(jobs.results)[".json"])
    (tmp_path / "demo-gpu-tuning.md").write_text(render_tuning_md(data))
    (tmp_path / "gpu.txt").write_text("NVIDIA H200, 580.159.03, 143771 MiB\n")
    (tmp_path / "pytest.log").write_text("...\n==== 1 failed, 10 passed in 312.00s ====\n")
    job = tmp_path / "store" / "demo-gpu" / "jobs" / "4-evidence"
    (job / "xla_dump").mkdir(parents=True)
    (job / "xla_dump" / "module_0007.jit_train_step.sm_9.0_gpu_after_optimizations.txt").write_text(
        (REPO / "tests" / "data" / "hlo" / "gpu" / "cublas_gemm.after_optimizations.txt").read_text()
    )
    (job / "tensorboard").mkdir()
    shutil.copy(REPO / "tests" / "data" / "profile" / "fsdp.trace.json.gz", job / "tensorboard" / "vm.trace.json.gz")
    assert summary.main(tmp_path) == 0
    text = capsys.readouterr().out
    assert "Machine: NVIDIA H200, 580.159.03, 143771 MiB" in text
    assert "pytest: ==== 1 failed, 10 passed in 312.00s ====" in text
    first = jobs.results[0]
    assert f"| {first.job_id} | `{first.item}` | success | {first.tgs:,.1f} |  | " in text
    assert "| 540 |" in text  # finished - submitted of the hand-made results
    assert "## Recipe (from the report)" in text and "(not in the report)" not in text
    assert (
        "- HLO `module_0007.jit_train_step.sm_9.0_gpu_after_optimizations.txt`: 1 fusions (kLoop 1); "
        "library kernels: cuBLAS 1; by target: __cublas$gemm 1" in text
    )
    assert re.search(r"- profile `vm.trace.json.gz`: \d+ steps of `jit_train_step` on 8 device\(s\)", text)
