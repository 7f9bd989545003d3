"""The compiled-program fingerprint on real XLA:CPU dumps of the embedded workload."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_xlatune.evidence.fingerprint import fingerprint, read_dump

pytestmark = pytest.mark.jax


def _compile(tmp: Path, name: str, flags: str) -> dict[str, str]:
    dump = tmp / name
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env["XLA_FLAGS"] = (
        f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.* {flags}"
    ).strip()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_xlatune.workload",
            "steps=2",
            "emb_dim=32",
            "mlp_dim=64",
            "num_decoder_layers=1",
            "max_target_length=32",
            "ici_fsdp_parallelism=8",
        ],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return read_dump(str(dump))


def test_real_xla_cpu_flag_at_its_default_compiles_to_the_same_program(tmp_path: Path) -> None:
    """vec256 (XLA:CPU's default width) is inert; -O1 changes only the generated code, not the HLO."""
    base = fingerprint(_compile(tmp_path, "base", ""))
    at_default = fingerprint(_compile(tmp_path, "vec256", "--xla_cpu_prefer_vector_width=256"))
    o1 = fingerprint(_compile(tmp_path, "o1", "--xla_backend_optimization_level=1"))
    assert base.complete and base.code_files > 10
    assert at_default.same_program(base)
    assert o1.hlo_digest == base.hlo_digest  # the HLO alone would have called -O1 inert
    assert not o1.same_program(base)
