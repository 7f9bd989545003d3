"""The repair section of `<MODEL_TAG>-gate.md` and of the HTML report (pure): the locked recipe
on the new image vs the proposed one, each with its 95 % interval vs the new image's baseline,
the candidates tried, the collective-inventory diff and the node-hours the repair spent."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from html import escape

from ..shareable import markdown_code, markdown_text


class RepairVerdict(Enum):
    """How a gate run with --xlatune-gate-repair ended for one cell (and its exit code)."""

    PASSED = "passed"  # exit 0: nothing to repair
    PROPOSED = "regressed, repair proposed"  # exit 6
    NONE_FOUND = "regressed, no repair found"  # exit 1


EXIT_CODES = {RepairVerdict.PASSED: 0, RepairVerdict.PROPOSED: 6, RepairVerdict.NONE_FOUND: 1}


@dataclass(frozen=True)
class Figure:
    """A recipe's TGS on the new image and its Δ % vs the new image's baseline, with the interval."""

    profile: str
    xla_flags: tuple[str, ...]
    tgs: float | None
    delta_pct: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    jobs: tuple[str, ...] = ()

    def text(self) -> str:
        if self.tgs is None:
            return "not measured"
        line = f"{self.tgs:.1f} TGS"
        if self.delta_pct is not None and self.ci_low_pct is not None and self.ci_high_pct is not None:
            line += f" {self.delta_pct:+.2f} % [{self.ci_low_pct:+.2f}, {self.ci_high_pct:+.2f}] vs the baseline"
        return line + (f" (jobs {', '.join(self.jobs)})" if self.jobs else "")


@dataclass(frozen=True)
class Repair:
    cell_id: str
    reason: str  # why it ran: the failed gate items, the inert flags
    verdict: RepairVerdict
    locked_at_lock_time: Figure  # the lock's own figure (on the lock's image)
    locked_now: Figure  # the locked recipe on the new image (the gate's run)
    proposed: Figure | None
    proposed_file: str  # "" none written
    why_not: str  # no proposal: why
    candidates: tuple[tuple[str, str, str], ...]  # (profile, why tried, what it measured)
    diff_lines: tuple[str, ...]  # collective inventory, lock's winner → proposed winner
    diff_note: str  # why there is no diff ("" when there is one)
    node_hours: float
    budget: str


def _cell(text: str) -> str:
    """Markdown text: the reason, measurements and inventory lines quote logs and flags."""
    return markdown_text(text)


def _figure(figure: Figure) -> str:
    """A figure's own text (numbers, `[low, high]`, job ids): ours, printed as it reads."""
    return figure.text().replace("|", "\\|")


def render_section(repair: Repair) -> str:
    """`### Repair` of one cell's gate section."""
    lines = [
        "",
        "### Repair",
        "",
        f"**{repair.verdict.value}** (exit code {EXIT_CODES[repair.verdict]}); ran because {_cell(repair.reason)}.",
        "",
        f"Budget: {repair.budget}; spent {repair.node_hours:.3f} node-hours on the new image.",
        "",
        "| recipe | flags | TGS on the new image (95 % interval vs its baseline) |",
        "|---|---|---|",
        f"| locked: {_cell(repair.locked_now.profile)} | {_cell(' '.join(repair.locked_now.xla_flags))} "
        f"| {_figure(repair.locked_now)} (at lock time {_figure(repair.locked_at_lock_time)}) |",
    ]
    if repair.proposed is not None:
        lines.append(
            f"| proposed: {_cell(repair.proposed.profile)} | {_cell(' '.join(repair.proposed.xla_flags))} "
            f"| {_figure(repair.proposed)} |"
        )
    lines += [
        "",
        (
            f"Proposed lock: {markdown_code(repair.proposed_file)} "
            "(replace the lock with it to deploy; the gate replays it)."
            if repair.proposed_file
            else f"No proposed lock: {_cell(repair.why_not)}."
        ),
        "",
        "Candidates tried:",
        "",
    ]
    lines += [f"- {markdown_code(p)} ({_cell(why)}): {_cell(measured)}" for p, why, measured in repair.candidates] or [
        "- none"
    ]
    lines += ["", "Collective inventory, the lock's winner → the proposed winner:", ""]
    lines += [f"- {_cell(line)}" for line in repair.diff_lines] or [f"- {_cell(repair.diff_note)}"]
    return "\n".join(lines) + "\n"


def render_html(repair: Repair) -> str:
    items = "".join(
        f"<li><code>{escape(p)}</code> ({escape(why)}): {escape(m)}</li>" for p, why, m in repair.candidates
    )
    diff = "".join(f"<li>{escape(line)}</li>" for line in repair.diff_lines) or f"<li>{escape(repair.diff_note)}</li>"
    proposed = (
        f"<p>Proposed: <code>{escape(repair.proposed.profile)}</code> {escape(repair.proposed.text())}; "
        f"written to <code>{escape(repair.proposed_file)}</code></p>"
        if repair.proposed is not None and repair.proposed_file
        else f"<p>No proposed lock: {escape(repair.why_not)}</p>"
    )
    return (
        f"<h3>Repair: {escape(repair.verdict.value)}</h3><p>Ran because {escape(repair.reason)}. Budget: "
        f"{escape(repair.budget)}; spent {repair.node_hours:.3f} node-hours.</p>"
        f"<p>Locked <code>{escape(repair.locked_now.profile)}</code> on the new image: "
        f"{escape(repair.locked_now.text())}</p>{proposed}<ul>{items}</ul><ul>{diff}</ul>"
    )
