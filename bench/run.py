"""Benchmark pytest-xlatune against baselines measured in the same run; print a table, write JSON.

    python bench/run.py [--quick] [--json OUT] [--only SECTION ...]

Sections (each figure is a ratio or a count against a baseline of the same run; there are no
timing assertions, a missed target is reported, not raised):

  queue_gap        N short sbatch jobs through the plugin vs hand-queued with sbatch
  scheduler_load   Slurm CLI calls per poll interval with 1/8/50 tracked jobs; SSH connections
  time_to_verdict  `Unknown flag` / OOM line written → job cancelled and item decided
  log_ingest       StepLog vs `grep -c` and `grep -F -c -f` its needles; one poll on a big vs a 1 MB log
  demo             the demo sweep fresh and reused (quick: reuse of a tiny fake-trainer cell)

Needs the local Slurm cluster (scripts/local-slurm.sh up) and root for the loopback sshd.
`--quick` (CI smoke run: every figure produced, too few samples to quote) finishes in about a
minute and a half; the full run in about 7.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import POLL_INTERVAL, REPO, Section, slurm_answers, wait_for_slurm

# section -> the bench module whose run(scratch_dir, quick) measures it
SECTIONS = {
    "queue_gap": "queue_gap",
    "scheduler_load": "sched_load",
    "time_to_verdict": "verdict_time",
    "log_ingest": "ingest",
    "demo": "demo_time",
}


def section_runner(name: str) -> Callable[[Path, bool], Section]:
    run: Callable[[Path, bool], Section] = importlib.import_module(SECTIONS[name]).run
    return run


def fmt(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if float(value).is_integer() and abs(value) < 1e6:
        return f"{int(value)}"
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"


def table(sections: list[Section]) -> str:
    rows = [("section", "figure", "value", "target", "")]
    for s in sections:
        if s.error:
            rows.append((s.name, "ERROR", s.error.splitlines()[0][:60], "", "FAIL"))
        for name, value in s.figures.items():
            met = s.met(name)
            rows.append(
                (s.name, name, fmt(value), s.targets.get(name, ""), "" if met is None else ("met" if met else "MISSED"))
            )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for s in sections:
        for note in s.notes:
            lines.append(f"[{s.name}] {note}")
    return "\n".join(lines)


CONTROLLER_AWAY = ("Unable to contact slurm controller", "Socket timed out", "Connection refused")


def run_section(name: str, tmp: Path, quick: bool) -> Section:
    """Run one section; once more if the shared cluster's controller was away (another user's
    test restarts it), as soon as it answers again."""
    away = ""
    for attempt in (1, 2):
        scratch = tmp / f"{name}-{attempt}"
        scratch.mkdir()
        try:
            section = section_runner(name)(scratch, quick)
            if away:
                section.notes.append(f"measured again: the first attempt failed with {away}")
            return section
        except Exception as error:  # report it, run the other sections, exit 1 at the end
            failed = Section(name, error=f"{type(error).__name__}: {error}")
            failed.details["traceback"] = traceback.format_exc()
            print(failed.details["traceback"], file=sys.stderr)
            controller_away = any(t in str(error) for t in CONTROLLER_AWAY) or not slurm_answers()
            if attempt == 2 or not controller_away:
                return failed
            away = next(
                (line for line in failed.error.splitlines() if any(t in line for t in CONTROLLER_AWAY)), failed.error
            )[:200]
            wait_for_slurm()
            print(f"== {name}: the Slurm controller was away; running the section again", file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="CI smoke run: fewer jobs, 100 MB log, no full demo (default: off)"
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=REPO / "bench" / "results.json",
        help="where to write the results (default: bench/results.json)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=sorted(SECTIONS),
        default=list(SECTIONS),
        help="run only these sections (default: all)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (default: off)")
    args = parser.parse_args()
    if not wait_for_slurm():
        print("the Slurm controller does not answer (scripts/local-slurm.sh up?)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="xlatune-bench-"))
    started = time.time()
    sections: list[Section] = []
    try:
        for name in args.only:
            print(f"== {name} ...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            load = os.getloadavg()[0]
            section = run_section(name, tmp, args.quick)
            section.details["loadavg_1m"] = [load, os.getloadavg()[0]]
            section.details["section_s"] = time.perf_counter() - t0
            print(f"== {name} done in {section.details['section_s']:.0f} s", file=sys.stderr, flush=True)
            sections.append(section)
    finally:
        if args.keep:
            print(f"scratch kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    out = {
        "meta": {
            "mode": "quick" if args.quick else "full",
            "started": started,
            "duration_s": time.time() - started,
            "poll_interval_s": POLL_INTERVAL,
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
        },
        **{s.name: s.to_dict() for s in sections},
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(table(sections))
    print(f"\n{len(sections)} sections in {out['meta']['duration_s']:.0f} s; JSON: {args.json}")
    return 1 if any(s.error for s in sections) else 0


if __name__ == "__main__":
    sys.exit(main())
