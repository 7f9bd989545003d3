"""One figure per settings: for every item of a demo-style sweep, the terminal (its line, or the
summary's correction), junit, the HTML report, the markdown report and the CSV export show the
same TGS, pooled over every run of the same settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FAKE
from tests.figure_consistency import collect, compare
from tests.plugin.test_report_outputs import CELL as REPORT_CELL

# Two noisy baseline repeats: the first repeat's line prints its own run, the final figure is the
# mean of both.
CELL = "baseline_repeats: 2\n" + REPORT_CELL.format(parallelism="FSDP=8", overrides="{fake_noise: 0.05, fake_seed: 7}")


def test_every_output_shows_one_figure_per_item(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    cell = pytester.makefile(".yml", fsdp8=CELL)
    result = pytester.runpytest(
        str(cell), "-v", "--junitxml=junit.xml", "--html=report.html", "--xlatune-export=exports", *FAKE
    )
    result.assert_outcomes(passed=7)
    # The first baseline repeat printed its own run; the summary prints the pooled figure.
    result.stdout.fnmatch_lines(
        ["*xlatune: final figures*", "fsdp8.yml::wave1::baseline[[]sparse[]]: * TGS (* = mean of *; jobs 1, 2)"]
    )
    root = Path(pytester.path)
    outputs = collect(
        root, result.stdout.str(), root / "fake-tuning.md", root / "exports" / "fsdp8-results.csv", "sparse"
    )
    for name in ("terminal", "junit", "csv"):
        assert len(outputs[name]) == 7, (name, outputs[name])
    for name in ("html", "markdown"):  # the leaderboards: baseline, restore_default, fast, slow
        assert len(outputs[name]) == 5, (name, outputs[name])
    assert len(outputs["html-rows"]) == 7, outputs["html-rows"]
    assert compare(outputs) == []
    # The page opens on the cell's TL;DR and chart; pytest-html's Environment table is below the
    # results, before the footer whose script fills it.
    page = (root / "report.html").read_text()
    tldr, results = page.find('<div class="xlatune-tldr">'), page.find('<table id="results-table">')
    environment, footer = page.find('<div id="environment-header">'), page.find("<footer>")
    assert 0 < tldr < page.find("<svg") < results < environment < page.find('<table id="environment">') < footer
