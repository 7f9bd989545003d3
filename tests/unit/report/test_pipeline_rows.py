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
