"""Peak RSS of a sweep whose job writes a huge log (bounded ingest: the target is < 200 MB).

    python bench/big_log_rss.py [--gb 1.0] [--long-line-mb 50] [--keep DIR]

Runs pytest in a fresh interpreter on a one-item cell (local backend, the scripted fake trainer)
whose job prints its 15 step lines and then GB of 1000-byte junk lines, and prints that
process's peak RSS (ru_maxrss) next to the same figure for a job that writes only the step
lines. A third sweep's job prints one line of --long-line-mb MB before its steps: its wall time
against the small sweep's shows the long line is scanned once. Not a test: a bench.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CELL = """\
model_tag: bigl
nodes: 1
parallelism: FSDP=8
baseline_repeats: 1
overrides: {{fake_log_bytes: {junk}, fake_long_line: {long}}}
"""

CHILD = """\
import json, resource, sys, time
import pytest
start = time.time()
code = pytest.main(sys.argv[1:])
print(json.dumps({"code": int(code), "wall_s": time.time() - start,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def sweep(workdir: Path, junk: int, long: int = 0) -> dict[str, float]:
    """One pytest session in a fresh interpreter (its own peak RSS) on the one-item cell."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "cell.yml").write_text(CELL.format(junk=junk, long=long))
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'tests'}{os.pathsep}{REPO}"}
    argv = [
        sys.executable,
        "-c",
        CHILD,
        "cell.yml::wave1::baseline[default]",
        "-q",
        "-p",
        "no:cacheprovider",
        "--xlatune-workload=fake_trainer",
        "--xlatune-no-report",
        "--xlatune-poll-interval=0.5",
    ]
    done = subprocess.run(argv, check=False, cwd=workdir, env=env, capture_output=True, text=True, timeout=3600)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["code"] != 0:
        raise SystemExit(f"the sweep failed:\n{done.stdout[-3000:]}")
    logs = list((workdir / ".xlatune").glob("**/*.log"))
    figures["log_bytes"] = sum(log.stat().st_size for log in logs)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="junk written after the steps")
    parser.add_argument("--long-line-mb", type=float, default=50.0, help="one line this long")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="xlatune-rss-"))
    small = sweep(root / "small", 0)
    big = sweep(root / "big", int(args.gb * 1e9))
    long = sweep(root / "long", 0, int(args.long_line_mb * 1e6))
    print(
        json.dumps(
            {
                "small_log": small,
                "big_log": big,
                "long_line": long,
                "peak_rss_ratio": big["peak_rss_mb"] / small["peak_rss_mb"],
                "long_line_wall_ratio": long["wall_s"] / small["wall_s"],
            },
            indent=1,
        )
    )
    print(
        f"peak RSS {big['peak_rss_mb']:.0f} MB with a {big['log_bytes'] / 1e9:.2f} GB log "
        f"({small['peak_rss_mb']:.0f} MB with a {small['log_bytes'] / 1e3:.0f} kB log); target < 200 MB"
    )
    print(
        f"a {args.long_line_mb:g} MB line: sweep {long['wall_s']:.1f} s vs {small['wall_s']:.1f} s "
        f"without it; peak RSS {long['peak_rss_mb']:.0f} MB"
    )
    if args.keep is None:
        subprocess.run(["rm", "-rf", str(root)], check=False)


if __name__ == "__main__":
    main()
