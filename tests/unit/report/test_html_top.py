"""The HTML report's cell block: TL;DR, warnings and the recommended patch above the chart; a bar
that is unstable or changed numerics is never green; skip reasons without pytest's tuple."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_xlatune.report import chart, final, html, html_top
from pytest_xlatune.report.__main__ import write_html_pages
from pytest_xlatune.report.build import from_results
from pytest_xlatune.verdict.numerics import Mode
from tests import report_cases as cases


def test_tldr_warnings_and_patch_come_before_the_chart() -> None:
    data = cases.winner()
    block = html.cell_html(data)
    tldr, patch, svg = block.find("xlatune-tldr"), block.find("xlatune-patch"), block.find("<svg")
    assert 0 < tldr < patch < svg
    assert "<strong>" in block[tldr:patch] and "XLA_FLAGS=" in block[patch:svg]
    # the TL;DR is the markdown report's own sentence (rendered from the same data)
    assert data.winner is not None and f"<code>{data.winner.profile}</code>" in block[tldr:patch]


def test_an_under_powered_sweep_warns_above_the_chart() -> None:
    block = html.cell_html(cases.under_powered())
    warnings = block[block.find("xlatune-warnings") : block.find("<svg")]
    assert "Inconclusive: noise" in warnings and "would settle it" in warnings


def test_unstable_and_numerics_changed_bars_are_not_green() -> None:
    data = cases.numerics_and_tie()
    changed = next(r for r in data.leaderboard if r.numerics == "changed")
    assert changed.direction == "better"  # the case the chart used to draw as a green bar
    shaky = next(r for r in data.leaderboard if r.profile == "lhs")
    rows = [
        dataclasses.replace(r, unstable=True, runs="1080.0 = mean of 1160.0, 1000.0; jobs 1, 2") if r is shaky else r
        for r in data.leaderboard
    ]
    data = dataclasses.replace(data, leaderboard=rows)
    kinds = {b.profile: b.kind for b in chart.bars(data)}
    assert kinds[changed.profile] == "numerics_changed" and kinds["lhs"] == "unstable"
    svg = chart.render(data)
    for kind in ("numerics_changed", "unstable"):
        assert f'class="xlatune-bar xlatune-{kind}"' in svg and chart.COLORS[kind] != chart.COLORS["better"]
    assert "lhs's runs disagree beyond the noise (1080.0 = mean of 1160.0, 1000.0" in " ".join(html_top.warnings(data))


def test_a_skipped_item_shows_its_reason_not_a_tuple(tmp_path: Path) -> None:
    longrepr = (str(tmp_path / "cells" / "x.yml"), 3, "Skipped: no baseline-deployed run measured")
    report = pytest.TestReport(
        "cells/x.yml::wave2::p[t]",
        ("x.yml", 3, "cell: wave2::p[t]"),
        {},
        "skipped",
        longrepr,
        "call",
        user_properties=[("xlatune_cell", "cells/x.yml")],
    )
    data = [html.escape(report.longreprtext) + "\n", "captured"]
    html.pytest_html_results_table_html(report, data)
    assert data == ["no baseline-deployed run measured\n", "captured"]


def test_the_gates_lock_less_cell_shows_its_reason_not_a_tuple_and_other_skips_are_left_alone(tmp_path: Path) -> None:
    # The gate's Unlocked item has no cell properties: its place (reportinfo) says `cell: `.
    reason = "cells/x.lock.json: no recipe lock, nothing to gate"
    for where, shown in [("cell: x.yml (no lock)", reason), ("test_other", None)]:
        longrepr = (str(tmp_path / "cells" / "x.yml"), 1, f"Skipped: {reason}")
        report = pytest.TestReport("cells/x.yml::gate", ("cells/x.yml", 0, where), {}, "skipped", longrepr, "call")
        tuple_text = html.escape(report.longreprtext) + "\n"
        data = [tuple_text]
        html.pytest_html_results_table_html(report, data)
        assert data == [f"{shown}\n" if shown else tuple_text]


def test_the_environment_table_moves_below_the_results_on_pytest_htmls_page() -> None:
    page = (
        '<h1 id="title">r</h1>\n    <div id="environment-header">\n      <h2>Environment</h2>\n    </div>\n'
        '    <table id="environment"></table>\n    <div class="summary">TL;DR</div>\n'
        '    <table id="results-table"></table>\n  <footer>\n    <script>x</script>\n  </footer>'
    )
    moved = final.environment_last(page)
    assert moved.find("TL;DR") < moved.find("</table>") < moved.find("environment-header") < moved.find("<footer>")
    assert final.environment_last(moved) == moved and final.environment_last("<p>no page</p>") == "<p>no page</p>"


def test_the_rerender_cli_writes_the_html_beside_the_markdown(tmp_path: Path) -> None:
    data = cases.winner()
    report = from_results(data.cell, tmp_path, list(data.appendix), data.nodelist)
    [output] = write_html_pages([report], tmp_path, Mode.FAIL)
    text = output.path.read_text(encoding="utf-8")
    assert output.path.name == "golden-tuning.html" and text.startswith("<!DOCTYPE html>")
    assert text.find("xlatune-tldr") < text.find("<svg") and "<script" not in text


def test_inline_reads_the_md_filters_escapes_as_a_markdown_viewer_does() -> None:
    # the TL;DR's "evidence2::winner\[narrow\]" (shareable.markdown_text) showed its backslashes
    assert (
        html_top.inline(r"re-run evidence2::winner\[narrow\] (job 15)") == "re-run evidence2::winner[narrow] (job 15)"
    )
    # still no link, no element: the text as written
    assert html_top.inline(r"&lt;b&gt;x \[y\](http://evil)") == "&lt;b&gt;x [y](http://evil)"
    assert html_top.inline("**`o1`** at **1 TGS**") == "<strong><code>o1</code></strong> at <strong>1 TGS</strong>"


def _markdown_board(markdown: str) -> dict[str, list[str]]:
    """The markdown leaderboard's cells by profile (the ⭐ dropped)."""
    board = markdown.split("## Tuning leaderboard", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split(" | ") for line in board.splitlines() if line.startswith("| ") and "---" not in line]
    return {cells[0].replace(" ⭐", "").strip(): [c.strip() for c in cells] for cells in rows[1:]}


