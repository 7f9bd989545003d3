"""The embedded JAX workload: a toy decoder LM on virtual CPU devices (or GPUs) that logs like MaxText.

Run it as ``python -m pytest_xlatune.workload key=value ...``. Importing this package does
not import jax: the device count must reach XLA_FLAGS before jax initializes its backend.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping, Sequence

from .args import ArgError, Config, parse_args

__all__ = ["ArgError", "Config", "main", "parse_args", "prepare_env"]

_DEVICE_FLAG = "--xla_force_host_platform_device_count"


def prepare_env(num_devices: int, env: MutableMapping[str, str] | None = None, hardware: str = "cpu") -> None:
    """Ask XLA for ``num_devices`` host devices and pin jax to the platform ``hardware`` names.

    cpu: virtual host devices, jax pinned to the CPU. gpu: jax pinned to CUDA (no host device
    count: the GPUs are the devices). auto: the host count is asked for and jax left unpinned,
    so it takes the GPUs when it finds some, else the CPU. XLA_FLAGS is last-wins, so the
    device count is appended to whatever the caller set (never rebuilt); a count the caller
    already chose is left alone.
    """
    env = os.environ if env is None else env
    flags = env.get("XLA_FLAGS", "")
    if hardware != "gpu" and _DEVICE_FLAG not in flags:
        flags = f"{flags} {_DEVICE_FLAG}={num_devices}".strip()
        env["XLA_FLAGS"] = flags
    if hardware == "auto":
        env.pop("JAX_PLATFORMS", None)
    else:
        env["JAX_PLATFORMS"] = "cuda" if hardware == "gpu" else "cpu"


def main(argv: Sequence[str]) -> int:
    """Parse arguments, set up the environment, then import jax and train."""
    try:
        cfg = parse_args(argv)
    except ArgError as exc:
        # As MaxText's config checks fail: a ValueError line, which triage reads as the cause (a
        # python_exception, never retried), not an unexplained exit code.
        print(f"ValueError: {exc}", file=sys.stderr)
        return 2
    if cfg.ignored:
        print(f"WARNING: ignoring unknown config keys: {' '.join(cfg.ignored)}", file=sys.stderr, flush=True)
    prepare_env(cfg.num_devices, hardware=cfg.jax_platform)
    from .train import run  # jax is imported only now, after XLA_FLAGS is final

    return run(cfg)
