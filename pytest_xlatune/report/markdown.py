"""Render the tuning report (markdown) from ReportData with the package's jinja2 templates."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import jinja2

from ..evidence.collective_table import format_bytes
from ..shareable import markdown_code, markdown_text, named_value, strip_controls
from . import sections
from .data import ReportData

TEMPLATES = {"en": "tuning.md.j2", "zh": "tuning.zh.md.j2"}


def _num(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f} %"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} %"


def _pairs(pairs: Iterable[tuple[str, str]]) -> str:
    return " ".join(f"{k}={v}" for k, v in pairs)


def _ci(row: object) -> str:
    low, high = getattr(row, "ci_low", None), getattr(row, "ci_high", None)
    return "—" if low is None or high is None else f"[{low:+.2f}, {high:+.2f}] %"


def _words(direction: str) -> str:
    """A stats.direction value in words, where only the value is kept (the sign-flip table)."""
    return "noise too large to judge" if direction == "too_noisy" else direction.replace("_", " ")


def _plus(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:+,.{digits}f}"


def _finalize(value: object) -> object:
    # Whatever an expression prints, no terminal escape or control character reaches the file.
    return strip_controls(value) if isinstance(value, str) else value


def environment() -> jinja2.Environment:
    """Markdown, so no HTML autoescape: text from a cell, a log, an artifact or another report
    section goes through `md` (inline text, table cells) or `code` (a code span)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_xlatune", "report/templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        finalize=_finalize,
    )
    env.filters.update(
        num=_num,
        signed=_signed,
        words=_words,
        pct=_pct,
        pairs=_pairs,
        oneline=markdown_text,
        ci=_ci,
        plus=_plus,
        bytes=format_bytes,
        md=markdown_text,
        code=markdown_code,
        secret_of=lambda value, name: named_value(name, value),
    )
    return env


def render_tuning_md(data: ReportData, flips: sections.SignFlips | None = None, language: str = "en") -> str:
    """One cell's report body (no markers); `flips` adds the sign-flip section."""
    return environment().get_template(TEMPLATES[language]).render(d=data, flips=flips)


def render_document(
    existing: str | None,
    cells: Sequence[tuple[str, ReportData]],
    language: str = "en",
    known: Mapping[str, sections.CellSummary] | None = None,
) -> str:
    """The whole report file: `existing` with these cells' sections replaced or appended.

    `cells` are (cell id, data) pairs; sign flips compare each cell with the other cells of this
    render, the sections already in `existing` and `known` (summaries from a sibling file).
    """
    document = sections.parse(existing or "")
    summaries = {cell_id: sections.summarize(data, cell_id) for cell_id, data in cells}
    pool = {**(known or {}), **document.summaries(), **summaries}
    rendered = {}
    for cell_id, data in cells:
        others = [s for key, s in pool.items() if key != cell_id]
        flips = sections.sign_flips(summaries[cell_id], others)
        rendered[cell_id] = sections.wrap(summaries[cell_id], render_tuning_md(data, flips, language))
    return sections.merge(document, rendered)