def test_the_html_leaderboard_shows_the_runs_and_the_words_the_markdown_shows() -> None:
    # The HTML job column used to show bare job ids (`1 2 7 10`) where the markdown shows the runs
    # behind the figure (`… = mean of …; jobs 1, 2, 7, 10`), and left out the markdown's note.
    from html import unescape
    from re import findall

    from pytest_xlatune.report.markdown import render_tuning_md

    data = cases.winner()
    pooled = [r for r in data.leaderboard if " = mean of " in r.runs]
    assert pooled  # the case has a figure of several runs (the baseline repeats)
    markdown = _markdown_board(render_tuning_md(data))
    table = html.cell_html(data).split('<table class="xlatune-leaderboard">', 1)[1]
    for row in findall(r"<tr><td>(.*?)</tr>", table):
        cells = [unescape(c) for c in findall(r"(?:^|<td[^>]*>)(.*?)</td>", row)]
        profile = cells[0].replace(" ★", "")
        assert cells[-1] == markdown[profile][-1]  # the job column
        assert cells[-2].split(":")[0] == markdown[profile][-2].strip("*")  # numerics: same | changed | reference
        assert cells[5] == markdown[profile][5]  # the interval, — when there is none
    for r in pooled:
        assert f"<td>{html.escape(r.runs)}</td>" in table
    assert "Detectable</em>: the smallest true Δ%" in table


def test_the_noise_warning_does_not_say_a_prior_was_used_when_the_report_says_none_was() -> None:
    # The markdown header says the intervals use the measured noise ("no prior"); the HTML
    # warning said the noise was "beyond the 0.80 % prior", as if a prior were in the figure.
    from pytest_xlatune.verdict.stats import Noise

    data = cases.winner()
    assert data.noise is not None
    noisy = dataclasses.replace(data, noise=dataclasses.replace(data.noise, cv_pct=27.0, prior_rejected=True))
    assert isinstance(noisy.noise, Noise) and not noisy.noise.assumed
    line = next(w for w in html_top.warnings(noisy) if w.startswith("Run-to-run noise"))
    assert "27.00 % (measured: no prior)" in line and "% prior" not in line
    assert "of a quiet machine" in line
