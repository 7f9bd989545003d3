"""The same cell run adaptively and under --xlatune-fixed-protocol, back to back in one time
window, on the local backend with the scripted noisy trainer (tests/fake_trainer.py) whose true
effects are known: job time (node-minutes of every job, attempts included) of each, the ratio,
the recipe each names (its report's) and the one each locked (the fixed protocol runs no
control after a win, so it locks none), and the null profiles each called better.

    python bench/side_by_side.py [--json OUT] [--seed N]

The cell: 2 baselines and the evidence run, then a -30 % profile, three no-ops, a +8 % win, a
duplicate of the win and six more no-ops (each a flag the trainer ignores), and the winner's
evidence run; 0.4 % run-to-run noise, 15 steps of 0.08 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_xlatune.store import ResultStore  # noqa: E402
from pytest_xlatune.verdict import choice  # noqa: E402

NULLS = ("null_a", "null_b", "null_c", "null_d", "null_e", "null_f", "null_g", "null_h", "null_i")
WIN_FLAGS = ["--xla_fake_tgs=1080"]


def cell_text(seed: int, place: str = "") -> str:
    """The cell; `place` (first, middle, last) moves the win and its duplicate there."""
    profiles = [
        ("slow", "--xla_fake_tgs=700"),
        *[(n, f"--xla_fake_{n}=true") for n in NULLS[:3]],
        ("win", WIN_FLAGS[0]),
        ("win_again", WIN_FLAGS[0]),
        *[(n, f"--xla_fake_{n}=true") for n in NULLS[3:]],
    ]
    if place:
        wins, rest = profiles[4:6], profiles[:4] + profiles[6:]
        at = {"first": 0, "middle": len(rest) // 2, "last": len(rest)}[place]
        profiles = rest[:at] + wins + rest[at:]
    lines = "\n".join(f"    - {{name: {name}, xla_flags: [{flag}]}}" for name, flag in profiles)
    return (
        f"model_tag: side\nnodes: 1\nparallelism: FSDP=8\nbaseline_repeats: 2\n"
        f"overrides: {{fake_step_sleep: 0.08, fake_noise: 0.004, fake_seed: {seed}}}\n"
        f"waves:\n  2:\n{lines}\n"
    )


def run_one(where: Path, seed: int, fixed: bool, place: str = "") -> dict[str, Any]:
    """One sweep of the cell in its own directory: its jobs' time, recipe, and verdicts."""
    where.mkdir(parents=True)
    (where / "side.yml").write_text(cell_text(seed, place))
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "tests"), os.environ.get("PYTHONPATH")]))
    )
    args = [
        sys.executable,
        "-m",
        "pytest",
        "side.yml",
        "-v",
        "-rs",
        "--xlatune-workload=fake_trainer",
        "--xlatune-poll-interval=0.05",
        "-p",
        "no:cacheprovider",
        *(["--xlatune-fixed-protocol"] if fixed else []),
    ]
    done = subprocess.run(args, check=False, cwd=where, env=env, capture_output=True, text=True, timeout=900)
    events = [json.loads(line) for line in (where / ".xlatune" / "side.jsonl").read_text().splitlines()]
    jobs = {e["job_id"]: e for e in events if e["event"] in ("result", "attempt") and not e.get("shared_from")}
    lock_path = where / "side.lock.json"
    lock = json.loads(lock_path.read_text()) if lock_path.exists() else {}
    locked = [r.get("xla_flags") for r in lock.get("recipes", [])]
    # The recipe the report names (its TL;DR, choice.deployable), locked or not.
    stored = [r for r in ResultStore(where / ".xlatune" / "side.jsonl").latest_by_key().values() if r.measured]
    named = choice.deployable(stored, "default")
    recipe = [list(named.xla_flags)] if named is not None else []
    better = sorted(
        {
            line.split("::")[2].split("[")[0]
            for line in done.stdout.splitlines()
            if " PASSED " in line and " better" in line and "::wave2::null_" in line
        }
    )
    return {
        "returncode": done.returncode,
        "job_seconds": sum(j.get("node_minutes") or 0.0 for j in jobs.values()) * 60,
        "jobs": len(jobs),
        "recipe": recipe,
        "locked": locked,
        "nulls_called_better": better,
        "stopped_early": sum(1 for j in jobs.values() if j["verdict"] == "stopped_early"),
        "shared": sum(1 for e in events if e["event"] == "result" and e.get("shared_from")),
        "skipped": done.stdout.count("SKIPPED ["),
        "summary": [line for line in done.stdout.splitlines() if line.startswith("xlatune: side.yml")],
        "tail": done.stdout[-3000:] if done.returncode else "",
        "with_stop_rule_seconds": _with_stop_rule(jobs.values()) if fixed else None,
    }


