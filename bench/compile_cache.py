"""The JAX compilation cache on the demo workload: the compile phase of a repeat that loads its
first run's executable, against that first run's, measured in the same run.

    python bench/compile_cache.py [--pairs 3] [--steps 6] [--json OUT]

Each pair gets a fresh cache root: run 1 compiles and fills it, run 2 (the same settings) loads
from it. Both are the demo cell's jobs (cells/demo_fsdp8.yml: FSDP=8 on 8 virtual CPU devices,
its overrides and env file; `--steps` of them), built as the engine builds them
(adaptive.cache.request_for) and started by the local backend's launcher, as a sweep starts
them. The compile phase is what the workload prints when its train step is compiled (or loaded
from the cache) before step 0: `xlatune: compiled train_step (S s)` (evidence/inert.COMPILED_LINE;
step 0 no longer contains the compile since the workload compiles ahead of it). Measured for the demo's baseline
settings (-O0: what its repeats and controls run) and for restore_default's (-O2).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _common import emit  # noqa: E402

from pytest_xlatune.adaptive.cache import request_for  # noqa: E402
from pytest_xlatune.cell.load import load_cell  # noqa: E402
from pytest_xlatune.evidence.inert import COMPILED_LINE  # noqa: E402
from pytest_xlatune.launch.base import JobPhase  # noqa: E402
from pytest_xlatune.launch.local import LocalLauncher  # noqa: E402
from pytest_xlatune.plan.expand import expand  # noqa: E402

DEMO = REPO / "cells" / "demo_fsdp8.yml"
PROFILES = ("baseline", "restore_default")
STEP = re.compile(r"^completed step: (\d+), seconds: ([\d.]+),", re.MULTILINE)
COMPILED = re.compile(rf"^{re.escape(COMPILED_LINE)} \(([\d.]+) s\)$", re.MULTILINE)
HIT = "Persistent compilation cache hit"  # JAX logs it under JAX_LOG_COMPILES=1


def compile_phase(log: str) -> float:
    """The seconds the workload says its train step took to compile (or load) before step 0."""
    found = COMPILED.search(log)
    if found is None:
        raise RuntimeError(f"no {COMPILED_LINE!r} line in the job's log:\n{log[-2000:]}")
    return float(found.group(1))


def run_job(launcher: LocalLauncher, profile: str, steps: int) -> dict[str, Any]:
    """One demo job of `profile` to its end: its compile phase, wall time and cache directory."""
    cell = replace(load_cell(DEMO), steps=steps)
    request = request_for(cell, next(s for s in expand(cell) if s.profile == profile))
    started = time.perf_counter()
    job = launcher.submit(request)
    while launcher.poll([job.job_id])[job.job_id].phase is not JobPhase.FINISHED:
        time.sleep(0.1)
    wall = time.perf_counter() - started
    log = Path(job.log_path).read_text()
    if len(STEP.findall(log)) != steps:
        raise RuntimeError(f"{profile}: job {job.job_id} did not finish its {steps} steps:\n{log[-2000:]}")
    return {"compile_s": compile_phase(log), "wall_s": wall, "cache": job.compile_cache, "hit": HIT in log}


def measure(pairs: int, steps: int) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for profile in PROFILES:
        runs = []
        for _ in range(pairs):
            with tempfile.TemporaryDirectory(prefix="xlatune-cache-bench-") as tmp:
                launcher = LocalLauncher(Path(tmp) / "jobs", 1, cache_root=Path(tmp) / "jax-cache")
                first, repeat = run_job(launcher, profile, steps), run_job(launcher, profile, steps)
                launcher.close()
            if not first["cache"] or first["cache"] != repeat["cache"]:
                raise RuntimeError(
                    f"{profile}: expected one cache for both runs, found {first['cache']!r}, {repeat['cache']!r}"
                )
            runs.append(
                {
                    "uncached": first,
                    "cached": repeat,
                    "ratio": repeat["compile_s"] / first["compile_s"],
                    "wall_ratio": repeat["wall_s"] / first["wall_s"],
                }
            )
        rows[profile] = {
            "pairs": runs,
            "ratio": statistics.median(r["ratio"] for r in runs),
            "wall_ratio": statistics.median(r["wall_ratio"] for r in runs),
            "uncached_s": statistics.median(r["uncached"]["compile_s"] for r in runs),
            "cached_s": statistics.median(r["cached"]["compile_s"] for r in runs),
        }
    return {"profiles": rows, "pairs": pairs, "steps": steps}


def table(data: dict[str, Any]) -> str:
    lines = [f"{'settings':18}{'compile s':>11}{'cached s':>10}{'ratio':>8}{'wall ratio':>12}  hits"]
    for profile, row in data["profiles"].items():
        hits = sum(r["cached"]["hit"] for r in row["pairs"])
        lines.append(
            f"{profile:18}{row['uncached_s']:>11.2f}{row['cached_s']:>10.2f}{row['ratio']:>8.3f}"
            f"{row['wall_ratio']:>12.3f}  {hits}/{len(row['pairs'])} logged"
        )
    lines.append(
        f"median of {data['pairs']} pairs of {data['steps']}-step demo jobs; ratio = cached compile "
        "phase / uncached, same pair; hits: JAX's own log line in the repeat"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="uncached/cached pairs per setting (default: 3)")
    parser.add_argument("--steps", type=int, default=6, help="steps per job, at least 2 (default: 6)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.steps < 2:
        parser.error(f"expected --pairs >= 1 and --steps >= 2, found {args.pairs} and {args.steps}")
    os.environ["JAX_LOG_COMPILES"] = "1"  # the jobs inherit it: JAX logs each cache hit
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)  # a cache of this shell's would win
    data = measure(args.pairs, args.steps)
    return emit(table(data), data, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
