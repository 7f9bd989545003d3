"""The sweep's progress messages for `--xlatune-notify` (pure): the xla-tuning skill's milestones —
kickoff, every positive result, mid-point, final — from the item reports the session sees.

A STOP has its own message (engine/session.py, `stop_message`). Each milestone is said once per
cell and session; a positive result once per item (its later reruns' reports do not repeat it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..cell.values import Cell
from ..paths import lock_path, report_path
from ..report.files import Output
from ..report.final import status_text


@dataclass
class Milestones:
    """What each cell has already said (the session holds one)."""

    started: set[Path] = field(default_factory=set)
    halfway: set[Path] = field(default_factory=set)
    positive: set[tuple[Path, str]] = field(default_factory=set)

    def after_item(
        self, cell: Cell, item: str, props: Mapping[str, object], ran: int, planned: int, rerun: bool = False
    ) -> list[str]:
        """The messages an item's call report brings: kickoff at the cell's first, its own
        positive result, the mid-point when half the planned items have run (`ran` counts this
        one; `planned` 0 when this process did not collect the cell, as an xdist controller).
        A re-run of measured settings (`rerun`: the winner's evidence run), a shared duplicate
        and a result reused from the store bring no positive result: theirs was said."""
        head = f"{cell.model_tag} {cell.parallelism.text} ({cell.path.name})"
        out = []
        if cell.path not in self.started:
            self.started.add(cell.path)
            of = f" of {planned} item(s)" if planned else ""
            out.append(f"{head}: xla-tuning sweep started{of}; first item {item}")
        again = rerun or props.get("xlatune_shared") or props.get("xlatune_reused")
        if props.get("xlatune_direction") == "better" and not again and (cell.path, item) not in self.positive:
            self.positive.add((cell.path, item))
            out.append(f"{head}: positive result: {item} {status_text(props)}")
        if planned >= 4 and ran * 2 >= planned and cell.path not in self.halfway:
            self.halfway.add(cell.path)
            better = sorted(name for path, name in self.positive if path == cell.path)
            found = f"better so far: {', '.join(better)}" if better else "nothing better than the baseline so far"
            out.append(f"{head}: mid-point: {ran} of {planned} items done; {found}")
        return out

    def final(self, cell: Cell, ran: int, outputs: Sequence[Output], root: Path, report_dir: Path) -> str:
        """The cell's closing message: how many items ran and what the session wrote for it (its
        tuning and gate reports' and its lock's lines, as the terminal shows them)."""
        head = f"{cell.model_tag} {cell.parallelism.text} ({cell.path.name})"
        tag = cell.model_tag  # by name: another cell's model tag may begin with this one's
        own = {report_path(report_dir, tag), report_path(report_dir, tag, "zh"), report_dir / f"{tag}-gate.md"}
        mine = [o.line(root) for o in outputs if o.path in own or o.path == lock_path(cell.path)]
        written = "; ".join(mine) if mine else "no report written"
        return f"{head}: sweep finished: {ran} item(s) done this session (run, reused or skipped); {written}"
