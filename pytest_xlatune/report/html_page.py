"""A standalone HTML tuning report per model tag, for `python -m pytest_xlatune.report` (which
runs no pytest session, so no pytest-html): the cells' TL;DR, warnings, patch, chart and
leaderboard, the same blocks the pytest-html report shows above its results table."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from .data import ReportData
from .html_cell import STYLE, cell_html


def page(model_tag: str, cells: Sequence[ReportData]) -> str:
    """One self-contained document (inline CSS and SVG, no script) for these cells."""
    title = f"{model_tag} — XLA / NCCL tuning"
    body = "".join(cell_html(data) for data in cells)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"{STYLE}</head><body><h1>{escape(title)}</h1>{body}</body></html>\n"
    )
