"""The leaderboard chart: one bar per profile, error bars in TGS, a dashed baseline, no script."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from pytest_xlatune.report import chart
from tests import report_cases as cases

SVG = "{http://www.w3.org/2000/svg}"


def parsed(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # well-formed XML, so it also works as a standalone .svg


def test_one_bar_per_leaderboard_profile_in_order() -> None:
    data = cases.winner()
    root = parsed(chart.render(data))
    rows = root.findall(f"{SVG}g")
    assert [g.get("data-profile") for g in rows] == [r.profile for r in data.leaderboard]
    assert len(root.findall(f".//{SVG}rect[@class]")) == len(data.leaderboard)
    kinds = [g.find(f"{SVG}rect").get("class") for g in rows]  # type: ignore[union-attr]
    assert kinds[0] == "xlatune-bar xlatune-better" and kinds[-1] == "xlatune-bar xlatune-worse"
    assert "xlatune-baseline" in kinds[[r.profile for r in data.leaderboard].index("baseline-deployed")]


def test_error_bars_are_the_interval_in_tgs_and_the_step_spread_for_the_baseline() -> None:
    data = cases.winner()
    base = data.baseline_tgs["sparse"]
    bars = {b.profile: b for b in chart.bars(data)}
    top = data.leaderboard[0]
    assert top.ci_low is not None and top.ci_high is not None
    assert bars[top.profile].low == pytest.approx(base * (1 + top.ci_low / 100))
    assert bars[top.profile].high == pytest.approx(base * (1 + top.ci_high / 100))
    baseline = bars["baseline-deployed"]
    assert (baseline.low, baseline.high) == (pytest.approx(1000.0 * 0.998), pytest.approx(1006.0 * 1.002))
    assert baseline.error == "spread of the steady-state steps"


def test_dashed_baseline_line_sits_at_the_baseline_bar() -> None:
    root = parsed(chart.render(cases.winner()))
    line = root.find(f"{SVG}line[@class='xlatune-baseline']")
    assert line is not None and line.get("stroke-dasharray")
    tick = next(g for g in root.findall(f"{SVG}g") if g.get("data-profile") == "baseline-deployed")
    rect = tick.find(f"{SVG}rect")
    assert rect is not None
    middle = float(rect.get("x", "0")) + float(rect.get("width", "0")) / 2
    assert middle == pytest.approx(float(line.get("x1", "0")), abs=0.11)


def test_bars_grow_from_the_baseline_towards_their_tgs() -> None:
    root = parsed(chart.render(cases.winner()))
    x_base = float(root.find(f"{SVG}line[@class='xlatune-baseline']").get("x1", "0"))  # type: ignore[union-attr]
    rects = {g.get("data-profile"): g.find(f"{SVG}rect") for g in root.findall(f"{SVG}g")}
    better, worse = rects["ag256m"], rects["pp_ag"]
    assert float(better.get("x", "0")) == pytest.approx(x_base, abs=0.11)  # type: ignore[union-attr]
    assert float(worse.get("x", "0")) + float(worse.get("width", "0")) == pytest.approx(x_base, abs=0.11)  # type: ignore[union-attr]


def test_text_is_escaped_and_there_is_no_script() -> None:
    data = cases.winner()
    row = data.leaderboard[0]
    tricky = type(row)(**{**row.__dict__, "profile": "<script>alert(1)</script>"})
    svg = chart.svg([chart._bar(tricky, 1000.0, {})], 1000.0, "t & <b>")
    parsed(svg)
    assert "<script" not in svg and "&lt;script&gt;" in svg


def test_no_chart_without_a_baseline() -> None:
    jobs = cases.Jobs()
    jobs.profile("ag256m", 1080.0, "--x=1")
    assert chart.render(cases.data(cases.cell(), jobs)) == ""


@pytest.mark.parametrize(("span", "step"), [(200.0, 50.0), (12.0, 2.5), (0.9, 0.2), (1000.0, 200.0)])
def test_nice_step(span: float, step: float) -> None:
    assert chart.nice_step(span) == pytest.approx(step)


def test_tick_labels_are_round_numbers() -> None:
    svg = chart.render(cases.winner())
    labels = re.findall(r'text-anchor="middle" fill="#555">([\d,.]+)</text>', svg)
    assert labels and all(re.fullmatch(r"[\d,]+", label) for label in labels), labels


@pytest.mark.parametrize(("step", "digits"), [(50.0, 0), (2.5, 1), (0.2, 1), (0.25, 2)])
def test_tick_labels_keep_the_digits_of_the_step(step: float, digits: int) -> None:
    assert chart._decimals(step) == digits
