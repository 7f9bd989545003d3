"""The embedded JAX workload, run for real as ``python -m pytest_xlatune.workload``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_xlatune.workload import ArgError, parse_args, prepare_env

pytestmark = pytest.mark.jax

# MaxText's metric_logger f-string, field for field.
STEP_LINE = re.compile(
    r"completed step: (\d+), seconds: (\d+\.\d{3}), TFLOP/s/device: (\d+\.\d{3}), "
    r"Tokens/s/device: (\d+\.\d{3}), total_weights: (\d+), loss: (\d+\.\d{3})"
)
COLLECTIVE = re.compile(r" (all-gather|reduce-scatter|all-reduce|collective-permute|all-to-all)(?:-start)?\(")


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str

    def step_lines(self) -> list[re.Match[str]]:
        return [m for line in self.stdout.splitlines() if (m := STEP_LINE.fullmatch(line))]


def workload(*args: str, xla_flags: str = "", cwd: Path, timeout: float = 120) -> Run:
    """Run the workload in a subprocess with the given XLA_FLAGS and key=value args."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    if xla_flags:
        env["XLA_FLAGS"] = xla_flags
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_xlatune.workload", *args],
        check=False, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    return Run(proc.returncode, proc.stdout, proc.stderr)


def collectives(dump_dir: Path) -> dict[str, int]:
    """Count collective ops in the optimized HLO of jit_train_step."""
    (hlo,) = dump_dir.glob("module_*.jit_train_step.*after_optimizations.txt")
    counts: dict[str, int] = {}
    for m in COLLECTIVE.finditer(hlo.read_text()):
        counts[m[1]] = counts.get(m[1], 0) + 1
    return counts


