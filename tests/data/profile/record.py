"""Re-record the profiler traces under tests/data/profile/ from the embedded workload.

    python tests/data/profile/record.py            # all recipes
    python tests/data/profile/record.py pp         # some

Each recipe runs ``python -m pytest_xlatune.workload`` on 8 virtual CPU devices with
``profiler=xplane`` (2 profiled steps) and keeps JAX's ``*.trace.json.gz``, trimmed to stay small:
only the events the summary reads (thread metadata and the XLA op events, which carry
``args.hlo_op``), each without its ``_src`` (source file) argument. The same run's train-step
HLO is kept as ``<name>.hlo.txt``, trimmed to the lines the collective inventory reads
(computation headers, collectives, while loops and calls); the inventory of the trimmed text is
checked equal to the full one's before anything is written. Everything kept is as XLA wrote it.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO))

from pytest_xlatune.evidence import hlo  # noqa: E402
from pytest_xlatune.evidence.artifacts import find_trace  # noqa: E402
from pytest_xlatune.evidence.collective_table import inventory  # noqa: E402

COMMON = ["steps=5", "profiler=xplane", "skip_first_n_steps_for_profiler=2", "profiler_steps=2", "run_name=r"]
RECIPES: dict[str, tuple[list[str], str]] = {
    "fsdp": (["dcn_fsdp_parallelism=8"], ""),
    "fsdp_no_cpu_ar_combiner": (["dcn_fsdp_parallelism=8"], "--xla_disable_hlo_passes=cpu-all-reduce-combiner"),
    "fsdp_opt_o1": (["dcn_fsdp_parallelism=8"], "--xla_backend_optimization_level=1"),
    "pp": (["dcn_pipeline_parallelism=4", "num_pipeline_microbatches=4"], ""),
}
_OPS = re.compile(
    r"\b(all-gather|all-reduce|reduce-scatter|collective-permute|all-to-all|"
    r"ragged-all-to-all|collective-broadcast|send|recv|async|while)(-start|-done)?\("
)
_CALLS = re.compile(r"\b(?:calls|to_apply|body|condition|branch_computations)=\{?%?([^\s,{}]+)")


def trim_hlo(text: str) -> str:
    """Keep the module line and the computations and instructions the inventory reads: collectives,
    while loops, and calls of non-fusion computations; drop computations left empty."""
    out: list[str] = []
    body: list[str] = []
    header = ""
    for line in text.splitlines():
        if not line.startswith(" ") and line.rstrip().endswith("{") and not line.startswith("HloModule"):
            header, body = line, []
        elif header and line.strip() == "}":
            if body:
                out += [header, *body, "}", ""]
            header = ""
        elif header:
            callee = _CALLS.search(line)
            if _OPS.search(line) or (callee and not callee.group(1).startswith(("fused", "wrapped"))):
                body.append(line)
        else:
            out.append(line)
    trimmed = "\n".join(out) + "\n"
    full, kept = inventory(hlo.collectives(text)), inventory(hlo.collectives(trimmed))
    if full != kept:
        raise SystemExit(f"trimming changed the inventory: {full} != {kept}")
    return trimmed


def trim(raw: bytes) -> bytes:
    """Keep metadata and XLA op events, drop each event's `_src` argument."""
    trace = json.loads(gzip.decompress(raw))
    kept = []
    for event in trace["traceEvents"]:
        args = event.get("args") or {}
        if event.get("ph") == "M" or (event.get("ph") == "X" and "hlo_op" in args):
            kept.append({**event, "args": {k: v for k, v in args.items() if k != "_src"}} if "_src" in args else event)
    trace["traceEvents"] = kept
    return gzip.compress(json.dumps(trace, separators=(",", ":")).encode(), mtime=0)


def record(name: str) -> Path:
    args, extra = RECIPES[name]
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "dump")
        env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_as_text {extra}".strip()}
        argv = [sys.executable, "-m", "pytest_xlatune.workload", *COMMON, *args, f"base_output_directory={tmp}"]
        subprocess.run(argv, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
        trace = find_trace(os.path.join(tmp, "r"))
        module = hlo.find_train_step_dump(os.path.join(dump, f) for f in os.listdir(dump))
        if trace is None or module is None:
            raise SystemExit(f"{name}: no trace or no train-step dump under {tmp}")
        (HERE / f"{name}.hlo.txt").write_text(trim_hlo(Path(module).read_text()))
        out = HERE / f"{name}.trace.json.gz"
        out.write_bytes(trim(Path(trace).read_bytes()))
        return out


if __name__ == "__main__":
    for recipe in sys.argv[1:] or list(RECIPES):
        written = record(recipe)
        print(f"{recipe}: {written} ({written.stat().st_size // 1024} KiB)")
