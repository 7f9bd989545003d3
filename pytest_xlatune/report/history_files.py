"""The history's files, written by `python -m pytest_xlatune.report`: `<MODEL_TAG>-history.md`
(per cell and config tag: the trend chart as an SVG file beside it, its change points, its
rows) and `<MODEL_TAG>-history.html` (the same, each chart inline; every text escaped)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

import pandas as pd

from ..verdict.changepoint import TEST
from .files import Output, write_if_changed
from .history import load_history
from .trend import markdown, summary, svg


def svg_name(model_tag: str, slug: str, tag: str) -> str:
    return f"{model_tag}-history-{slug}-{tag}.svg"


def write_history_files(model_tag: str, cells: Sequence[tuple[str, str, Path]], out: Path) -> list[Output]:
    """`cells`: (cell id, slug, history file) of the cells of one model tag; nothing when none
    has a history yet."""
    frames = [(cell_id, slug, frame) for cell_id, slug, path in cells if not (frame := load_history(path)).empty]
    if not frames:
        return []
    outputs = []
    md = [
        f"# {model_tag}: history",
        "",
        "Every sweep and gate run of each cell, oldest first "
        "(`<store>/<cell>.history.csv`); TGS with the 95 % t interval of its runs.",
        "",
    ]
    html = [
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{escape(model_tag)}: history</title>'
        f"</head><body><h1>{escape(model_tag)}: history</h1><p>Change points: {escape(TEST)}.</p>"
    ]
    for cell_id, slug, frame in frames:
        md += [f"## {cell_id}", ""]
        html.append(f"<h2>{escape(cell_id)}</h2>")
        for tag, group in frame.groupby("config_tag", sort=False):
            rows = pd.DataFrame(group).reset_index(drop=True)
            name = svg_name(model_tag, slug, str(tag))
            chart = svg(rows, f"{cell_id} [{tag}]: TGS per run")
            outputs.append(write_if_changed(out / name, chart + "\n", "history chart"))
            md.append(markdown(rows, name, str(tag)))
            html.append(
                f"<h3>[{escape(str(tag))}]</h3>{chart}<ul>"
                + "".join(f"<li>{escape(line.removeprefix('- '))}</li>" for line in summary(rows, str))
                + "</ul>"
            )
    html.append("</body></html>")
    outputs.append(write_if_changed(out / f"{model_tag}-history.md", "\n".join(md), "history report"))
    outputs.append(write_if_changed(out / f"{model_tag}-history.html", "".join(html) + "\n", "history HTML"))
    return outputs
