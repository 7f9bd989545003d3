"""Summarize a GPU cell run (scripts/gpu-cell.sh) as Markdown: what the lead keeps as figures.

    python scripts/gpu_cell_summary.py WORKDIR > summary.md

WORKDIR holds gpu.txt, export/*.json (--xlatune-export), *-tuning.md, pytest.log and the store
with the jobs' dirs. Every figure comes from those files through the package's own readers
(evidence.kernels, evidence.hlo, evidence.profile): TGS and job times per run, the report's
TL;DR and recipe, and per evidence run the kernels and collectives of its compiled train step
and the time split of its profile.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

from pytest_xlatune.evidence import hlo
from pytest_xlatune.evidence.artifacts import op_kinds
from pytest_xlatune.evidence.collective_table import inventory
from pytest_xlatune.evidence.kernels import describe, kernel_inventory
from pytest_xlatune.evidence.profile import ProfileError, summarize


def _section(markdown: str, title: str) -> str:
    """The text of one `## title` section of the report, without its heading."""
    parts = markdown.split(f"\n## {title}", 1)
    return parts[1].split("\n## ", 1)[0].strip() if len(parts) == 2 else "(not in the report)"


def _seconds(row: dict[str, object]) -> str:
    start, end = row.get("submitted_at"), row.get("finished_at")
    if not (isinstance(start, str) and isinstance(end, str)):
        return ""
    parse = datetime.fromisoformat
    return f"{(parse(end.replace('Z', '+00:00')) - parse(start.replace('Z', '+00:00'))).total_seconds():.0f}"


def _num(value: object, digits: int = 1) -> str:
    return f"{value:,.{digits}f}" if isinstance(value, (int, float)) else ""


def runs(work: Path) -> list[str]:
    """One table row per run of the export: the job's own TGS, Δ% of its settings vs baseline, verdict, job time."""
    lines = ["| job | item | verdict | TGS | Δ% | step s | job s | flags |", "|---|---|---|---:|---:|---:|---:|---|"]
    for path in sorted(work.glob("export/*.json")):
        for row in json.loads(path.read_text()):
            lines.append(
                f"| {row['job_id']} | `{row['item']}` | {row['verdict']} | {_num(row.get('job_tgs', row['tgs']))} | "
                f"{_num(row['delta_pct'], 2)} | {_num(row['step_seconds'], 4)} | {_seconds(row)} | "
                f"{row['flags'] or ''} |"
            )
    return lines


def trace_shape(trace: Path, top: int = 8) -> list[str]:
    """Which threads of which processes hold the trace's complete events, and the arg keys they
    carry: how a GPU trace is laid out, even when the profile reader cannot use it."""
    data = json.loads(gzip.decompress(trace.read_bytes()))
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    names: dict[tuple[str, object], str] = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            key = (str(e.get("pid")), e.get("tid") if e["name"] == "thread_name" else None)
            names[key] = str((e.get("args") or {}).get("name", ""))
    counts: Counter[tuple[str, object]] = Counter()
    keys: dict[tuple[str, object], set[str]] = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X":
            where = (str(e.get("pid")), e.get("tid"))
            counts[where] += 1
            keys.setdefault(where, set()).update((e.get("args") or {}).keys())
    return [
        f"  - {names.get((pid, None), pid)} / {names.get((pid, tid), tid)}: {n} events; args "
        + ", ".join(sorted(keys[(pid, tid)])[:12])
        for (pid, tid), n in counts.most_common(top)
    ]


def evidence(work: Path) -> list[str]:
    """Per job dir with a dump or a trace: what the evidence code reads in them."""
    lines: list[str] = []
    for job in sorted(
        {p.parent for p in work.glob("store/**/xla_dump")}
        | {p for p in work.glob("store/*/jobs/*") if any(p.rglob("*.trace.json.gz"))}
    ):
        lines.append(f"### `{job.relative_to(work)}`")
        dump = hlo.find_train_step_dump(str(p) for p in job.rglob("*after_optimizations.txt"))
        found: tuple[hlo.Collective, ...] = ()
        if dump:
            text = Path(dump).read_text(errors="replace")
            found = tuple(hlo.collectives(text))
            rows = inventory(found)
            lines.append(f"- HLO `{Path(dump).name}`: {describe(kernel_inventory(text))}")
            lines.append("- collectives: " + (", ".join(f"{r.kind.value} {r.count}" for r in rows) or "none"))
        for trace in sorted(job.rglob("*.trace.json.gz"))[:1]:
            try:
                lines += [
                    f"- trace `{trace.name}` layout (process / thread: complete events; arg keys):",
                    *trace_shape(trace),
                ]
                p = summarize(trace.read_bytes(), op_kinds=dict(op_kinds(found)) or None)
            except (OSError, ValueError, ProfileError) as error:
                lines.append(f"- profile `{trace.name}`: not readable: {error}")
                continue
            lines.append(
                f"- profile `{trace.name}`: {p.steps} steps of `{p.module}` on {p.devices} device(s); "
                f"step {p.step_ms:.2f} ms = compute {p.compute_ms:.2f} + collectives "
                f"{p.collective_ms:.2f} + idle {p.idle_ms:.2f} ms; steps "
                + ", ".join(f"{ms:.2f}" for ms in p.step_ms_each)
            )
            lines += [f"  - `{o.name}` ({o.kind}): {o.ms:.3f} ms, {o.calls:g} calls / step" for o in p.top_ops[:6]]
    return lines or ["(no HLO dump or profile in the store)"]


def main(work: Path) -> int:
    report = next(iter(sorted(work.glob("*-tuning.md"))), None)
    markdown = report.read_text() if report else ""
    log_path, gpu_path = work / "pytest.log", work / "gpu.txt"
    log = log_path.read_text(errors="replace").strip().splitlines() if log_path.exists() else []
    gpu = gpu_path.read_text().strip() if gpu_path.exists() else "(unknown)"
    print("# GPU cell run\n")
    print(f"Machine: {gpu}\n\npytest: {log[-1] if log else '(no log)'}\n")
    print("## Runs (TGS = tokens/s/device, steady state)\n")
    print("\n".join(runs(work)))
    print("\n## TL;DR (from the report)\n")
    print(_section(markdown, "TL;DR"))
    print("\n## Recipe (from the report)\n")
    print(_section(markdown, "Recommended deployment"))
    print("\n## Evidence read by the package\n")
    print("\n".join(evidence(work)))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
