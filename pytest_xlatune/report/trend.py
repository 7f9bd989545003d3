"""A cell's history as a trend chart (pure): recipe and baseline TGS per run, in order, with their
95 % intervals, the image of each point, and the change points of the recipe's series
(verdict/changepoint.py) as dashed vertical lines. Inline SVG, every text escaped."""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

import pandas as pd

from ..shareable import clean, markdown_text
from ..verdict.changepoint import TEST, ChangePoint, change_points

WIDTH = 820
HEIGHT = 300
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 30, 70
RECIPE, BASELINE, CHANGE = "#1565c0", "#37474f", "#c62828"


def image_label(image: str) -> str:
    """A short name for an image: a venv's folder (`/opt/new/bin/python` → `new`), else its last part."""
    parts = [p for p in image.split("/") if p]
    if len(parts) >= 3 and parts[-2] == "bin":
        return parts[-3]
    return parts[-1] if parts else "(default)"


def series_change_points(frame: pd.DataFrame) -> list[ChangePoint]:
    """The change points of the recipe TGS column (rows without a recipe figure are left out, and
    the indexes are those of `frame`'s rows)."""
    values = frame["recipe_tgs"].astype(float).tolist()
    kept = [i for i, v in enumerate(values) if not math.isnan(v)]
    found = change_points([values[i] for i in kept])
    return [ChangePoint(kept[c.index], c.before, c.after, c.p_value, c.corrected_p) for c in found]


def _y(value: float, low: float, high: float) -> float:
    span = (high - low) or 1.0
    return TOP + (HEIGHT - TOP - BOTTOM) * (1 - (value - low) / span)


def svg(frame: pd.DataFrame, title: str) -> str:
    """The chart of one config tag's rows, in the order given."""
    n = len(frame)
    cols: list[list[float]] = [
        [float(v) for v in frame[c].tolist()]
        for c in ("recipe_tgs", "recipe_low", "recipe_high", "baseline_tgs", "baseline_low", "baseline_high")
    ]
    finite = [v for col in cols for v in col if not math.isnan(v)]
    if not finite:
        finite = [0.0, 1.0]
    low, high = min(finite), max(finite)
    pad = (high - low) * 0.1 or abs(high) * 0.05 or 1.0
    low, high = low - pad, high + pad
    step = (WIDTH - LEFT - RIGHT) / max(1, n - 1) if n > 1 else 0.0

    def x(i: int) -> float:
        return LEFT + step * i if n > 1 else LEFT + (WIDTH - LEFT - RIGHT) / 2

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
        f'<text x="{LEFT}" y="18" font-size="13" font-family="sans-serif">{escape(title)}</text>',
        f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" stroke="#999"/>',
    ]
    for tick in range(5):
        value = low + (high - low) * tick / 4
        y = _y(value, low, high)
        parts.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end" '
            f'font-family="sans-serif">{value:.1f}</text>'
        )
    for name, (mean, lo, hi), color in (("recipe", cols[0:3], RECIPE), ("baseline", cols[3:6], BASELINE)):
        points = [(x(i), _y(v, low, high)) for i, v in enumerate(mean) if not math.isnan(v)]
        if len(points) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for i, (v, a, b) in enumerate(zip(mean, lo, hi, strict=True)):
            if math.isnan(v):
                continue
            if not (math.isnan(a) or math.isnan(b)):
                parts.append(
                    f'<line x1="{x(i):.1f}" y1="{_y(a, low, high):.1f}" x2="{x(i):.1f}" '
                    f'y2="{_y(b, low, high):.1f}" stroke="{color}"/>'
                )
            parts.append(
                f'<circle cx="{x(i):.1f}" cy="{_y(v, low, high):.1f}" r="3.5" fill="{color}">'
                f"<title>{escape(name)} {v:.1f}</title></circle>"
            )
    for i, (date, image) in enumerate(zip(frame["date"].astype(str), frame["image"].astype(str), strict=True)):
        label = f"{date[:10]} {image_label(image)}"
        parts.append(
            f'<text x="{x(i):.1f}" y="{HEIGHT - BOTTOM + 14}" font-size="9" text-anchor="middle" '
            f'font-family="sans-serif">{escape(clean(label)[:28])}</text>'
        )
    for point in series_change_points(frame):
        cx = (x(point.index - 1) + x(point.index)) / 2
        parts.append(
            f'<line x1="{cx:.1f}" y1="{TOP}" x2="{cx:.1f}" y2="{HEIGHT - BOTTOM}" stroke="{CHANGE}" '
            f'stroke-dasharray="5,4" class="change-point"><title>change point: '
            f"{point.delta_pct:+.2f} % (corrected p {point.corrected_p:.3g})</title></line>"
        )
    parts.append(
        f'<text x="{LEFT}" y="{HEIGHT - 22}" font-size="10" font-family="sans-serif" fill="{RECIPE}">'
        f'● recipe TGS</text><text x="{LEFT + 110}" y="{HEIGHT - 22}" font-size="10" '
        f'font-family="sans-serif" fill="{BASELINE}">● baseline TGS</text><text x="{LEFT + 230}" '
        f'y="{HEIGHT - 22}" font-size="10" font-family="sans-serif" fill="{CHANGE}">┆ change point</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def summary(frame: pd.DataFrame, text: Callable[[object], str] = markdown_text) -> list[str]:
    """One markdown line per change point of the recipe series, and the test used; `text` renders
    the file's values (markdown text; `str` for a caller that escapes the whole line itself)."""
    lines = []
    for point in series_change_points(frame):
        at = frame.iloc[point.index]
        lines.append(
            f"- change point before run {point.index + 1} ({text(at['date'])}, image "
            f"{text(at['image'] or '(default)')}): recipe TGS {point.before:.1f} → {point.after:.1f} "
            f"({point.delta_pct:+.2f} %, corrected p {point.corrected_p:.3g})"
        )
    return lines or ["- no change point"]


def markdown(frame: pd.DataFrame, svg_name: str, tag: str) -> str:
    """The history section: the chart (an SVG file beside the report), its change points, the rows."""
    lines = [
        f"### History \\[{markdown_text(tag)}\\]",
        "",
        f"![TGS history \\[{markdown_text(tag)}\\]]({svg_name.replace(' ', '%20').replace(')', '%29')})",
        "",
        f"Change points ({TEST}):",
        "",
        *summary(frame),
        "",
        "| date | kind | image | recipe | baseline TGS [95 %] | recipe TGS [95 %] | control TGS | node-hours |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, r in frame.iterrows():
        lines.append(
            f"| {_cell(r['date'])} | {_cell(r['kind'])} | {_cell(r['image'] or '(default)')} "
            f"| {_cell(r['recipe'] or '–')} "
            f"| {_fig(r, 'baseline')} | {_fig(r, 'recipe')} | {_num(r['control_tgs'])} "
            f"| {float(r['node_hours']):.3f} |"
        )
    return "\n".join(lines) + "\n"


def _cell(text: object) -> str:
    """A value of the history file (edited by hand, perhaps) as markdown text."""
    return markdown_text(text)


def _num(value: object) -> str:
    v = float(str(value)) if value is not None and str(value) != "" else math.nan
    return "–" if math.isnan(v) else f"{v:.1f}"


def _fig(r: pd.Series, name: str) -> str:
    mean, lo, hi = (float(r[f"{name}_{c}"]) for c in ("tgs", "low", "high"))
    if math.isnan(mean):
        return "–"
    return f"{mean:.1f}" + ("" if math.isnan(lo) or math.isnan(hi) else f" [{lo:.1f}, {hi:.1f}]")
