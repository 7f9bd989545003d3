"""The gate's repair end to end on the embedded default (real JAX, local backend): a sweep writes
a lock, a slower "new image" venv fails the gate, the repair proposes another recipe, and the
proposed lock passes the gate on that venv.

The new venv is a wrapper around this interpreter whose XLA "lost" the locked recipe's gain: any
run that asks for the locked optimization level (-O2, or -O1 when the loaded machine made that the
sweep's recipe) gets -O0 appended (last wins), as in test_gate_real.py; the other level is
untouched, so the previous sweep's runner-up is the repair."""

from __future__ import annotations

import json
import shutil
import stat
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.jax]

CELL = """\
model_tag: repair
nodes: 1
parallelism: FSDP=8
pdbs: 2
steps: 10
baseline_repeats: 1
overrides: {emb_dim: 128, mlp_dim: 512, num_decoder_layers: 4, max_target_length: 128}
env_file:
  - flag: --xla_backend_optimization_level=0
    image_default: "2"
waves:
  2:
    - {name: opt_o2, xla_flags: [--xla_backend_optimization_level=2]}
    - {name: opt_o1, xla_flags: [--xla_backend_optimization_level=1]}
thresholds: {regression_pct: 10}
"""
SLOWER = """#!/bin/bash
case "$XLA_FLAGS" in *level={level}*) export XLA_FLAGS="$XLA_FLAGS --xla_backend_optimization_level=0";; esac
exec {python} "$@"
"""
COMMON = ["-p", "no:cacheprovider", "--xlatune-poll-interval=0.2", "-rfs"]


def test_sweep_lock_gate_fails_repair_proposes_and_the_proposal_passes(pytester: pytest.Pytester) -> None:
    cell = pytester.makefile(".yml", repair=CELL)
    sweep = pytester.runpytest(str(cell), *COMMON)
    lock = cell.with_suffix(".lock.json")
    assert lock.exists(), sweep.stdout.str()
    locked = json.loads(lock.read_text())["recipes"][0]["profile"]
    assert locked in ("opt_o2", "opt_o1")
    other = "opt_o1" if locked == "opt_o2" else "opt_o2"
    slower = pytester.path / "new" / "bin" / "python"
    slower.parent.mkdir(parents=True)
    slower.write_text(SLOWER.format(python=sys.executable, level=locked[-1]))
    slower.chmod(slower.stat().st_mode | stat.S_IEXEC)

    gate = pytester.runpytest(str(cell), "--xlatune-gate", "--xlatune-gate-repair", f"--xlatune-image={slower}",
                              *COMMON)
    out = gate.stdout.str()
    assert gate.ret == 6, out  # regressed, repair proposed
    assert f"recipe '{locked}' [default] regressed vs the lock" in out
    proposed_file = pytester.path / "repair.lock.proposed.json"
    proposed = json.loads(proposed_file.read_text())
    assert proposed["recipes"][0]["profile"] == other and proposed["image"] == str(slower)
    report = (pytester.path / "repair-gate.md").read_text()
    assert "**regressed, repair proposed** (exit code 6)" in report and f"| proposed: {other} |" in report
    print(report[report.index("### Repair"):])

    shutil.copy(proposed_file, lock)
    again = pytester.runpytest(str(cell), "--xlatune-gate", f"--xlatune-image={slower}", *COMMON)
    assert again.ret == 0, again.stdout.str()
    assert "**Verdict: PASSED" in (pytester.path / "repair-gate.md").read_text()
