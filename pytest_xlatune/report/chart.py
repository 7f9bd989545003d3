"""The leaderboard as an inline SVG bar chart (pure; no JavaScript, no external files).

One horizontal bar per leaderboard profile, drawn from the dashed `baseline-deployed` line to
the profile's TGS, so a bar's length and side are its Δ%. Error bars are the profile's 95 %
interval converted to TGS (baseline × (1 + Δ%/100) at both ends); a row without an interval
(the baseline itself) shows the spread of its steady-state steps instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from .data import ReportData
from .leaderboard import Row

WIDTH = 820
LABEL_WIDTH = 210
VALUE_WIDTH = 170
ROW_HEIGHT = 24
BAR_HEIGHT = 14
TOP = 12
AXIS_HEIGHT = 58  # tick labels, axis title, legend
MAX_LABEL = 30
COLORS = {
    "better": "#2e7d32",
    "worse": "#c62828",
    "within_noise": "#9e9e9e",
    "too_noisy": "#cfd8dc",  # within noise, the interval spanning a halving and a doubling
    "baseline": "#37474f",
    # Never a green bar: a profile whose runs disagree, or whose loss left the baseline's.
    "unstable": "#ef6c00",
    "numerics_changed": "#8e24aa",
    "not_applied": "#6d4c41",  # a requested NCCL/RCCL setting left no trace: never a result
}
LEGEND = (
    ("better", "better"),
    ("worse", "worse"),
    ("within_noise", "within noise"),
    ("too_noisy", "noise too large to judge"),
    ("unstable", "unstable"),
    ("numerics_changed", "numerics changed"),
    ("not_applied", "not applied"),
    ("baseline", "baseline-deployed"),
)


@dataclass(frozen=True)
class Bar:
    """One profile as drawn: TGS, error-bar ends in TGS, and how it compares."""

    profile: str
    tgs: float
    low: float | None
    high: float | None
    kind: str  # a COLORS key
    winner: bool
    delta_pct: float | None
    error: str  # what the error bar is, for the tooltip


def bars(data: ReportData) -> list[Bar]:
    """The leaderboard rows as bars, in leaderboard order (fastest first)."""
    base = data.baseline_tgs.get(data.primary)
    steps = {r.job_id: r.tgs_values for r in data.appendix}
    return [_bar(row, base, steps) for row in data.leaderboard]


def _bar(row: Row, base: float | None, steps: dict[str, tuple[float, ...]]) -> Bar:
    kind = (
        "baseline"
        if row.profile == "baseline-deployed"
        else "unstable"
        if row.unstable
        else "numerics_changed"
        if row.numerics == "changed"
        else (row.direction or "within_noise")
    )
    low: float | None
    high: float | None
    if base is not None and row.ci_low is not None and row.ci_high is not None:
        low, high = base * (1 + row.ci_low / 100), base * (1 + row.ci_high / 100)
        error = f"95 % interval [{row.ci_low:+.2f}, {row.ci_high:+.2f}] %"
    else:
        values = [v for job in row.job_ids.split() for v in steps.get(job, ())]
        low, high = (min(values), max(values)) if values else (None, None)
        error = "spread of the steady-state steps" if values else "no spread recorded"
    return Bar(row.profile, row.tgs, low, high, kind, row.winner, row.delta_pct, error)


def nice_step(span: float, ticks: int = 5) -> float:
    """A 1/2/2.5/5 × 10^k step giving about `ticks` intervals over `span`."""
    raw = span / ticks
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)


def _domain(items: Sequence[Bar], base: float) -> tuple[float, float]:
    values = [base] + [b.tgs for b in items] + [v for b in items for v in (b.low, b.high) if v is not None]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.06 or base * 0.01 or 1.0
    return lo - pad, hi + pad


def _label(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def svg(items: Sequence[Bar], baseline_tgs: float, title: str) -> str:
    """The chart as one `<svg>` element (sized in px; scales down with max-width)."""
    lo, hi = _domain(items, baseline_tgs)
    x0, x1 = LABEL_WIDTH + 10, WIDTH - VALUE_WIDTH - 10

    def x(value: float) -> float:
        return x0 + (value - lo) / (hi - lo) * (x1 - x0)

    plot_bottom = TOP + ROW_HEIGHT * len(items)
    height = plot_bottom + AXIS_HEIGHT
    out = [
        f'<svg class="xlatune-chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'style="max-width:100%;height:auto;font-family:system-ui,sans-serif;font-size:12px" '
        f'aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    step = nice_step(hi - lo)
    first = math.ceil(lo / step)
    for tick in (n * step for n in range(first, math.floor(hi / step) + 1)):
        tx = x(tick)
        out.append(
            f'<line class="xlatune-grid" x1="{tx:.1f}" y1="{TOP}" x2="{tx:.1f}" y2="{plot_bottom}" stroke="#e0e0e0"/>'
        )
        out.append(
            f'<text x="{tx:.1f}" y="{plot_bottom + 14}" text-anchor="middle" '
            f'fill="#555">{tick:,.{_decimals(step)}f}</text>'
        )
    for index, bar in enumerate(items):
        y = TOP + index * ROW_HEIGHT
        mid = y + ROW_HEIGHT / 2
        left, right = sorted((x(baseline_tgs), x(bar.tgs)))
        if right - left < 2:  # the baseline itself: a visible tick at the line
            left, right = (left + right) / 2 - 1, (left + right) / 2 + 1
        delta = "" if bar.delta_pct is None else f" {bar.delta_pct:+.2f} %"
        marked = {"unstable": " (unstable: its runs disagree)", "numerics_changed": " (numerics changed)"}.get(
            bar.kind, ""
        )
        tooltip = f"{bar.profile}: {bar.tgs:,.1f} TGS{delta}{marked}; error bar: {bar.error}"
        weight = ' font-weight="bold"' if bar.winner else ""
        out.append(f'<g class="xlatune-row" data-profile="{escape(bar.profile)}"><title>{escape(tooltip)}</title>')
        out.append(
            f'<text x="{LABEL_WIDTH}" y="{mid + 4:.1f}" text-anchor="end"{weight}>'
            f"{escape(_label(bar.profile))}{' ★' if bar.winner else ''}</text>"
        )
        out.append(
            f'<rect class="xlatune-bar xlatune-{bar.kind}" x="{left:.1f}" '
            f'y="{mid - BAR_HEIGHT / 2:.1f}" width="{right - left:.1f}" '
            f'height="{BAR_HEIGHT}" fill="{COLORS[bar.kind]}" fill-opacity="0.85"/>'
        )
        if bar.low is not None and bar.high is not None:
            el, eh = x(bar.low), x(bar.high)
            out.append(
                f'<path class="xlatune-errorbar" d="M{el:.1f},{mid:.1f}H{eh:.1f}'
                f'M{el:.1f},{mid - 5:.1f}V{mid + 5:.1f}M{eh:.1f},{mid - 5:.1f}V{mid + 5:.1f}" '
                f'stroke="#212121" stroke-width="1.2" fill="none"/>'
            )
        out.append(
            f'<text x="{x1 + 10}" y="{mid + 4:.1f}"{weight}>{bar.tgs:,.1f}'
            f'<tspan fill="{COLORS[bar.kind]}">{escape(delta)}</tspan></text></g>'
        )
    bx = x(baseline_tgs)
    out.append(
        f'<line class="xlatune-baseline" x1="{bx:.1f}" y1="{TOP - 6}" x2="{bx:.1f}" '
        f'y2="{plot_bottom}" stroke="#37474f" stroke-width="1.5" stroke-dasharray="5 4">'
        f"<title>baseline-deployed {baseline_tgs:,.1f} TGS</title></line>"
    )
    out.append(
        f'<text x="{(x0 + x1) / 2:.1f}" y="{plot_bottom + 30}" text-anchor="middle" '
        f'fill="#555">Tokens/s/device · dashed: baseline-deployed {baseline_tgs:,.1f} · '
        f"error bars: 95 % interval (baseline: spread of its steps)</text>"
    )
    lx, ly = x0, plot_bottom + 48
    for kind, name in LEGEND:
        out.append(
            f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{COLORS[kind]}"/>'
            f'<text x="{lx + 14}" y="{ly}" fill="#555">{name}</text>'
        )
        lx += 24 + 7 * len(name)
    out.append("</svg>")
    return "\n".join(out)


def _decimals(step: float) -> int:
    """Digits a tick label needs: 0 for 50, 1 for 2.5 or 0.2, 2 for 0.25."""
    return next((d for d in range(3) if abs(round(step, d) - step) < 1e-9), 3)


def render(data: ReportData) -> str:
    """The chart of a cell's leaderboard; empty when there is no baseline to draw against."""
    base = data.baseline_tgs.get(data.primary)
    if base is None or not data.leaderboard:
        return ""
    title = f"{data.cell.model_tag} {data.cell.parallelism.text} [{data.primary}]: TGS per profile vs baseline-deployed"
    return svg(bars(data), base, title)
