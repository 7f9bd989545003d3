"""The image-upgrade gate end to end on the real local Slurm with the real embedded JAX workload.

The deployed env file pins -O0 (tuned "for another parallelism"); the sweep finds that appending
-O2 wins, locks it, and the gate replays it on three "images" (Python interpreters): the same one,
one whose XLA no longer knows the locked flag, and one where the recipe got slower.

The "nodes" of the local Slurm are this shared 2-core machine. Under another CPU-heavy process,
identical settings (`restore_default` and `opt_o2`) measured 19 % and up to 2x apart, so the
noise left -O2 "within noise" and the sweep wrote no lock (the CI failure), or the baseline
moved 17 % between the sweep and the gate. So every image raises its job's CPU share above other
sessions' (the kernel's autogroup nice: an exclusive node gives a job the CPUs; as root, else
as it is), 15 steps average a slow start over ten steady steps, and two baseline repeats
measure the noise. Measuring through drift is issue 14's.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.jax]

CELL = """\
model_tag: gate
nodelist: node[03-04]
parallelism: FSDP=8
pdbs: 2
steps: 15
baseline_repeats: 2
overrides: {emb_dim: 128, mlp_dim: 512, num_decoder_layers: 2, max_target_length: 64}
env_file:
  - flag: --xla_backend_optimization_level=0
    image_default: "2"
waves:
  2:
    - {name: opt_o2, xla_flags: [--xla_backend_optimization_level=2]}
backend: {kind: sbatch, time: "10:00"}
# Eight virtual devices on two cores drift by several % between sessions (-3.6 % once in CI with
# the same image), so this machine gates at 10 %; the broken recipes below lose ~30 %.
thresholds: {regression_pct: 10}
"""

WRAPPER = """#!/bin/bash
echo -10 > /proc/self/autogroup 2>/dev/null || true  # this job's session above other sessions
{body}
exec {python} "$@"
"""


def image(tmp: Path, name: str, body: str = "") -> str:
    path = tmp / name
    path.write_text(WRAPPER.format(body=body, python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_lock_then_gate_passes_fails_on_removed_flag_and_on_slower_recipe(
        pytester: pytest.Pytester, local_slurm: None) -> None:
    cell = pytester.makefile(".yml", gate=CELL)
    common = ["-p", "no:cacheprovider", "--xlatune-poll-interval=0.3", "-rf"]
    sweep = pytester.runpytest(str(cell), "-v", f"--xlatune-image={image(pytester.path, 'deployed')}",
                               *common)
    shown = sweep.stdout.str()  # the verdict of each run and the lock line, for a failure
    # baseline ×2, restore_default, evidence, opt_o2, winner evidence
    sweep.assert_outcomes(passed=6)
    assert cell.with_suffix(".lock.json").exists(), shown
    lock = json.loads(cell.with_suffix(".lock.json").read_text())
    assert [(r["profile"], r["xla_flags"]) for r in lock["recipes"]] == [
        ("opt_o2", ["--xla_backend_optimization_level=2"])]
    assert lock["recipes"][0]["ci_low_pct"] > 0  # better than -O0 beyond the noise

    same = pytester.runpytest(str(cell), "--xlatune-gate",
                              f"--xlatune-image={image(pytester.path, 'same')}", *common)
    same.assert_outcomes(passed=3)

    renamed = image(pytester.path, "noflag", 'export XLA_FLAGS="${XLA_FLAGS//'
                    '--xla_backend_optimization_level=2/--xla_backend_optimization_level_v2=2}"')
    gone = pytester.runpytest(str(cell), "--xlatune-gate", f"--xlatune-image={renamed}", *common)
    gone.assert_outcomes(passed=2, failed=1)
    gone.stdout.fnmatch_lines(["*a locked flag no longer exists in image*noflag*Unknown flag in "
                               "XLA_FLAGS: --xla_backend_optimization_level_v2=2*"])

    slower = image(pytester.path, "slower", 'case "$XLA_FLAGS" in *level=2*) '
                   'export XLA_FLAGS="$XLA_FLAGS --xla_backend_optimization_level=0";; esac')
    slow = pytester.runpytest(str(cell), "--xlatune-gate", f"--xlatune-image={slower}", *common)
    slow.assert_outcomes(passed=2, failed=1)
    slow.stdout.fnmatch_lines(["*recipe 'opt_o2' [[]default[]] regressed vs the lock*"])
