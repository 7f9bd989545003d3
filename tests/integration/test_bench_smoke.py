"""The benchmark's CI smoke runs: `bench/run.py --quick` ends cleanly with every section measured,
`bench/replay.py` (the adaptive planner's simulator) writes its figures for a few sweeps, and
`bench/compile_cache.py` measures a cached and an uncached compile of both its settings.

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
from typing import Any

import pytest

from tests.integration.fixtures_infra import REPO, LocalSlurm, unavailable

SECTIONS = ("queue_gap", "scheduler_load", "time_to_verdict", "log_ingest", "demo")


@pytest.mark.slurm
@pytest.mark.sshd
def test_quick_benchmark_measures_every_section(local_slurm: LocalSlurm, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        unavailable("bench/run.py starts a loopback sshd (scripts/local-sshd.sh): needs root")
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--quick", "--json", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    data = json.loads(out.read_text())
    assert data["meta"]["mode"] == "quick"
    for name in SECTIONS:
        section = data[name]
        assert section["error"] == "", (name, section["error"])
        assert section["figures"], f"{name}: no figures"
        not_numbers = {
            key: value
            for key, value in section["figures"].items()
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value)
        }
        assert not not_numbers, (name, not_numbers)
        assert set(section["targets"]) <= set(section["figures"]), name


def bench_json(tmp_path: Path, script: str, *args: str) -> tuple[Any, str]:
    """Run a bench script with `--json`: what it wrote and what it printed (it must end with 0)."""
    out = tmp_path / f"{script}.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args, "--json", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    return json.loads(out.read_text()), proc.stdout


def test_replay_simulator_writes_every_figure_for_both_policies(tmp_path: Path) -> None:
    data, stdout = bench_json(tmp_path, "replay.py", "--sweeps", "6", "--seed", "3")
    assert data["meta"]["sweeps"] == 6 and data["meta"]["seed"] == 3
    assert 0.0 < data["node_hours_ratio"] < 2.0
    for metric in ("best_found", "false_better", "power_3pct", "power_3pct_all"):
        assert set(data[metric]) == {"adaptive", "fixed"}, metric
        assert all(0.0 <= value <= 1.0 for value in data[metric].values()), (metric, data[metric])
    for policy in ("adaptive", "fixed"):
        per = data["per_sweep"][policy]
        assert per["node_hours"] > 0 and per["jobs"] >= 4, (policy, per)  # baselines, evidence, a candidate
    fixed = data["per_sweep"]["fixed"]
    assert fixed.get("controls", 0) == fixed.get("repeats", 0) == fixed.get("shares", 0) == 0
    assert "node-hours ratio adaptive/fixed" in stdout and "6 sweeps, seed 3" in stdout
    # Issue 23's stressors, one sweep each at this size: false wins next to today's table.
    assert set(data["stressors"]) == {
        "noise 15 %, null profiles",
        "steady baseline, unstable null profiles",
        "bursty co-tenant (-20 % 1 h in 3)",
    }
    assert all(set(v["false_win"]) == {"adaptive", "fixed"} for v in data["stressors"].values())
    assert "1 sweeps per stressor, seed 3" in stdout


@pytest.mark.jax
def test_compile_cache_bench_measures_both_settings_and_sees_the_hits(tmp_path: Path) -> None:
    data, stdout = bench_json(tmp_path, "compile_cache.py", "--pairs", "1", "--steps", "2")
    assert "ratio = cached compile phase / uncached" in stdout
    assert set(data["profiles"]) == {"baseline", "restore_default"}
    for row in data["profiles"].values():
        (pair,) = row["pairs"]
        assert pair["cached"]["hit"] and not pair["uncached"]["hit"]  # JAX's own log line
        assert pair["cached"]["cache"] == pair["uncached"]["cache"] != ""
        # The compile phase is the workload's own figure (its compiled-train_step line): a load
        # from the cache is shorter than the compile that filled it, and both are positive.
        assert 0 < row["cached_s"] < row["uncached_s"] and 0 < row["ratio"] < 1
