"""The image gate's own report, `<MODEL_TAG>-gate.md` (pure): its verdict, what it compared (the
new image and the lock's, each with what it runs on), what failed and every gate run.

A gate run never rewrites the sweep's `<MODEL_TAG>-tuning.md`: the tuning report is the sweep's
deliverable, the gate's verdict is a different question (did the new image keep the recipe?).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from html import escape

from ..results import JobResult, RunKind
from ..shareable import markdown_code, markdown_text
from ..verdict.gate_flags import LockedFlag
from ..verdict.lock import Lock
from .repair import Repair
from .repair import render_html as repair_html
from .repair import render_section as render_repair


class Outcome(Enum):
    """How one gate item ended, as the terminal showed it."""

    PASSED = "passed"
    FAILED = "failed"
    ADVISORY = "failed (advisory)"  # --xlatune-gate-advisory: an expected failure (x), exit code 0
    SKIPPED = "skipped"


@dataclass(frozen=True)
class GateItem:
    item: str  # e.g. gate::fast[sparse]
    outcome: Outcome
    message: str = ""  # the failure or skip reason as the terminal printed it
    # What the gate warned of, as the terminal printed it after the item's name (`gate::…: `): a
    # pass on the interval despite the odds, numerics changed under --xlatune-numerics=warn.
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class GateCell:
    """What the report needs of one gated cell."""

    cell_id: str
    lock_file: str
    lock: Lock
    new_image: str  # "" = the session's default image
    new_measured_on: str
    old_measured_on: str  # what the lock's image runs on today ("" unknown)
    items: tuple[GateItem, ...]
    runs: tuple[JobResult, ...]  # the gate's stored runs (this session's)
    flags: tuple[LockedFlag, ...] = ()  # each locked setting on the new image (verdict/gate_flags.py)
    repair: Repair | None = None  # --xlatune-gate-repair, when the gate failed


def verdict(items: Sequence[GateItem]) -> str:
    """PASSED, FAILED, FAILED (advisory) or INCOMPLETE, with the counts behind it."""
    failed = [i for i in items if i.outcome is Outcome.FAILED]
    advisory = [i for i in items if i.outcome is Outcome.ADVISORY]
    passed = [i for i in items if i.outcome is Outcome.PASSED]
    if failed or advisory:
        word = "FAILED" if failed else "FAILED (advisory: reported, the exit code stays 0)"
        return f"{word}: {len(failed) + len(advisory)} of {len(items)} gate item(s) failed"
    if items and len(passed) == len(items):
        warned = sum(1 for i in passed if i.warnings)
        note = f" ({warned} with a warning: see *Warnings*)" if warned else ""
        return f"PASSED: all {len(items)} gate item(s) passed{note}; the locked recipe holds on the new image"
    return f"INCOMPLETE: {len(passed)} of {len(items)} gate item(s) passed, none failed, the rest did not run"


def _code(text: str) -> str:
    """A fenced block: log and failure text never becomes markdown."""
    return "```text\n" + text.replace("```", "'''").rstrip() + "\n```"


def _cell_text(text: str) -> str:
    """A value from a lock, an option, the interpreter or a log as markdown text: one line, no
    HTML element, link, code span or table-cell break (shareable.markdown_text)."""
    return markdown_text(text)


def _flag_text(flag: LockedFlag) -> str:
    return (
        f"{markdown_code(flag.setting)} \\[{_cell_text(flag.config_tag)}\\]: "
        f"{_cell_text(flag.state.value)}: {_cell_text(flag.why)}"
    )


def render_cell(gate: GateCell) -> str:
    """One cell's section."""
    lock = gate.lock
    lines = [
        f"## Image gate: {_cell_text(gate.cell_id)}",
        "",
        f"**Verdict: {verdict(gate.items)}**",
        "",
        "| | image | runs on |",
        "|---|---|---|",
        f"| new | {_cell_text(gate.new_image or '(default)')} "
        f"| {_cell_text(gate.new_measured_on or '(not recorded)')} |",
        f"| lock ({_cell_text(lock.date)}, {_cell_text(gate.lock_file)}) | {_cell_text(lock.image or '(default)')} "
        f"| {_cell_text(lock.measured_on or '(not recorded in the lock)')} |",
    ]
    controls = any(r.kind in (RunKind.GATE_OLD_BASELINE, RunKind.GATE_OLD_RECIPE) for r in gate.runs)
    if controls and gate.old_measured_on and lock.measured_on and gate.old_measured_on != lock.measured_on:
        lines.append(f"\nThe lock's image runs on {_cell_text(gate.old_measured_on)} today (the controls below).")
    lines += [
        "",
        "Locked recipes: "
        + "; ".join(
            f"{_cell_text(r.profile)} \\[{_cell_text(r.config_tag)}\\] {r.delta_pct:+.2f} % vs baseline at lock time"
            for r in lock.recipes
        )
        + f" (the recipe the sweep locked in {_cell_text(gate.lock_file)} and this gate replays; its figures at"
        " lock time are for context: each gate run is compared with its control, run just before it"
        " on the lock's image)",
    ]
    if gate.flags:
        lines += ["", "### Locked flags on the new image", ""] + [f"- {_flag_text(f)}" for f in gate.flags]
    bad = [i for i in gate.items if i.outcome in (Outcome.FAILED, Outcome.ADVISORY)]
    if bad:
        lines += ["", "### What failed", ""]
        for item in bad:
            lines += [f"{markdown_code(item.item)} ({item.outcome.value}):", "", _code(item.message), ""]
    warned = [i for i in gate.items if i.warnings]
    if warned:
        lines += ["", "### Warnings", ""]
        for item in warned:
            lines += [f"{markdown_code(item.item)} ({item.outcome.value}):", "", _code("\n".join(item.warnings)), ""]
    skipped = [i for i in gate.items if i.outcome is Outcome.SKIPPED]
    if skipped:
        lines += ["", "### Skipped", ""] + [f"- {markdown_code(i.item)}: {_cell_text(i.message)}" for i in skipped]
    lines += ["", "### Gate runs", ""]
    if not gate.runs:
        lines.append("None: this gate ran no job of the cell (an earlier gate's runs are not its own).")
    else:
        lines += [
            "Each run on the new image right after its control: the same settings on the lock's image"
            " (`-oldimage`), in the same time window. TGS is the run's steady-state tokens/s/device;"
            " *verdict* is how its job ended, not the gate's verdict (above).",
            "",
            "| item | image | TGS | job | verdict |",
            "|---|---|---|---|---|",
        ]
    for run in gate.runs:
        tgs = f"{run.tgs:.1f}" if run.tgs is not None else "–"
        lines.append(
            f"| {_cell_text(run.item)} | {_cell_text(run.image or '(default)')} | {tgs} | {run.job_id} "
            f"| {run.verdict.value} |"
        )
    return "\n".join(lines) + "\n" + (render_repair(gate.repair) if gate.repair else "")


