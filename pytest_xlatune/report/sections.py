"""Cell sections of a `<MODEL_TAG>-tuning.md` and the sign flips between them (pure; no IO).

A report file holds one section per cell, each between two HTML comments (invisible when the
markdown is rendered):

    <!-- xlatune:cell FSDP=8 cells/demo_fsdp8.yml -->
    <!-- xlatune:data {"cell": "cells/demo_fsdp8.yml", "parallelism": "FSDP=8", ...} -->
    # demo — XLA / NCCL tuning, FSDP=8
    ...
    <!-- /xlatune:cell -->

The cell file path (relative to the rootdir) is the section's identity: re-rendering a cell
replaces its own section and keeps every other section and any hand-written text verbatim.
The data comment is a CellSummary as JSON: each leaderboard profile's flags and Δ% with its
interval. It makes the file self-sufficient for the "Sign flips vs other parallelisms" table:
the other parallelism's sweep may have run weeks ago, from another checkout or store, and its
section still carries the numbers to compare against. `<` and `>` are escaped in that JSON
(`\\u003c`, `\\u003e`), so no flag or profile name can close the comment early.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from .data import ReportData

SUMMARY_VERSION = 1
CLOSE = "<!-- /xlatune:cell -->"
SEPARATOR = "\n---\n\n"
_OPEN = re.compile(r"^<!-- xlatune:cell (?P<parallelism>\S+) (?P<cell>.+?) -->[ \t]*$", re.M)
_CLOSE = re.compile(r"^<!-- /xlatune:cell -->[ \t]*\n?", re.M)
_DATA = re.compile(r"^<!-- xlatune:data (?P<json>\{.*\}) -->[ \t]*$", re.M)
# What the renderer wrote before sections had markers: replaced, not kept, on the next render.
_LEGACY = re.compile(r"\A# \S+ — XLA / NCCL tuning, \S+\n")
# Pipeline parallelism is the axis whose recipes flip sign most often: guard on it first.
_GUARD_KEYS = ("dcn_pipeline_parallelism", "ici_tensor_parallelism", "dcn_fsdp_parallelism")


@dataclass(frozen=True)
class FlagResult:
    """One leaderboard profile of a cell, as the sign-flip table compares it."""

    profile: str
    flags: str
    tgs: float
    delta_pct: float | None
    ci_low: float | None
    ci_high: float | None
    direction: str  # better | worse | within_noise | "" (stats.Direction values)


@dataclass(frozen=True)
class CellSummary:
    """What a cell section keeps in its data comment."""

    cell: str  # the cell file relative to the rootdir: the section's identity
    parallelism: str
    config_tag: str
    date: str
    passthrough: tuple[tuple[str, str], ...] = ()  # the parallelism's MaxText overrides
    winner: str | None = None
    rows: tuple[FlagResult, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.parallelism} `{self.config_tag}`"

    def row(self, flags: str) -> FlagResult | None:
        return next((r for r in self.rows if r.flags == flags), None)

    def to_json(self) -> str:
        text = json.dumps(
            {"v": SUMMARY_VERSION, **asdict(self)}, ensure_ascii=False, sort_keys=True, separators=(",", ":")
        )
        return text.replace("<", "\\u003c").replace(">", "\\u003e")

    @classmethod
    def from_json(cls, text: str) -> CellSummary | None:
        """The summary in a data comment; None when it is unreadable or of another version."""
        try:
            raw = json.loads(text)
            if raw.pop("v", None) != SUMMARY_VERSION:
                return None
            raw["passthrough"] = tuple(tuple(p) for p in raw.get("passthrough", ()))
            raw["rows"] = tuple(FlagResult(**r) for r in raw.get("rows", ()))
            return cls(**raw)
        except (ValueError, TypeError, AttributeError):
            return None


def summarize(data: ReportData, cell_id: str) -> CellSummary:
    """The comparable part of a cell's report: every profile of the leaderboard but the baseline."""
    rows = tuple(
        FlagResult(
            r.profile, r.flags, round(r.tgs, 2), _round(r.delta_pct), _round(r.ci_low), _round(r.ci_high), r.direction
        )
        for r in data.leaderboard
        if r.profile != "baseline-deployed"
    )
    return CellSummary(
        cell=cell_id,
        parallelism=data.cell.parallelism.text,
        config_tag=data.primary,
        date=data.date,
        passthrough=data.cell.parallelism.overrides(),
        winner=data.winner.profile if data.winner else None,
        rows=rows,
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)  # percent: plenty, and stable diffs


# ---- sign flips --------------------------------------------------------------------------


@dataclass(frozen=True)
class SignFlipRow:
    """One flag set measured on this cell and on at least one other parallelism."""

    profile: str
    flags: str
    results: tuple[FlagResult | None, ...]  # one per SignFlips.columns; None: not measured there
    verdict: str  # sign_flip | differs_within_noise | same_sign

    @property
    def flipped(self) -> bool:
        return self.verdict == "sign_flip"


@dataclass(frozen=True)
class Guard:
    """A shell condition on a passthrough key that selects this cell's parallelism."""

    key: str
    op: str  # -le | -eq
    value: str
    against: tuple[str, ...]  # parallelisms where the recipe is worse


