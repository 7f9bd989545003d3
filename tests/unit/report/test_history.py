"""The per-cell history (report/history.py), its change points (verdict/changepoint.py) and its
trend chart (report/trend.py): five gate runs across two venvs show one change point at the switch."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_xlatune.report import trend
from pytest_xlatune.report.history import (
    HistoryError,
    append_rows,
    gate_rows,
    history_path,
    interval,
    load_history,
    sweep_rows,
)
from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.safefs import LinkRefused
from pytest_xlatune.verdict.changepoint import change_points, welch_p


def runs(kind: str, values: Sequence[float], image: str = "", profile: str = "fast") -> list[JobResult]:
    return [
        JobResult(
            key=f"{kind}-{n}-{image}",
            item=f"gate::{profile}[default]",
            wave="gate",
            profile=profile if kind != "baseline" else "baseline-deployed",
            config_tag="default",
            kind=kind,
            job_id=str(n),
            verdict=Verdict.SUCCESS,
            tgs=tgs,
            image=image,
        )
        for n, tgs in enumerate(values)
    ]


def gate_session(new: str, recipe: Sequence[float], baseline: Sequence[float]) -> list[JobResult]:
    return runs("gate_recipe", recipe, new) + runs("baseline", baseline, new) + runs("gate_old_recipe", [1100.0], "")


def test_welch_split_finds_a_step_and_not_noise() -> None:
    assert welch_p([1100, 1101, 1099], [1030, 1031, 1029]) < 1e-4
    assert welch_p([1100, 1100], [1100, 1100]) == 1.0 and welch_p([1100, 1100], [1030, 1030]) == 0.0
    noise = [1000.0, 1004.0, 997.0, 1002.0, 999.0, 1003.0, 998.0]
    assert change_points(noise) == []
    (point,) = change_points([1100.0, 1102.0, 1031.0, 1029.0, 1030.0])
    assert point.index == 2 and point.before == pytest.approx(1101.0) and point.after == pytest.approx(1030.0)
    assert point.corrected_p == pytest.approx(min(1.0, point.p_value * 2))  # 2 splits tested (2|3, 3|2)


def test_binary_segmentation_finds_two_steps() -> None:
    values = [1000.0, 1001.0, 999.0, 900.0, 901.0, 899.0, 1100.0, 1101.0, 1099.0]
    assert [c.index for c in change_points(values)] == [3, 6]


def test_too_short_a_series_has_no_change_point() -> None:
    assert change_points([1100.0, 900.0, 900.0]) == []  # a side of one point has no scatter to test


def test_interval_is_a_t_interval() -> None:
    mean, _low, high = interval([10.0, 12.0])
    assert mean == 11.0 and high - mean == pytest.approx(12.706 * math.sqrt(2) / math.sqrt(2), rel=1e-3)
    assert math.isnan(interval([10.0])[1])


def test_five_gate_runs_across_two_venvs_chart_the_change_at_the_switch(tmp_path: Path) -> None:
    path = history_path(tmp_path / "cells__demo.jsonl")
    assert path.name == "cells__demo.history.csv"
    sessions = [
        ("/old/bin/python", [1100.0, 1101.0]),
        ("/old/bin/python", [1099.0, 1100.0]),
        ("/new/bin/python", [1030.0, 1031.0]),
        ("/new/bin/python", [1029.0, 1030.0]),
        ("/new/bin/python", [1031.0, 1030.0]),
    ]
    for n, (image, tgs) in enumerate(sessions):
        append_rows(
            path,
            gate_rows(f"2026-12-0{n + 1}T10:00:00", image, gate_session(image, tgs, [1000.0, 1001.0]), node_hours=0.25),
        )
    frame = load_history(path)
    assert len(frame) == 5 and list(frame["image"]) == [s[0] for s in sessions]
    assert frame["recipe_tgs"].tolist()[2] == pytest.approx(1030.5)
    assert frame["control_tgs"].tolist() == [1100.0] * 5
    (point,) = trend.series_change_points(frame)
    assert point.index == 2 and point.delta_pct == pytest.approx((1030.0 / 1100.0 - 1) * 100, abs=0.1)
    chart = trend.svg(frame, "demo [default] <x>")
    assert chart.count('class="change-point"') == 1 and "&lt;x&gt;" in chart and "<x>" not in chart
    # The dashed line sits between the last old-venv point and the first new-venv one.
    x_line = float(chart.split('class="change-point"')[0].rsplit('x1="', 1)[1].split('"')[0])
    assert (
        trend.LEFT + (trend.WIDTH - trend.LEFT - trend.RIGHT) / 4 * 1
        < x_line
        < trend.LEFT + (trend.WIDTH - trend.LEFT - trend.RIGHT) / 4 * 2
    )
    text = trend.markdown(frame, "demo-history-default.svg", "default")
    assert (
        "change point before run 3 (2026-12-03T10:00:00, image /new/bin/python): recipe TGS 1100.0 → 1030.2 (-6.35 %"
        in text
    )
    assert "![TGS history \\[default\\]](demo-history-default.svg)" in text


def test_a_sweep_row_holds_its_recipe_and_baseline_with_intervals(tmp_path: Path) -> None:
    results = runs("baseline", [1000.0, 1002.0]) + runs("profile", [1100.0, 1104.0])
    (row,) = sweep_rows("2026-12-01T00:00:00", "", results, {"default": "fast"}, node_hours=1.5)
    assert (row.kind, row.recipe, row.recipe_tgs, row.baseline_tgs, row.runs) == ("sweep", "fast", 1102.0, 1001.0, 2)
    assert row.recipe_low < 1102.0 < row.recipe_high and math.isnan(row.control_tgs)
    (none,) = sweep_rows("2026-12-01T00:00:00", "", results, {}, node_hours=1.5)
    assert none.recipe == "" and math.isnan(none.recipe_tgs)
    path = tmp_path / "h.history.csv"
    append_rows(path, [row, none])
    assert load_history(path)["recipe"].tolist() == ["fast", ""]


def test_a_link_or_a_bad_file_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.csv"
    target.write_text("keep\n")
    link = tmp_path / "x.history.csv"
    os.symlink(target, link)
    with pytest.raises(LinkRefused, match="symbolic link"):
        load_history(link)
    assert target.read_text() == "keep\n"
    bad = tmp_path / "bad.history.csv"
    bad.write_text("date,kind\n1,2\n")
    with pytest.raises(HistoryError, match=r"bad.history.csv: columns: expected date, .* found no image"):
        load_history(bad)


def test_the_report_cli_renders_the_history_in_markdown_and_html(tmp_path: Path) -> None:
    from pytest_xlatune.report.__main__ import main

    cell = tmp_path / "demo.yml"
    cell.write_text(
        "model_tag: demo\nnodes: 1\nparallelism: FSDP=8\nwaves:\n  2:\n"
        "    - {name: fast, xla_flags: [--xla_fake_tgs=1100]}\n"
    )
    store = tmp_path / ".xlatune" / "demo.jsonl"
    for n, (image, tgs) in enumerate(
        [
            ("/a<b>/bin/python", 1100.0),
            ("/a<b>/bin/python", 1101.0),
            ("/new/bin/python", 1030.0),
            ("/new/bin/python", 1031.0),
            ("/new/bin/python", 1029.0),
        ]
    ):
        append_rows(
            history_path(store),
            gate_rows(f"2026-12-0{n + 1}", image, gate_session(image, [tgs, tgs + 1], [1000.0]), 0.1),
        )
    out = tmp_path / "out"
    assert main([str(cell), "--store", str(tmp_path / ".xlatune"), "--root", str(tmp_path), "--out", str(out)]) == 0
    md = (out / "demo-history.md").read_text()
    assert "![TGS history \\[default\\]](demo-history-demo-default.svg)" in md
    assert "change point before run 3 (2026-12-03, image /new/bin/python)" in md
    chart = (out / "demo-history-demo-default.svg").read_text()
    assert chart.startswith("<svg") and chart.count('class="change-point"') == 1
    html = (out / "demo-history.html").read_text()
    assert chart.strip() in html and "a&lt;b&gt;" in html and "/a<b>" not in html


GOOD_ROW = {"date": "2026-12-02", "kind": "gate", "image": "", "config_tag": "default", "recipe": "a"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"date": "<img src=x onerror=alert(1)>"},
            "date: expected an ISO date (*), found '<img src=x onerror=alert(1)>'",
        ),
        ({"kind": "sweep [x](http://e)"}, "kind: expected one of sweep, gate, repair, found 'sweep [x](http://e)'"),
        ({"baseline_tgs": "abc"}, "baseline_tgs: expected a number or nothing, found 'abc'"),
        ({"recipe_tgs": "nan"}, "recipe_tgs: expected a finite number, found 'nan'"),
        ({"recipe_high": "1e400"}, "recipe_high: expected a finite number, found 'inf'"),
        ({"node_hours": "-1"}, "node_hours: expected a finite number >= 0, found '-1.0'"),
    ],
)
def test_a_history_row_edited_by_hand_is_one_line_naming_line_and_column(
    tmp_path: Path, change: dict[str, str], message: str
) -> None:
    """It was a traceback in the report CLI (float('abc')), or NaN coordinates in the chart."""
    path = tmp_path / "h.history.csv"
    (good,) = gate_rows("2026-12-01T00:00:00+00:00", "", gate_session("", [1100.0, 1101.0], [1000.0]), 0.1)
    append_rows(path, [good])
    numbers = dict.fromkeys(
        ("baseline_tgs", "baseline_low", "baseline_high", "recipe_tgs", "recipe_low", "recipe_high"), "1000"
    )
    values = {**GOOD_ROW, **numbers, "control_tgs": "", "runs": "2", "node_hours": "0.1", **change}
    header = path.read_text().splitlines()[0].split(",")
    path.write_text(path.read_text() + ",".join(values[c] for c in header) + "\n")
    with pytest.raises(HistoryError) as caught:
        load_history(path)
    pattern = re.escape(f"{path}:3: {message}").replace(r"\*", ".*")
    assert re.fullmatch(pattern, str(caught.value)), str(caught.value)


def test_history_values_are_markdown_text_and_the_chart_label_is_masked_before_it_is_cut() -> None:
    from dataclasses import asdict

    import pandas as pd

    from pytest_xlatune import shareable

    token = "ghp_" + "A1b2C3d4E5" * 4
    image = f"/x/<b>im</b> [l](http://e) {token}"
    rows = [gate_rows(f"2026-12-0{n}", image, gate_session(image, [1100.0, 1101.0], [1000.0]), 0.1)[0] for n in (1, 2)]
    frame = pd.DataFrame([asdict(r) for r in rows])
    md = shareable.clean(trend.markdown(frame, "c.svg", "default"))  # as the file writer does
    assert "<b>" not in md and "&lt;b&gt;im&lt;/b&gt; \\[l\\](http://e) [masked]" in md
    # The chart cuts its labels to 28 characters: the token is masked first, not cut to a prefix
    # no token shape matches.
    assert token[:10] not in trend.svg(frame, "t")
