"""Pre-flight for local cells that run the embedded workload on a GPU: is there one here?

XLA:CPU parses every ``--xla_gpu_*`` flag and ignores it, so a GPU cell run on a machine
without a GPU would measure noise and crown a recipe of no-ops: pre-flight refuses it instead.
"""

from __future__ import annotations

import glob
from collections.abc import Callable, Iterator

from ..cell.values import Cell
from .preflight import PreflightError

HARDWARE_KEY = "jax_platform"  # the embedded workload's key (workload/args.py); not MaxText's `hardware`,
# which upstream's gpu.yml configs set to gpu on every machine, the CPU stand-ins included
_GPU_NODES = ("/dev/nvidia[0-9]*", "/proc/driver/nvidia/gpus/*")


def nvidia_gpus() -> list[str]:
    """The NVIDIA GPUs the driver shows on this machine (device nodes, else /proc entries)."""
    for pattern in _GPU_NODES:
        found = sorted(glob.glob(pattern))
        if found:
            return found
    return []


def _gpu_keys(cell: Cell) -> Iterator[str]:
    """Where the cell asks for ``jax_platform=gpu``: the cell's, a config tag's or a profile's overrides."""

    def wants(pairs: tuple[tuple[str, str], ...]) -> bool:
        return any(k == HARDWARE_KEY and v == "gpu" for k, v in pairs)

    if wants(cell.overrides):
        yield f"overrides.{HARDWARE_KEY}"
    for tag in cell.config_tags:
        if wants(tag.overrides):
            yield f"config_tags.{tag.name}.overrides.{HARDWARE_KEY}"
    for profile in cell.profiles:
        if wants(profile.overrides):
            yield f"waves.{profile.wave}.{profile.name}.overrides.{HARDWARE_KEY}"


def needs_gpu(cell: Cell) -> bool:
    """Whether some run of the cell asks the workload for ``jax_platform=gpu``."""
    return next(_gpu_keys(cell), None) is not None


class NoGpuHere(PreflightError):
    """A GPU cell on a machine without a GPU: its items are skipped (not failed), so that
    `pytest cells/` on a laptop runs the CPU cells and says why the GPU cell did not run."""


def check_gpu(cell: Cell, probe: Callable[[], list[str]] = nvidia_gpus) -> None:
    """Refuse (one line naming the cell and key) a GPU cell on a machine that has no GPU."""
    key = next(_gpu_keys(cell), None)
    if key is None or probe():
        return
    raise NoGpuHere(
        f"{cell.path}: {key}: expected an NVIDIA GPU on this machine for jax_platform=gpu, found none "
        f"(no {' or '.join(_GPU_NODES)}): this cell needs a GPU; run it where one is "
        "(scripts/gpu-cell.sh)"
    )
