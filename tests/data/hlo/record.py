"""Re-record the HLO dumps under tests/data/hlo/ from the embedded workload.

    python tests/data/hlo/record.py            # all recipes
    python tests/data/hlo/record.py pp tp      # some

Each recipe runs ``python -m pytest_xlatune.workload`` on 8 virtual CPU devices with
``XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text [extra]`` and keeps only the train-step
``*after_optimizations.txt``. Fusion bodies (``%fused_*`` computations) hold no collectives on
CPU and are most of the bytes, so they are dropped; every other line is kept as XLA wrote it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO))

from pytest_xlatune.evidence.hlo import find_train_step_dump  # noqa: E402

COMMON = ["steps=3", "run_name=r"]
RECIPES: dict[str, tuple[list[str], str]] = {
    "fsdp": (["dcn_fsdp_parallelism=8"], ""),
    # Measured: the only flag found that changes CPU collective counts (all-reduce 2 -> 11).
    "fsdp_no_cpu_ar_combiner": (["dcn_fsdp_parallelism=8"], "--xla_disable_hlo_passes=cpu-all-reduce-combiner"),
    "tp": (["ici_tensor_parallelism=8", "num_heads=8"], ""),
    "pp": (["dcn_pipeline_parallelism=4"], ""),
}
_COLLECTIVE = re.compile(r"(?<![\w.-])(all-gather|reduce-scatter|all-reduce|collective-permute|all-to-all)\b")


def trim(text: str) -> str:
    """Drop ``fused_*`` computations that hold no collective op."""
    out: list[str] = []
    block: list[str] | None = None
    for line in text.splitlines(keepends=True):
        if block is None and re.match(r"%?fused_\S* \(.*\{$", line.rstrip()):
            block = [line]
        elif block is not None:
            block.append(line)
            if line.rstrip() == "}":
                body = "".join(block)
                if any(_COLLECTIVE.search(b.split("=", 1)[-1]) for b in block[1:-1]):
                    out.append(body)
                block = None
        else:
            out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "".join(out))


def record(name: str) -> Path:
    args, extra = RECIPES[name]
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "dump")
        env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_as_text {extra}".strip()}
        argv = [sys.executable, "-m", "pytest_xlatune.workload", *args, *COMMON, f"base_output_directory={tmp}"]
        subprocess.run(argv, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
        path = find_train_step_dump(os.path.join(dump, f) for f in os.listdir(dump))
        if path is None:
            raise SystemExit(f"{name}: no train-step dump in {dump}")
        out = HERE / f"{name}.txt"
        out.write_text(trim(Path(path).read_text()))
        return out


if __name__ == "__main__":
    for recipe in sys.argv[1:] or list(RECIPES):
        written = record(recipe)
        print(f"{recipe}: {written} ({written.stat().st_size // 1024} KiB)")
