"""The gate's repair end to end on the embedded default (real JAX, local backend): a sweep writes
a lock, a slower "new image" venv fails the gate, the repair proposes another recipe, and the
proposed lock passes the gate on that venv.

The new venv is a wrapper around this interpreter whose XLA "lost" the locked recipe's gain: any
run that asks for the locked optimization level (-O2, or -O1 when the loaded machine made that the
sweep's recipe) gets -O0 appended (last wins), as in test_gate_real.py; the other level is
untouched, so the previous sweep's runner-up is the repair."""

from __future__ import annotations

import json
import re
import shutil
import stat
import sys
from pathlib import Path

import pytest

from pytest_xlatune.cell.load import load_cell
from pytest_xlatune.results import RunKind
from pytest_xlatune.store import ResultStore
from pytest_xlatune.verdict.lock import Lock, LockedRecipe, dumps
from pytest_xlatune.verdict.one_run import POOLED_MIN_STEPS, steady_steps

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
NO_REPAIR_UNDER_NOISE = "no candidate beat the new image's baseline beyond the noise with a second run agreeing"
COMMON = ["-p", "no:cacheprovider", "--xlatune-poll-interval=0.2", "-rfs"]


def write_lock_of_fastest(root: Path, cell: Path) -> None:
    results = ResultStore(root / ".xlatune" / "repair.jsonl").results()
    measured = [r for r in results if r.measured and r.tgs is not None]
    base = [r.tgs or 0.0 for r in measured if r.kind is RunKind.BASELINE]
    means = {p: [r.tgs or 0.0 for r in measured if r.profile == p] for p in ("opt_o2", "opt_o1")}
    best = max(means, key=lambda p: sum(means[p]) / len(means[p]))
    tgs, base_tgs = sum(means[best]) / len(means[best]), sum(base) / len(base)
    loaded = load_cell(cell)
    cell.with_suffix(".lock.json").write_text(
        dumps(
            Lock(
                loaded.model_tag,
                loaded.parallelism.text,
                "",
                "localhost",
                "2026-12-03",
                (
                    LockedRecipe(
                        config_tag="default",
                        profile=best,
                        xla_flags=(f"--xla_backend_optimization_level={best[-1]}",),
                        env=(),
                        overrides=(),
                        tgs=tgs,
                        ci_low_pct=0.0,
                        ci_high_pct=0.0,
                        baseline_tgs=base_tgs,
                        delta_pct=(tgs / base_tgs - 1) * 100,
                        job_ids=("1",),
                    ),
                ),
            )
        )
    )


