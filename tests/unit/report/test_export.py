"""Exports: one DataFrame row per latest result, written as CSV and JSON."""

from __future__ import annotations

import io
import json
import math
from dataclasses import replace

import pandas as pd

from pytest_xlatune.evidence.inert import inert_text
from pytest_xlatune.report.export import COLUMNS, export_texts, results_frame
from pytest_xlatune.report.final import figure_properties
from pytest_xlatune.verdict import figures, verdicts
from tests import report_cases as cases


def winner_results() -> list:
    jobs = cases.Jobs()
    jobs.wave1()
    jobs.profile("ag256m", 1080.0, "--xla_gpu_all_gather_combine_threshold_bytes=268435456")
    jobs.profile("nccl_chan8", 1001.0, env=(("NCCL_NCHANNELS_PER_NET_PEER", "8"),))
    jobs.profile(
        "pp_all_reduce",
        None,
        "--xla_gpu_enable_pipelined_all_reduce=true",
        verdict=cases.Verdict.OOM,
        reason="out of memory",
    )
    return jobs.results


def test_frame_has_one_row_per_result_in_job_order_with_the_documented_columns() -> None:
    results = winner_results()
    frame = results_frame(list(reversed(results)))
    assert tuple(frame.columns) == COLUMNS
    assert list(frame["job_id"]) == [r.job_id for r in results]
    assert list(frame["item"])[:4] == [
        "wave1::baseline[sparse]",
        "wave1::baseline-r2[sparse]",
        "wave1::baseline-r3[sparse]",
        "wave1::restore_default[sparse]",
    ]


def test_profile_rows_carry_the_report_delta_and_interval_baselines_and_failures_none() -> None:
    results = winner_results()
    frame = results_frame(results).set_index("profile")
    expected = verdicts.compare([1080.0], results, "sparse")
    assert expected is not None
    row = frame.loc["ag256m"]
    assert math.isclose(row["delta_pct"], expected.delta_pct)
    assert (row["ci_low"], row["ci_high"]) == (expected.ci_low_pct, expected.ci_high_pct)
    assert row["direction"] == "better" and row["verdict"] == "success"
    assert row["flags"] == "--xla_gpu_all_gather_combine_threshold_bytes=268435456"
    assert frame.loc["nccl_chan8", "env"] == "NCCL_NCHANNELS_PER_NET_PEER=8"
    assert math.isnan(frame.loc["baseline", "delta_pct"]) and frame.loc["baseline", "direction"] == ""
    oom = frame.loc["pp_all_reduce"]
    assert oom["verdict"] == "oom" and math.isnan(oom["tgs"]) and math.isnan(oom["delta_pct"])


def test_an_inert_candidate_names_its_source_and_why_in_the_words_of_junit() -> None:
    """`inert` is the stored reason, the text junit's xlatune_inert and the terminal line carry."""
    results = winner_results()
    base = results[0]
    why = inert_text(base.item)
    inert = replace(
        results[-2],
        item="wave2::vec256[sparse]",
        profile="vec256",
        shared_from=base.item,
        inert=True,
        reason=why,
        tgs=base.tgs,
    )
    frame = results_frame([*results, inert]).set_index("profile")
    assert (frame.loc["vec256", "shared_from"], frame.loc["vec256", "inert"]) == (base.item, why)
    assert (frame.loc["ag256m", "shared_from"], frame.loc["ag256m", "inert"]) == ("", "")
    records = json.loads(export_texts([*results, inert])[".json"])
    assert [(r["shared_from"], r["inert"]) for r in records if r["profile"] == "vec256"] == [(base.item, why)]


def test_times_are_utc_timestamps() -> None:
    frame = results_frame(winner_results())
    first = frame["submitted_at"].iloc[0]
    assert str(frame["submitted_at"].dtype).endswith("UTC]")
    assert first == pd.Timestamp(cases.T0 + 600, unit="s", tz="UTC")


def test_csv_and_json_round_trip() -> None:
    results = winner_results()
    texts = export_texts(results)
    csv = pd.read_csv(io.StringIO(texts[".csv"]), dtype={"job_id": str})
    assert list(csv.columns) == list(COLUMNS) and len(csv) == len(results)
    assert csv.loc[csv["profile"] == "ag256m", "tgs"].item() == 1080.0
    records = json.loads(texts[".json"])
    assert [r["job_id"] for r in records] == [r.job_id for r in results]
    assert records[0]["submitted_at"].endswith("Z") and records[0]["delta_pct"] is None
    assert "\\/" not in texts[".json"] and records[0]["log_path"].startswith("outputs/")


def test_empty_results_give_headers_only() -> None:
    texts = export_texts([])
    assert texts[".csv"].strip() == ",".join(COLUMNS)
    assert json.loads(texts[".json"]) == []


def test_a_pooled_rows_step_is_its_figures_as_junit_shows_it() -> None:
    """Each baseline repeat row carries the baseline's figure (every repeat pooled) and its mean
    step: the number junit's xlatune_step_seconds and the report's step column show."""
    results = winner_results()
    frame = results_frame(results).set_index("item")
    found = figures.by_item(results)
    for item in ("wave1::baseline[sparse]", "wave1::baseline-r2[sparse]", "wave2::ag256m[sparse]"):
        junit = dict(figure_properties(found[item]))
        assert frame.loc[item, "step_seconds"] == junit["xlatune_step_seconds"]
        assert frame.loc[item, "tgs"] == junit["xlatune_tgs"]
    steps = {r.step_seconds for r in results if r.kind == "baseline"}
    assert len(steps) > 1  # the repeats' own steps differ: the row shows their mean, not its own
