"""`<MODEL_TAG>-gate.md` prints values from an option (the new image), the interpreter, the lock
(edited by hand) and job logs (skip and repair reasons): as text, never as markup."""

from __future__ import annotations

import re

from pytest_xlatune.report.gate import GateCell, GateItem, Outcome, render_cell
from pytest_xlatune.report.repair import Figure, Repair, RepairVerdict
from pytest_xlatune.verdict.gate_flags import FlagState, LockedFlag
from pytest_xlatune.verdict.lock import Lock, LockedRecipe

EVIL = "<img src=x onerror=alert(1)> [click](http://evil.example/) | `tick"

RECIPE = LockedRecipe("default", "fast", ("--xla_a=1",), (), (), 1100.0, 9.0, 11.0, 1000.0, 10.0, ("6",))
LOCK = Lock("m", "FSDP=8", f"/img/{EVIL}", "n", "2026-12-01", (RECIPE,), measured_on=f"Python 3 ({EVIL})")
REPAIR = Repair(
    cell_id="cells/m.yml",
    reason=f"gate::fast[default] failed: {EVIL}",
    verdict=RepairVerdict.NONE_FOUND,
    locked_at_lock_time=Figure("fast", ("--xla_a=1",), 1100.0),
    locked_now=Figure("fast", ("--xla_a=1",), 990.0),
    proposed=None,
    proposed_file="",
    why_not=f"no candidate beat the baseline: {EVIL}",
    candidates=(("opt", f"top 3: {EVIL}", f"failed: {EVIL}"),),
    diff_lines=(f"all-gather {EVIL}",),
    diff_note="",
    node_hours=0.1,
    budget="1nh",
)


def _rendered_markup(markdown: str) -> str:
    """What a markdown viewer would interpret: the text outside code spans and fences."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return re.sub(r"(?<![\\`])(`+)(?!`).*?(?<!`)\1(?!`)", "", text)  # a \` opens no span


def test_values_from_options_locks_and_logs_are_text_in_the_gate_report() -> None:
    gate = GateCell(
        cell_id="cells/m.yml",
        lock_file="cells/m.lock.json",
        lock=LOCK,
        new_image=f"/new/{EVIL}",
        new_measured_on=f"Python 3 ({EVIL})",
        old_measured_on=f"Python 2 ({EVIL})",
        items=(
            GateItem("gate::fast[default]", Outcome.FAILED, f"regressed: {EVIL}\n```\n<script>x</script>"),
            GateItem("gate::slow[default]", Outcome.SKIPPED, f"skipped: {EVIL}"),
        ),
        runs=(),
        flags=(LockedFlag("default", "--xla_a=1", FlagState.REMOVED, f"XLA said: {EVIL}"),),
        repair=REPAIR,
    )
    markdown = render_cell(gate)
    outside = _rendered_markup(markdown)
    assert "<img" not in outside and "<script" not in outside
    assert not re.search(r"(?<!\\)\]\(http", outside)  # no link: its brackets are escaped
    assert "&lt;img src=x onerror=alert(1)&gt; \\[click\\](http://evil.example/) \\| \\`tick" in outside
    # Each table row still has its cells (no `|` from a value split one).
    for line in markdown.splitlines():
        if line.startswith("| new") or line.startswith("| lock"):
            assert len(re.findall(r"(?<!\\)\|", line)) == 4, line


def test_the_gate_report_says_what_a_control_its_verdict_column_and_the_lock_are() -> None:
    # A newcomer read "success" in a column named verdict under a PASSED/FAILED verdict, and
    # pairs of -oldimage rows, with nothing saying what either was.
    from tests import report_cases as cases

    jobs = cases.Jobs()
    old = jobs.add("gate::fast-oldimage", "gate_old_recipe", "fast", 1000.0, config_tag="default")
    new = jobs.add("gate::fast", "profile", "fast", 990.0, config_tag="default")
    cell = GateCell("cells/m.yml", "cells/m.lock.json", LOCK, "/new", "", "", (), (old, new))
    runs = render_cell(cell).split("### Gate runs", 1)[1]
    legend = runs.split("| item |", 1)[0]
    assert "(`-oldimage`)" in legend and "how its job ended, not the gate's verdict" in legend
    # and what "locked" means where the locked recipe's figure is given
    locked = render_cell(cell).split("Locked recipes: ", 1)[1].split("\n", 1)[0]
    assert "the recipe the sweep locked in cells/m.lock.json and this gate replays" in locked
