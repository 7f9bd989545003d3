"""A cell's HTML blocks (pure, no engine import): heading, TL;DR, warnings and patch, chart,
leaderboard. The pytest-html hooks (html.py) and the standalone page of `python -m
pytest_xlatune.report` (html_page.py) both render them."""

from __future__ import annotations

from html import escape

from . import chart
from .data import ReportData
from .html_top import top_html
from .leaderboard import Row

STYLE = """<style>
.xlatune-cell{margin:1em 0 2em}
td.xlatune-col{white-space:nowrap}
.xlatune-warnings{border-left:4px solid #ef6c00;background:#fff3e0;padding:2px 12px;margin:.5em 0}
.xlatune-patch pre{background:#f5f5f5;padding:6px 10px;overflow-x:auto}
table.xlatune-leaderboard{border-collapse:collapse;margin-top:.5em}
table.xlatune-leaderboard th,table.xlatune-leaderboard td{border:1px solid #ddd;padding:2px 8px;text-align:left}
table.xlatune-leaderboard td.num{text-align:right;font-variant-numeric:tabular-nums}
</style>"""


def cell_html(data: ReportData) -> str:
    """A cell's heading, chart and leaderboard table."""
    title = f"{data.cell.model_tag} {data.cell.parallelism.text} leaderboard ({data.primary})"
    cost = f'<p class="xlatune-cost">Cost: {escape(data.spent.text())}</p>' if data.spent else ""
    cost += "".join(f'<p class="xlatune-adaptive">Adaptive sweep: {escape(line)}</p>' for line in data.adaptive)
    # What to do and what to doubt first, then the chart (html_top: the markdown's own sections).
    return (
        f'<div class="xlatune-cell"><h2 class="xlatune-leaderboard">{escape(title)}</h2>'
        f"{top_html(data)}{cost}{chart.render(data)}{leaderboard_html(data)}</div>"
    )


def leaderboard_html(data: ReportData) -> str:
    """The leaderboard as the markdown report has it (every row, not only the top and bottom):
    the same cells, the job cell the runs behind the figure, and the same note under it."""

    def num(value: float | None, fmt: str) -> str:
        return "—" if value is None else fmt.format(value)

    def numerics(r: Row) -> str:
        return ("changed: " + r.departed) if r.numerics == "changed" and r.departed else r.numerics_text()

    # ★ (U+2605) rather than the markdown's ⭐ emoji, which browsers without an emoji font draw as a box.
    rows = "".join(
        f"<tr><td>{escape(r.profile)}{' ★' if r.winner else ''}</td>"
        f"<td><code>{escape(r.flags)}</code></td>"
        f'<td class="num">{r.tgs:,.1f}{" (derived)" if r.derived else ""}</td>'
        f'<td class="num">{num(r.step_seconds, "{:.3f}")}</td>'
        f'<td class="num">{num(r.delta_pct, "{:+.2f} %")}</td>'
        f"<td>{'—' if r.ci_low is None or r.ci_high is None else f'[{r.ci_low:+.2f}, {r.ci_high:+.2f}] %'}</td>"
        f'<td class="num">{num(r.detectable_pct, "≥ +{:.1f} %")}</td>'
        f"<td>{escape(r.judged or r.direction.replace('_', ' '))}</td>"
        f"<td>{escape(numerics(r))}</td>"
        f"<td>{escape(r.job_text())}</td></tr>"
        for r in data.leaderboard
    )
    note = (
        '<p class="xlatune-note"><em>Detectable</em>: the smallest true Δ% one run of a profile is called '
        f"<em>better</em> with 80 % odds at this noise and {data.cell.baseline_repeats} baseline repeats. "
        "<em>Numerics</em>: whether the run's loss followed the baseline's step by step. "
        "<em>Job</em>: the runs behind the TGS figure (their mean), or the one job.</p>"
    )
    return (
        '<table class="xlatune-leaderboard"><tr><th>Profile</th><th>Flags</th><th>TGS</th>'
        "<th>Step (s)</th><th>Δ% vs baseline-deployed</th><th>95 % interval</th>"
        f"<th>Detectable</th><th>Verdict</th><th>Numerics</th><th>Job</th></tr>{rows}</table>{note}"
    )
