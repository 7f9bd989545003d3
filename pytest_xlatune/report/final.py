"""The final figure of every item that ran: the item line's words, the terminal summary's
corrections and the junit rewrite (one figure per settings: verdict/figures.py).

An item prints its figure when it ends; a later run of the same settings (a confirmation, a
repeat) changes that figure. At the end of the session the terminal summary prints the final
figure of every item whose line said otherwise, and the junit file gets the final properties.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..safefs import read_bytes_regular, read_text_nofollow, write_atomic
from ..verdict import figures, stats
from .build import CellReport

# The junit properties of a figure: the same keys as the item's user_properties at run time.
FIGURE_KEYS = (
    "xlatune_tgs",
    "xlatune_runs",
    "xlatune_delta_pct",
    "xlatune_delta_ci",
    "xlatune_direction",
    "xlatune_judged",
    "xlatune_unstable",
    "xlatune_step_seconds",
)


def figure_properties(found: figures.Figure | None) -> list[tuple[str, object]]:
    """The FIGURE_KEYS properties of a figure (None: no measurement)."""
    c = found.comparison if found else None
    return list(
        zip(
            FIGURE_KEYS,
            (
                found.tgs if found else None,
                found.runs_text() if found else "",
                c.delta_pct if c else None,
                (c.ci_low_pct, c.ci_high_pct) if c else None,
                stats.direction(c) if c else None,
                stats.words(c) if c else None,
                bool(found and found.unstable),
                found.step_seconds if found else None,
            ),
            strict=True,
        )
    )


def status_text(props: Mapping[str, object]) -> str:
    """The figure words of an item line: `600.5 TGS +1.23 % [-0.4, +2.9] within noise (600.5 =
    mean of 700.5, 500.6; jobs 6, 7)`; "" without a figure."""
    tgs = props.get("xlatune_tgs")
    if not isinstance(tgs, (int, float)):
        return ""
    text = f"{tgs:.1f} TGS"
    delta, interval = props.get("xlatune_delta_pct"), props.get("xlatune_delta_ci")
    if isinstance(delta, (int, float)):
        text += f" {delta:+.2f} %"
    elif props.get("xlatune_needs"):
        text += " (no baseline: see the end)"
    if isinstance(interval, (tuple, list)) and len(interval) == 2:
        words = judged(props)
        text += f" [{interval[0]:+.1f}, {interval[1]:+.1f}] {words}"
    runs = str(props.get("xlatune_runs") or "")
    if " = mean of " in runs:
        text += f" ({runs})"
    return text


def judged(props: Mapping[str, object]) -> str:
    """The verdict's words (stats.words, the `xlatune_judged` property) of a figure's properties."""
    said = props.get("xlatune_judged")
    if isinstance(said, str) and said:
        return said
    return "unstable" if props.get("xlatune_unstable") else str(props.get("xlatune_direction") or "").replace("_", " ")


@dataclass(frozen=True)
class Final:
    """An item's final figure, named as junit names it (its cell file and item)."""

    cell: str  # the cell path as the item's xlatune_cell property holds it
    item: str
    figure: figures.Figure

    def props(self) -> dict[str, object]:
        return dict(figure_properties(self.figure))


def finals(reports: Sequence[CellReport], items: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Final]:
    """The final figure of each (cell path, item) of `items`, from the cells' stored results."""
    by_cell = {str(report.cell.path): figures.by_item(report.results) for report in reports}
    out = {}
    for cell, item in items:
        found = by_cell.get(cell, {}).get(item)
        if found is not None:
            out[(cell, item)] = Final(cell, item, found)
    return out


def corrections(
    printed: Mapping[tuple[str, str], tuple[str, Mapping[str, object]]], final: Mapping[tuple[str, str], Final]
) -> list[str]:
    """`<node id>: <final words>` for each item whose line (node id, the properties it printed;
    empty: it printed no figure) said otherwise."""
    lines = []
    for key, (nodeid, props) in printed.items():
        now = final.get(key)
        said = status_text(props) if props else ""
        if now is not None and said:
            words = status_text({**props, **now.props()})
            if words != said:
                lines.append(f"{nodeid}: {words}")
    return lines