def dump_flags(dump_dir: Path) -> str:
    return f"--xla_dump_to={dump_dir} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=jit_train_step"


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path]:
    """One default 15-step FSDP=8 job with an HLO dump and an xplane trace (shared: it is the slow one)."""
    out = tmp_path_factory.mktemp("fsdp8")
    run = workload(
        "ici_fsdp_parallelism=8", "profiler=xplane", "skip_first_n_steps_for_profiler=5", "profiler_steps=2",
        f"base_output_directory={out}", "run_name=fsdp8",
        xla_flags=dump_flags(out / "xla_dump"), cwd=out,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    return run, out


def test_step_lines_match_maxtext_format_once_per_step(fsdp_run: tuple[Run, Path]) -> None:
    run, _ = fsdp_run
    steps = [int(m[1]) for m in run.step_lines()]
    assert steps == list(range(15))
    assert all(int(m[5]) == 2 * 128 * 8 for m in run.step_lines())  # total_weights = global tokens


def test_header_has_config_devices_and_memstats_before_step0(fsdp_run: tuple[Run, Path]) -> None:
    lines = fsdp_run[0].stdout.splitlines()
    first_step = next(i for i, line in enumerate(lines) if line.startswith("completed step: 0,"))
    head = lines[:first_step]
    assert "Config param steps: 15" in head
    assert any(line.startswith("Num_devices: 8") for line in head)
    assert any(line.startswith("Memstats: After params initialized:") for line in head)


def test_loss_decreases_clearly(fsdp_run: tuple[Run, Path]) -> None:
    losses = [float(m[6]) for m in fsdp_run[0].step_lines()]
    assert losses[-1] < 0.5 * losses[0]


def test_fsdp_hlo_dump_has_all_gather(fsdp_run: tuple[Run, Path]) -> None:
    counts = collectives(fsdp_run[1] / "xla_dump")
    assert counts.get("all-gather", 0) + counts.get("reduce-scatter", 0) > 0, counts


def test_profiler_writes_xplane_under_tensorboard(fsdp_run: tuple[Run, Path]) -> None:
    profile = fsdp_run[1] / "fsdp8" / "tensorboard" / "plugins" / "profile"
    assert list(profile.glob("*/*.xplane.pb"))
    assert list(profile.glob("*/perfetto_trace.json.gz"))


def test_pipeline_dump_has_collective_permute_and_unknown_keys_warn(tmp_path: Path) -> None:
    run = workload(
        "steps=3", "dcn_pipeline_parallelism=4", "num_pipeline_microbatches=8", "per_device_batch_size=4",
        "grain_worker_count=4",
        xla_flags=dump_flags(tmp_path / "dump"), cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert [int(m[1]) for m in run.step_lines()] == [0, 1, 2]
    assert "ignoring unknown config keys: grain_worker_count=4" in run.stderr
    assert collectives(tmp_path / "dump").get("collective-permute", 0) > 0


def test_tensor_parallel_dump_has_all_reduce(tmp_path: Path) -> None:
    run = workload("steps=2", "ici_tensor_parallelism=8", xla_flags=dump_flags(tmp_path / "dump"), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert collectives(tmp_path / "dump").get("all-reduce", 0) > 0


def test_unknown_xla_flag_aborts_like_xla(tmp_path: Path) -> None:
    run = workload("steps=2", xla_flags="--xla_gpu_enable_obsolete_thing=true", cwd=tmp_path)
    assert run.returncode != 0
    assert "Unknown flag in XLA_FLAGS: --xla_gpu_enable_obsolete_thing=true" in run.stderr
    assert not run.step_lines()


@pytest.mark.parametrize(
    "argv",
    [["--steps=3"], ["steps"], ["steps=three"], ["dataset_type=tfds"], ["ici_fsdp_parallelism=3"]],
    ids=["dashed", "no-value", "not-int", "dataset", "unshardable"],
)
def test_bad_argument_exits_2_with_one_line(tmp_path: Path, argv: list[str]) -> None:
    run = workload(*argv, cwd=tmp_path, timeout=30)
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1
    assert run.stderr.startswith("ValueError: ")
    assert not run.stdout


@pytest.mark.parametrize(
    ("fault", "returncode", "signature", "last_step"),
    [
        ("oom", 1, "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes.", None),
        ("coord_timeout", 1, "DEADLINE_EXCEEDED: GetKeyValue() timed out with key: jax_distributed/", 1),
        ("sigterm_after_last", -signal.SIGTERM, "", 2),
    ],
)
def test_fault_injection_prints_signature_and_exits(
    tmp_path: Path, fault: str, returncode: int, signature: str, last_step: int | None
) -> None:
    run = workload("steps=3", f"fault={fault}", cwd=tmp_path)
    assert run.returncode == returncode
    assert signature in run.stderr
    steps = [int(m[1]) for m in run.step_lines()]
    assert steps == ([] if last_step is None else list(range(last_step + 1)))
    if fault == "oom":
        assert "Total memory: 64.00GiB" in run.stderr


def test_hang_before_step0_sleeps_after_memstats(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_xlatune.workload", "fault=hang_before_step0"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    watchdog = threading.Timer(60, proc.kill)  # never block the suite if Memstats never comes
    watchdog.start()
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("Memstats: After params initialized:"):
                break
        time.sleep(1.0)
        assert proc.poll() is None, "the process should hang, not exit"
    finally:
        watchdog.cancel()
        proc.terminate()
        proc.wait(timeout=10)
    assert not any(STEP_LINE.search(line) for line in seen)


def test_prepare_env_appends_device_count_and_keeps_user_flags() -> None:
    env = {"XLA_FLAGS": "--xla_backend_optimization_level=1", "JAX_PLATFORMS": "cuda"}
    prepare_env(8, env)
    assert env == {
        "XLA_FLAGS": "--xla_backend_optimization_level=1 --xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
    }
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=16"}
    prepare_env(8, env)
    assert env["XLA_FLAGS"] == "--xla_force_host_platform_device_count=16"


def test_parse_args_derives_pipeline_shape() -> None:
    cfg = parse_args(
        ["dcn_pipeline_parallelism=4", "num_decoder_layers=8", "num_layers_per_pipeline_stage=1",
         "num_pipeline_microbatches=8", "per_device_batch_size=4", "foo=bar"]
    )  # fmt: skip
    assert (cfg.num_devices, cfg.microbatches, cfg.repeats) == (4, 8, 2)
    assert cfg.bubble_fraction == pytest.approx(3 / (8 * 2 + 3))
    assert cfg.ignored == ("foo=bar",)
    with pytest.raises(ArgError, match="needs num_pipeline_microbatches >= 4"):
        parse_args(["dcn_pipeline_parallelism=4", "num_decoder_layers=8", "num_layers_per_pipeline_stage=1",
                    "num_pipeline_microbatches=2", "per_device_batch_size=4"])  # fmt: skip