def _with_stop_rule(jobs: Any) -> float:
    """The fixed protocol's job time had it used the workflow's stop rule: its jobs in order up
    to the second run of the win's settings (the win and its duplicate: a confirmed ≥ +5 %
    win), then the winner's evidence run."""
    ordered = sorted(jobs, key=lambda j: j.get("submitted_at") or 0.0)
    seconds, wins = 0.0, 0
    for job in ordered:
        if wins >= 2 and job.get("kind") != "winner_evidence":
            continue
        seconds += (job.get("node_minutes") or 0.0) * 60
        wins += list(job.get("xla_flags") or ()) == WIN_FLAGS
    return seconds


def measure(seed: int, place: str = "") -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="xlatune-side-") as tmp:
        adaptive = run_one(Path(tmp) / "adaptive", seed, fixed=False, place=place)
        fixed = run_one(Path(tmp) / "fixed", seed, fixed=True, place=place)
    return {
        "seed": seed,
        "adaptive": adaptive,
        "fixed": fixed,
        "job_time_ratio": adaptive["job_seconds"] / fixed["job_seconds"] if fixed["job_seconds"] else None,
        "same_recipe": adaptive["recipe"] == fixed["recipe"] and bool(adaptive["recipe"]),
        "true_recipe": adaptive["recipe"] == [WIN_FLAGS],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--place",
        choices=("first", "middle", "last"),
        default="",
        help="move the win and its duplicate to the start, middle or end of the list",
    )
    options = parser.parse_args(argv)
    data = measure(options.seed, options.place)
    print("| what | adaptive | fixed |\n|---|---|---|")
    for label, key in (
        ("job time (s, every job)", "job_seconds"),
        ("jobs", "jobs"),
        ("early stops", "stopped_early"),
        ("shared duplicates", "shared"),
        ("skipped items", "skipped"),
    ):
        a, f = data["adaptive"][key], data["fixed"][key]
        print(f"| {label} | {a:.1f} | {f:.1f} |" if isinstance(a, float) else f"| {label} | {a} | {f} |")
    print(f"| recipe (the report's) | {data['adaptive']['recipe']} | {data['fixed']['recipe']} |")
    print(f"| recipe locked | {data['adaptive']['locked']} | {data['fixed']['locked']} |")
    print(
        f"| null profiles called better | {data['adaptive']['nulls_called_better'] or 'none'} | "
        f"{data['fixed']['nulls_called_better'] or 'none'} |"
    )
    ratio = data["job_time_ratio"]
    print(f"job time ratio adaptive/fixed: {ratio:.3f} (target <= 0.7)" if ratio else "job time ratio: n/a")
    stop = data["fixed"]["with_stop_rule_seconds"]
    if stop:
        print(
            f"job time ratio adaptive/(fixed with the stop rule, {stop:.1f} s): "
            f"{data['adaptive']['job_seconds'] / stop:.3f}"
        )
    if options.json:
        options.json.write_text(json.dumps(data, indent=2))
    return 0 if data["adaptive"]["returncode"] == 0 and data["fixed"]["returncode"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
