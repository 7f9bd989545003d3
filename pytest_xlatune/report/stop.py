"""The STOP message in the xla-tuning skill's format (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from ..cell.values import Cell
from ..results import JobResult, RunKind
from ..verdict import verdicts


def stop_message(
    cell: Cell,
    reason: str,
    nodelist: str,
    results: Sequence[JobResult],
    pending: Sequence[str],
    failing_nodes: Sequence[str] = (),
    recovery: str = "",
) -> str:
    """`[xla-tuning STOP] …`: enough for the user to fix the cluster or decide how to resume."""
    measured = [r for r in results if r.measured and r.tgs is not None]
    profiles = sorted((r for r in measured if r.kind is RunKind.PROFILE), key=lambda r: r.tgs or 0.0, reverse=True)
    lines = [f"[xla-tuning STOP] {cell.model_tag} {cell.parallelism.text} sweep halted", "", f"Reason: {reason}"]
    if failing_nodes:
        lines.append(
            f"Failing node(s): {', '.join(failing_nodes)}; recovery attempted: "
            f"{recovery or 'none'}; outcome: did not take"
        )
    lines += [
        "",
        "Sweep state at stop:",
        f"  - Nodelist: {nodelist}",
        f"  - Profiles tested so far: {len(profiles)}" + (" (top 3 below)" if profiles else ""),
    ]
    for i, r in enumerate(profiles[:3]):
        cmp = verdicts.compare([r.tgs or 0.0], measured, r.config_tag)
        delta = f" (Δ {cmp.delta_pct:+.2f} % vs baseline-deployed)" if cmp else ""
        prefix = "Best so far: " if i == 0 else ""
        lines.append(f"  - {prefix}{r.profile} @ {r.tgs:.1f}{delta}")
    lines.append(f"  - Pending profiles in queue: {', '.join(pending) if pending else 'none'} (cancelled by stop)")
    ids = sorted(int(r.job_id) for r in results if r.job_id.isdigit())
    if ids:
        lines += ["", f"Artifacts: outputs/{ids[0]}-* through outputs/{ids[-1]}-*"]
    lines.append("Awaiting your decision before resuming (a rerun resumes from the results store).")
    return "\n".join(lines)