def rewrite_junit(path: Path, final: Mapping[tuple[str, str], Final]) -> bool:
    """Give each testcase of a junit file its item's final figure properties (as pytest writes
    them: str() of the value); True when the file changed. A symbolic link there is left as
    pytest wrote through it: nothing of ours is written through a link (read without following
    one, replaced in one rename: a link put there meanwhile is replaced, never followed)."""
    try:
        raw = read_bytes_regular(path, follow=False, what="a junit file")
        root = ET.fromstring(raw) if raw is not None else None
    except (OSError, ET.ParseError):
        return False
    if root is None:
        return False
    changed = False
    for case in root.iter("testcase"):
        holder = case.find("properties")
        if holder is None:
            continue
        props = {p.get("name"): p for p in holder.findall("property")}
        cell, item = props.get("xlatune_cell"), props.get("xlatune_item")
        if cell is None or item is None or "xlatune_tgs" not in props:
            continue
        now = final.get((cell.get("value") or "", item.get("value") or ""))
        if now is None:
            continue
        for name, value in now.props().items():
            element = props.get(name)
            if element is None:
                element = ET.SubElement(holder, "property", {"name": name})
            if element.get("value") != str(value):
                element.set("value", str(value))
                changed = True
    if changed:
        out = io.BytesIO()
        ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
        try:
            write_atomic(path, out.getvalue().decode("utf-8"))
        except OSError:
            return False
    return changed


# pytest-html 4's page opens on its Environment table (the Python, platform and plugin versions);
# the reader should open on the sweep's TL;DR, warnings, patch and chart (the summary's prefix).
_ENVIRONMENT = re.compile(
    r'[ \t]*<div id="environment-header">\s*<h2>Environment</h2>\s*</div>\s*'
    r'<table id="environment"></table>\n?'
)
_FOOTER = "\n  <footer>"


def environment_last(text: str) -> str:
    """The page with pytest-html's Environment block moved below the results table, just above
    the footer (whose script fills it by id); the page as it was when it has no such block."""
    found = _ENVIRONMENT.search(text)
    footer = text.rfind(_FOOTER)
    if found is None or footer < found.end():
        return text
    block = found.group(0).strip()
    return text[: found.start()] + text[found.end() : footer] + "\n    " + block + text[footer:]


def rewrite_html(path: Path, cells: Sequence[tuple[str, str, str, str]]) -> bool:
    """Give the per-item cells of a pytest-html report their final figure: for each (node id,
    cell class, text written at run time, final text), the first cell of that class after each
    place the node id appears, when it still holds the run-time text. pytest-html keeps its rows
    in an escaped JSON blob; figures are plain ASCII, the same in every escaping. The page's
    Environment block goes below the results (environment_last). True: changed. A symbolic
    link there is left as pytest wrote through it: read without following one, replaced in one
    rename (safefs.write_atomic), so a link put there meanwhile is replaced, never followed."""
    try:
        before = read_text_nofollow(path)
    except OSError:
        return False
    if before is None:
        return False
    text = environment_last(before)
    for nodeid, marker, old, new in cells:
        if old == new or not old:
            continue
        at = text.find(nodeid)
        while at >= 0:
            cell = text.find(marker, at)
            end = cell + len(marker) + 40 + len(old)
            found = text.find(old, cell, end) if cell >= 0 else -1
            if found >= 0:
                text = text[:found] + new + text[found + len(old) :]
            at = text.find(nodeid, at + len(nodeid))
    if text == before:
        return False
    try:
        write_atomic(path, text)
    except OSError:
        return False
    return True


def teststatus(report: pytest.TestReport) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
    """An item line's category, letter and words: `PASSED 600.5 TGS …` (`REUSED …` for a stored
    run); None for a report without a figure (pytest's own words)."""
    if report.when != "call":
        return None
    props = dict(report.user_properties)
    if "xlatune_tgs" not in props or props["xlatune_tgs"] is None or not report.passed:
        return None
    text = status_text(props)  # the terminal summary repeats it when a later run changed it
    if props.get("xlatune_numerics"):
        text += " — numerics changed: " + str(props["xlatune_numerics"])
    if props.get("xlatune_inert"):
        text += f" ({props['xlatune_inert']})"
    elif props.get("xlatune_shared"):
        text += f" (same effective settings as {props['xlatune_shared']}: shared)"
    if props.get("xlatune_stopped"):
        text += f" ({props['xlatune_stopped']})"
    word = ("REUSED " if props.get("xlatune_reused") else "PASSED ") + text
    markup = {"yellow": True} if props.get("xlatune_numerics") or props.get("xlatune_unstable") else {"green": True}
    return report.outcome, "r" if props.get("xlatune_reused") else ".", (word, markup)
