"""Measure how far the embedded workload's loss trajectory moves under different settings.

    python bench/numerics.py [--repeats 2] [--json OUT]

Runs the demo cell's model (FSDP=8, 15 steps) with the demo's deployed env (-O0) as the
reference, then, in the same run, (a) the identical settings again, (b) flags that only reorder
floating-point work, (c) knobs that change numerics; prints, per setting, the largest |Δ loss|
over all steps, the step where it is largest and the largest relative Δ, twice: in the loss as
the step line prints it (3 decimals: what the guard reads) and at full float precision (what
the reordering really moved, below the printed digit). Each setting's losses come from one
child process that builds and runs the workload's own jitted train step (train.build) and
prints repr(loss); the printed value is that float formatted as the step line formats it.
These numbers set numerics.DEFAULT_TOLERANCE (docs/explanation/verdicts.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

BASE_FLAGS = ["--xla_backend_optimization_level=0"]
ARGS = [
    "steps=15",
    "per_device_batch_size=2",
    "dcn_fsdp_parallelism=8",
    "emb_dim=128",
    "mlp_dim=512",
    "num_decoder_layers=4",
    "max_target_length=128",
]
SETTINGS: dict[str, tuple[str, list[str], list[str]]] = {
    # name: (group, extra XLA flags, extra overrides)
    "identical": ("a: identical settings", [], []),
    "opt_o1": ("b: reorders only", ["--xla_backend_optimization_level=1"], []),
    "opt_o2": ("b: reorders only", ["--xla_backend_optimization_level=2"], []),
    "no_ar_combine": ("b: reorders only", ["--xla_disable_hlo_passes=cpu-all-reduce-combiner"], []),
    "vec256": ("b: reorders only", ["--xla_cpu_prefer_vector_width=256"], []),
    "no_eigen_mt": ("b: reorders only", ["--xla_cpu_multi_thread_eigen=false"], []),
    "split4": ("b: reorders only", ["--xla_cpu_parallel_codegen_split_count=4"], []),
    "fast_math_on": ("c: changes numerics?", ["--xla_cpu_enable_fast_math=true"], []),
    "dtype_bf16": ("c: changes numerics", [], ["dtype=bfloat16"]),
}
# The workload's own loop without its log: the same jitted step, the loss at full precision.
CHILD = """
import sys
from pytest_xlatune.workload import parse_args, prepare_env
cfg = parse_args(sys.argv[1:])
prepare_env(cfg.num_devices)
from pytest_xlatune.workload.train import build
init, train_step, order = build(cfg)
state = init()
for _ in range(cfg.steps):
    state, loss = train_step(state, order)
    print(repr(float(loss)), flush=True)
"""


def printed(loss: float) -> float:
    """The loss as the step line shows it (train.py: `loss: {loss_value:.3f}`)."""
    return float(f"{loss:.3f}")


def losses(flags: list[str], overrides: list[str]) -> list[float]:
    env = dict(os.environ, XLA_FLAGS=" ".join(BASE_FLAGS + flags))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, *ARGS, *overrides], env=env, capture_output=True, text=True, check=True
    ).stdout
    return [float(line) for line in out.split()]


def worst(got: list[float], reference: list[float]) -> tuple[float, int, float]:
    """Largest |Δ|, the step where it is largest, largest |Δ|/|reference| over all steps."""
    diffs = [abs(a - b) for a, b in zip(got, reference, strict=True)]
    at = max(range(len(diffs)), key=diffs.__getitem__)
    return diffs[at], at, max(d / abs(r) for d, r in zip(diffs, reference))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="runs per setting (default 2)")
    parser.add_argument("--json", help="write the figures here")
    ns = parser.parse_args()
    reference = losses([], [])
    shown = [printed(x) for x in reference]
    print("reference loss (printed):", " ".join(f"{x:.3f}" for x in shown))
    print(f"{'group':22} {'setting':14} run   printed: max |Δ| step  rel      full precision: max |Δ| step  rel")
    rows = []
    for name, (group, flags, overrides) in SETTINGS.items():
        for repeat in range(ns.repeats):
            got = losses(flags, overrides)
            p_abs, p_at, p_rel = worst([printed(x) for x in got], shown)
            f_abs, f_at, f_rel = worst(got, reference)
            rows.append(
                {
                    "setting": name,
                    "group": group,
                    "repeat": repeat,
                    "printed": {"max_abs": p_abs, "at_step": p_at, "max_rel": p_rel},
                    "full": {"max_abs": f_abs, "at_step": f_at, "max_rel": f_rel},
                    "losses": got,
                }
            )
            print(
                f"{group:22} {name:14} {repeat:3}   {p_abs:14.4f} {p_at:4} {p_rel * 100:7.3f} %"
                f"  {f_abs:22.3e} {f_at:4} {f_rel * 100:9.2e} %",
                flush=True,
            )
    if ns.json:
        with open(ns.json, "w", encoding="utf-8") as fh:
            json.dump({"reference": reference, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
