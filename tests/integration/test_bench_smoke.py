"""The benchmark's CI smoke run: `bench/run.py --quick` ends cleanly with every section measured.

No timing thresholds: the machine is shared, so targets are reported by the benchmark, not
asserted here. This pins only that every section ran and produced numbers.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.fixtures_infra import REPO, LocalSlurm, unavailable

pytestmark = [pytest.mark.slurm, pytest.mark.sshd]

SECTIONS = ("queue_gap", "scheduler_load", "time_to_verdict", "log_ingest", "demo")


def test_quick_benchmark_measures_every_section(local_slurm: LocalSlurm, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        unavailable("bench/run.py starts a loopback sshd (scripts/local-sshd.sh): needs root")
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "run.py"), "--quick", "--json", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    data = json.loads(out.read_text())
    assert data["meta"]["mode"] == "quick"
    for name in SECTIONS:
        section = data[name]
        assert section["error"] == "", (name, section["error"])
        assert section["figures"], f"{name}: no figures"
        not_numbers = {key: value for key, value in section["figures"].items()
                       if isinstance(value, bool) or not isinstance(value, (int, float))
                       or math.isnan(value)}
        assert not not_numbers, (name, not_numbers)
        assert set(section["targets"]) <= set(section["figures"]), name