def render_document(model_tag: str, cells: Sequence[GateCell]) -> str:
    """`<MODEL_TAG>-gate.md`: one section per gated cell."""
    head = (
        f"# {model_tag}: image gate\n\nWritten by `pytest --xlatune-gate`; the sweep's "
        f"`{model_tag}-tuning.md` is left as it was.\n"
    )
    return head + "".join("\n" + render_cell(cell) for cell in cells)


def render_html(cells: Sequence[GateCell]) -> str:
    """The verdicts for the pytest-html summary (escaped: messages quote job logs)."""
    parts = []
    for gate in cells:
        failed = "".join(
            f"<li><code>{escape(i.item)}</code>: <pre>{escape(i.message)}</pre></li>"
            for i in gate.items
            if i.outcome in (Outcome.FAILED, Outcome.ADVISORY)
        )
        warned = "".join(
            f"<li><code>{escape(i.item)}</code> ({escape(i.outcome.value)}): "
            f"<pre>{escape(chr(10).join(i.warnings))}</pre></li>"
            for i in gate.items
            if i.warnings
        )
        parts.append(
            f'<div class="xlatune-gate"><h2>Image gate: {escape(gate.cell_id)}</h2>'
            f"<p><strong>{escape(verdict(gate.items))}</strong></p>"
            f"<p>New image {escape(gate.new_image or '(default)')}: "
            f"{escape(gate.new_measured_on or '(not recorded)')}<br>"
            f"Lock ({escape(gate.lock.date)}) image {escape(gate.lock.image or '(default)')}: "
            f"{escape(gate.lock.measured_on or '(not recorded in the lock)')}</p>"
            + (f"<ul>{failed}</ul>" if failed else "")
            + (f"<p>Warnings:</p><ul>{warned}</ul>" if warned else "")
            + (
                "<p>Locked flags on the new image:</p><ul>"
                + "".join(f"<li>{escape(f.text())}</li>" for f in gate.flags)
                + "</ul>"
                if gate.flags
                else ""
            )
            + (repair_html(gate.repair) if gate.repair else "")
            + "</div>"
        )
    return "".join(parts)
