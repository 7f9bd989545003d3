"""The pipeline-shapes table shows each shape's figure as the leaderboard does: the mean of every
run of its settings, its Δ % with its interval and verdict, and the jobs behind it (not the first run's job alone)."""

from __future__ import annotations

from pytest_xlatune.cell.values import PipelineShape
from pytest_xlatune.report.data import build
from pytest_xlatune.report.markdown import render_document
from tests import report_cases as cases


def test_a_shape_measured_twice_is_one_row_with_both_jobs_as_in_the_leaderboard() -> None:
    shapes = tuple(PipelineShape(m) for m in (2, 8))
    jobs = cases.Jobs(1)
    jobs.wave1(baselines=(700.0, 704.0, 702.0), restore=None, config_tag="default")
    for shape, tgs in ((shapes[0], 520.0), (shapes[1], 1230.0), (shapes[1], 1330.0)):
        jobs.add(
            f"wave5::{shape.name}",
            "pipeline_shape",
            shape.name,
            tgs,
            config_tag="default",
            overrides=(("num_pipeline_microbatches", str(shape.microbatches)),),
        )
    data = build(cases.cpu_cell("cpu_pp4", (("PP", 4),), pipeline_shapes=shapes), jobs.results, "localhost", "local")
    board = next(row for row in data.leaderboard if row.profile == "mb8_v1")
    assert data.pipeline is not None
    rows = [row for row in data.pipeline.rows if row.profile == "mb8_v1"]
    assert len(rows) == 1 and len(board.job_ids.split()) == 2
    assert (rows[0].tgs, rows[0].delta_pct, rows[0].job_ids) == (board.tgs, board.delta_pct, board.job_ids)
    # and its interval and verdict: a Δ % alone read as a win where the terminal said "within noise"
    assert (rows[0].ci_low, rows[0].ci_high, rows[0].judged) == (board.ci_low, board.ci_high, board.judged)
    assert board.ci_low is not None and board.ci_high is not None
    text = render_document(None, [("cells/cpu_pp4.yml", data)], "en")
    interval = f"[{board.ci_low:+.2f}, {board.ci_high:+.2f}] %"
    assert (
        f"| mb8_v1 | 8 | 1 | 27.27 % | {board.tgs:,.1f} | {board.delta_pct:+.2f} % | {interval} | {board.judged} "
        f"| {board.job_ids} |"
    ) in text


def _pipeline_report(baselines: tuple[float, ...], tgs: dict[int, float], language: str = "en") -> str:
    """The wave-5 section of a PP=4 cell whose shapes (microbatches → TGS) ran once each."""
    shapes = tuple(PipelineShape(m) for m in tgs)
    jobs = cases.Jobs(1)
    jobs.wave1(baselines=baselines, restore=None, config_tag="default")
    for shape in shapes:
        jobs.add(
            f"wave5::{shape.name}",
            "pipeline_shape",
            shape.name,
            tgs[shape.microbatches],
            config_tag="default",
            overrides=(("num_pipeline_microbatches", str(shape.microbatches)),),
        )
    data = build(cases.cpu_cell("cpu_pp4", (("PP", 4),), pipeline_shapes=shapes), jobs.results, "localhost", "local")
    text = render_document(None, [("cells/cpu_pp4.yml", data)], language)
    heading = "## 流水线形状 (Pipeline shapes, Wave 5)" if language == "zh" else "## Pipeline shapes (Wave 5)"
    return text.split(heading)[1]


def test_an_order_within_the_noise_is_not_claimed_to_match_the_prediction() -> None:
    # Baselines 150 % apart: every shape is "noise too large to judge", and so are their differences.
    wave5 = _pipeline_report((400.0, 1000.0), {2: 500.0, 4: 600.0, 8: 700.0})
    assert wave5.count("noise too large to judge") == 3
    assert "matches the predicted one" not in wave5
    assert "only within the run-to-run noise: it neither confirms nor refutes the prediction." in wave5
    zh = _pipeline_report((400.0, 1000.0), {2: 500.0, 4: 600.0, 8: 700.0}, "zh")
    assert "实测顺序与预测一致" not in zh and "既不能证实也不能否定预测" in zh


def test_an_order_beyond_the_noise_matches_the_prediction() -> None:
    wave5 = _pipeline_report((700.0, 704.0, 702.0), {2: 520.0, 4: 690.0, 8: 1230.0})
    assert (
        "The measured order matches the predicted one: every shape with a smaller bubble measured faster, "
        "beyond the run-to-run noise."
    ) in wave5


def test_shapes_within_the_noise_of_each_other_are_named_and_not_counted_as_confirming() -> None:
    wave5 = _pipeline_report((700.0, 704.0, 702.0), {2: 520.0, 4: 1225.0, 8: 1230.0})
    assert "matches the predicted one" not in wave5
    assert (
        "No shape with a smaller bubble measured slower, but `mb8_v1` vs `mb4_v1` differ only within the "
        "run-to-run noise: the measured order confirms the predicted one only between shapes that differ beyond it."
    ) in wave5
    zh = _pipeline_report((700.0, 704.0, 702.0), {2: 520.0, 4: 1225.0, 8: 1230.0}, "zh")
    assert "实测顺序与预测一致" not in zh and "但 `mb8_v1` 与 `mb4_v1` 之差只在运行间噪声之内" in zh