@dataclass(frozen=True)
class SignFlips:
    columns: tuple[CellSummary, ...]  # this cell first
    rows: tuple[SignFlipRow, ...]
    winner_conflicts: tuple[tuple[CellSummary, FlagResult], ...] = field(default=())
    guard: Guard | None = None

    @property
    def flip_count(self) -> int:
        return sum(1 for row in self.rows if row.flipped)


def _verdict(results: Sequence[FlagResult]) -> str:
    directions = {r.direction for r in results}
    if {"better", "worse"} <= directions:
        return "sign_flip"
    signs = {(r.delta_pct > 0) - (r.delta_pct < 0) for r in results if r.delta_pct is not None}
    return "differs_within_noise" if {1, -1} <= signs else "same_sign"


def sign_flips(this: CellSummary, others: Sequence[CellSummary]) -> SignFlips | None:
    """Flag-by-flag Δ% of this cell against the other parallelisms; None without another one."""
    columns = [this] + [o for o in others if o.parallelism != this.parallelism]
    if len(columns) < 2:
        return None
    rows = []
    for mine in this.rows:
        results = tuple(c.row(mine.flags) if c is not this else mine for c in columns)
        present = [r for r in results if r is not None]
        if len(present) >= 2:
            rows.append(SignFlipRow(mine.profile, mine.flags, results, _verdict(present)))
    conflicts: list[tuple[CellSummary, FlagResult]] = []
    winner = next((r for r in this.rows if r.profile == this.winner), None)
    if winner is not None:
        for other in columns[1:]:
            theirs = other.row(winner.flags)
            if theirs is not None and theirs.direction == "worse":
                conflicts.append((other, theirs))
    return SignFlips(
        tuple(columns), tuple(rows), tuple(conflicts), _guard(this, [c for c, _ in conflicts]) if conflicts else None
    )


def _guard(this: CellSummary, against: Sequence[CellSummary]) -> Guard | None:
    mine = dict(this.passthrough)
    for key in _GUARD_KEYS:
        if key in mine and all(dict(o.passthrough).get(key, "1") != mine[key] for o in against):
            op = "-le" if key == "dcn_pipeline_parallelism" and mine[key] == "1" else "-eq"
            return Guard(key, op, mine[key], tuple(o.parallelism for o in against))
    return None


# ---- the file: free text and cell sections ----------------------------------------------


@dataclass(frozen=True)
class Section:
    cell: str
    parallelism: str
    text: str  # from the opening marker to the closing one, inclusive, with its newline
    summary: CellSummary | None


@dataclass(frozen=True)
class Document:
    """A report file split into hand-written text (str) and cell sections, in file order."""

    parts: tuple[str | Section, ...]

    @property
    def sections(self) -> list[Section]:
        return [p for p in self.parts if isinstance(p, Section)]

    def summaries(self) -> dict[str, CellSummary]:
        return {s.cell: s.summary for s in self.sections if s.summary is not None}


def parse(text: str) -> Document:
    """Split a report file; an unclosed section runs to the next opening marker or the end."""
    parts: list[str | Section] = []
    position = 0
    while (start := _OPEN.search(text, position)) is not None:
        if start.start() > position:
            parts.append(text[position : start.start()])
        next_open = _OPEN.search(text, start.end())
        limit = next_open.start() if next_open else len(text)
        close = _CLOSE.search(text, start.end(), limit)
        end = close.end() if close else limit
        body = text[start.start() : end]
        data = _DATA.search(body)
        parts.append(
            Section(
                _unmarker_id(start["cell"]),
                start["parallelism"],
                body,
                CellSummary.from_json(data["json"]) if data else None,
            )
        )
        position = end
    if position < len(text):
        tail = text[position:]
        if not parts and _LEGACY.match(tail):
            tail = ""  # a report from before cell markers: regenerated, not kept
        if tail:
            parts.append(tail)
    return Document(tuple(parts))


def _marker_id(cell: str) -> str:
    """The cell id as the marker comment holds it: no `>` (so no `-->` or `--!>` closes the
    comment early, whatever the cell file is called), no line break; `_unmarker_id` reverses it."""
    return cell.replace("&", "&amp;").replace(">", "&gt;").replace("\n", "&#10;").replace("\r", "&#13;")


def _unmarker_id(text: str) -> str:
    return text.replace("&#13;", "\r").replace("&#10;", "\n").replace("&gt;", ">").replace("&amp;", "&")


def wrap(summary: CellSummary, body: str) -> str:
    """A rendered cell body between its markers, with its data comment."""
    return (
        f"<!-- xlatune:cell {summary.parallelism} {_marker_id(summary.cell)} -->\n"
        f"<!-- xlatune:data {summary.to_json()} -->\n"
        f"{body.rstrip()}\n{CLOSE}\n"
    )


def merge(document: Document, sections: Mapping[str, str]) -> str:
    """The file with these cells' sections replaced in place and new cells appended."""
    out: list[str] = []
    done: set[str] = set()
    for part in document.parts:
        if isinstance(part, Section):
            if part.cell in sections:
                if part.cell not in done:  # a duplicated section collapses into one
                    out.append(sections[part.cell])
                    done.add(part.cell)
                continue
            out.append(part.text)
        else:
            out.append(part)
    for cell, text in sections.items():
        if cell in done:
            continue
        current = "".join(out)
        if current.strip():
            out.append(("" if current.endswith("\n") else "\n") + SEPARATOR)
        out.append(text)
    return "".join(out)