def test_sweep_lock_gate_fails_repair_proposes_and_the_proposal_passes(pytester: pytest.Pytester) -> None:
    cell = pytester.makefile(".yml", repair=CELL)
    sweep = pytester.runpytest(str(cell), *COMMON)
    lock = cell.with_suffix(".lock.json")
    if not lock.exists():
        # On a loaded 2-core machine the sweep may rightly not confirm the win (test_gate_real.py:
        # -O2's gain moved from +147 % to +38 % between CI runs); the store holds what it measured,
        # and the lock is written as the sweep writes it for its fastest profile.
        assert "recipe lock repair.lock.json not written" in sweep.stdout.str(), sweep.stdout.str()
        write_lock_of_fastest(pytester.path, cell)
    locked = json.loads(lock.read_text())["recipes"][0]["profile"]
    assert locked in ("opt_o2", "opt_o1")
    other = "opt_o1" if locked == "opt_o2" else "opt_o2"
    slower = pytester.path / "new" / "bin" / "python"
    slower.parent.mkdir(parents=True)
    slower.write_text(SLOWER.format(python=sys.executable, level=locked[-1]))
    slower.chmod(slower.stat().st_mode | stat.S_IEXEC)

    store, kept = pytester.path / ".xlatune", pytester.path / ".xlatune-before-the-gate"
    shutil.copytree(store, kept)
    for attempt in (1, 2):
        gate = pytester.runpytest(
            str(cell), "--xlatune-gate", "--xlatune-gate-repair", f"--xlatune-image={slower}", *COMMON
        )
        report = (pytester.path / "repair-gate.md").read_text()
        if gate.ret != 1 or NO_REPAIR_UNDER_NOISE not in report or attempt == 2:
            break
        # Under load the repair can rightly not confirm its winner: it has two runs, and the noise
        # they show leaves the gain undecided (CI runs, next to the Slurm lane's jobs and a CPU hog:
        # the other level at 769.6 and 920.9 TGS, 18 % apart; 1048.8 and 703.5, 40 % apart).
        # Measured again from the same store, as a user reruns an inconclusive repair.
        shutil.rmtree(store)
        shutil.copytree(kept, store)
    if gate.ret == 1 and NO_REPAIR_UNDER_NOISE in report:
        # Still undecided: the repair said so, proposed nothing, and named the other level with the
        # interval that could not decide it. The proposal path itself is tests/plugin/test_gate_repair.py's
        # (a scripted trainer); here it runs whenever the machine's noise lets two runs decide.
        assert "**regressed, no repair found** (exit code 1)" in report, report
        # its figure in the report's candidate list: `- `opt_o2` (previous sweep: …): 892.2 TGS +83.72 %
        # [-68.30, +966.10] vs the baseline (jobs 21, 22)`
        interval = r"[0-9.]+ TGS [+-][0-9.]+ % \\?\[[+-][0-9.]+, [+-][0-9.]+\\?\] vs the baseline"  # markdown-escaped
        figure = rf"- `{other}` \(previous sweep: .*\): {interval}"
        assert re.search(figure, report), report
        assert not (pytester.path / "repair.lock.proposed.json").exists()
        # Only the noise may leave it undecided: the other level's repair runs (its HLO-dump run's
        # steps 9-14 too, which must agree with them, as a sweep's winner's re-run must), or the new
        # image's baseline runs they are compared with, disagree by more than any idle run of this
        # cell (1-3 %); runs that agree and still no proposal is a bug.
        found = [
            r for r in ResultStore(store / "repair.jsonl").results() if r.measured and r.tgs and r.image == str(slower)
        ]
        other_runs = [
            r.tgs
            for r in found
            if r.wave == "repair"
            and f"--xla_backend_optimization_level={other[-1]}" in r.xla_flags
            and steady_steps(r) >= POOLED_MIN_STEPS  # a profiled run this short is never judged
        ]
        base_runs = [r.tgs for r in found if r.kind is RunKind.BASELINE]
        spreads = [(max(v) - min(v)) / (sum(v) / len(v)) * 100 for v in (other_runs, base_runs) if len(v) >= 2]
        assert spreads and max(spreads) > 8.0, (other_runs, base_runs, report)
        repair = report[report.index("### Repair") :]
        print(f"repair undecided twice: {other_runs} and baselines {base_runs}, up to {max(spreads):.1f} % apart")
        print(repair)
        return
    out = gate.stdout.str()
    assert gate.ret == 6, out  # regressed, repair proposed
    # Either recipe check can fail first (vs the lock's image or vs the new image's baseline).
    assert re.search(
        rf"recipe '{locked}' \[default\] (regressed vs the lock|no longer beats or matches the baseline)", out
    ), out
    proposed_file = pytester.path / "repair.lock.proposed.json"
    proposed = json.loads(proposed_file.read_text())
    assert proposed["recipes"][0]["profile"] == other and proposed["image"] == str(slower)
    report = (pytester.path / "repair-gate.md").read_text()
    assert "**regressed, repair proposed** (exit code 6)" in report and f"| proposed: {other} |" in report
    print(report[report.index("### Repair") :])

    shutil.copy(proposed_file, lock)
    # As a CI job on a fresh runner gates it: a store of its own, so every figure the gate compares
    # is measured in this session's time window (the store above holds the new image's baseline
    # runs of the failing gate, measured minutes earlier, on a loaded machine up to 40 % apart).
    # The lock's image and the gated one are the same interpreter here: a failure can only be this
    # machine's noise between two of its own runs (under a CPU hog, jobs 1 7 vs 2 8 of one baseline
    # read 452 vs 356 TGS, -21 %). Such a gate is run once more in a fresh store, as a CI job reruns.
    for store_name in (".xlatune-deployed", ".xlatune-deployed-again"):
        again = pytester.runpytest(
            str(cell), "--xlatune-gate", f"--xlatune-image={slower}", f"--xlatune-store={store_name}", *COMMON
        )
        if again.ret == 0:
            break
    assert again.ret == 0, again.stdout.str()
    assert "**Verdict: PASSED" in (pytester.path / "repair-gate.md").read_text()
