"""Cell sections of a report file: replace one cell's section, keep everything else verbatim;
the data comment survives any flag text; sign flips compare parallelisms."""

from __future__ import annotations

from html import escape as html_escape

from pytest_xlatune.report import sections
from pytest_xlatune.report.markdown import render_document
from pytest_xlatune.report.sections import CellSummary, FlagResult
from pytest_xlatune.results import JobResult
from tests import report_cases as cases

HAND_WRITTEN = "# golden: notes by hand\n\nMemory matrix measured on 2026-04-30.\n"


def section(cell: str, parallelism: str, body: str) -> str:
    return sections.wrap(CellSummary(cell, parallelism, "sparse", "2026-05-01"), body)


def test_rendering_a_cell_replaces_only_its_own_section() -> None:
    pp = section("cells/pp8.yml", "PP=8", "# PP=8 body, written weeks ago")
    old_fsdp = section("cells/fsdp8.yml", "FSDP=8", "# old FSDP body")
    existing = HAND_WRITTEN + "\n" + old_fsdp + "\n---\n\n" + pp
    merged = sections.merge(
        sections.parse(existing), {"cells/fsdp8.yml": section("cells/fsdp8.yml", "FSDP=8", "# new")}
    )
    assert merged == HAND_WRITTEN + "\n" + section("cells/fsdp8.yml", "FSDP=8", "# new") + "\n---\n\n" + pp


def test_a_new_cell_is_appended_after_a_separator() -> None:
    pp = section("cells/pp8.yml", "PP=8", "# PP")
    merged = sections.merge(sections.parse(pp), {"cells/fsdp8.yml": section("cells/fsdp8.yml", "FSDP=8", "# FSDP")})
    assert merged == pp + "\n---\n\n" + section("cells/fsdp8.yml", "FSDP=8", "# FSDP")
    assert [s.cell for s in sections.parse(merged).sections] == ["cells/pp8.yml", "cells/fsdp8.yml"]


def test_hand_written_file_without_markers_is_kept_and_extended() -> None:
    merged = sections.merge(sections.parse(HAND_WRITTEN), {"c.yml": section("c.yml", "PP=8", "# x")})
    assert merged.startswith(HAND_WRITTEN + "\n---\n\n<!-- xlatune:cell PP=8 c.yml -->")


def test_a_report_from_before_markers_is_regenerated_not_kept() -> None:
    legacy = "# golden — XLA / NCCL tuning, FSDP=8\n\n- **Date:** 2026-04-01\n"
    assert sections.parse(legacy).parts == ()


def test_an_unclosed_section_ends_at_the_next_one() -> None:
    broken = section("a.yml", "PP=8", "# a").replace(sections.CLOSE + "\n", "")
    document = sections.parse(broken + section("b.yml", "FSDP=8", "# b"))
    assert [s.cell for s in document.sections] == ["a.yml", "b.yml"]
    assert document.sections[1].text == section("b.yml", "FSDP=8", "# b")


def test_cell_paths_with_spaces_are_identities() -> None:
    text = section("my cells/fsdp 8.yml", "FSDP=8", "# x")
    assert sections.parse(text).sections[0].cell == "my cells/fsdp 8.yml"


def test_data_comment_cannot_be_closed_by_a_flag_or_profile_name() -> None:
    nasty = FlagResult("a-->b", "--xla_x=1 NAME=<!--y-->", 1.0, 2.0, 1.0, 3.0, "better")
    summary = CellSummary("c.yml", "PP=8", "sparse", "2026-05-01", rows=(nasty,))
    text = sections.wrap(summary, "# body")
    data_line = text.splitlines()[1]
    assert data_line.count("-->") == 1 and data_line.endswith(" -->") and "<!--y" not in data_line
    assert sections.parse(text).summaries() == {"c.yml": summary}


def test_unreadable_or_newer_data_is_ignored() -> None:
    assert CellSummary.from_json('{"v": 99, "cell": "x"}') is None
    assert CellSummary.from_json("{not json}") is None
    assert CellSummary.from_json('{"v": 1, "cell": "x"}') is None  # fields missing


def test_summary_round_trips_and_rounds() -> None:
    summary = sections.summarize(cases.winner(), "cells/golden_fsdp8.yml")
    assert CellSummary.from_json(summary.to_json()) == summary
    assert summary.winner == "ag256m" and summary.row("NCCL_NCHANNELS_PER_NET_PEER=8")
    assert all(r.profile != "baseline-deployed" for r in summary.rows)
    assert summary.rows[0].delta_pct == 7.677  # three decimals of a percent


def test_sign_flips_need_another_parallelism() -> None:
    fsdp = sections.summarize(cases.winner(), "cells/fsdp8.yml")
    same = sections.summarize(cases.winner(), "cells/fsdp8-again.yml")
    assert sections.sign_flips(fsdp, [same]) is None
    flips = sections.sign_flips(fsdp, [same, sections.summarize(cases.pp8(), "cells/pp8.yml")])
    assert flips is not None
    assert [c.parallelism for c in flips.columns] == ["FSDP=8", "PP=8"]
    verdicts = {row.profile: row.verdict for row in flips.rows}
    assert verdicts == {
        "ag256m": "sign_flip",
        "overlap2": "same_sign",
        "pp_ag": "same_sign",
        "baseline-no-env": "sign_flip",
    }
    assert "nccl_chan8" not in verdicts  # not measured on PP=8


def test_a_sign_difference_inside_the_noise_is_not_a_flip() -> None:
    mine = CellSummary("a", "FSDP=8", "s", "d", rows=(FlagResult("p", "--f", 1.0, 0.5, -1.0, 2.0, "within_noise"),))
    theirs = CellSummary("b", "PP=8", "s", "d", rows=(FlagResult("q", "--f", 1.0, -6.0, -8.0, -4.0, "worse"),))
    flips = sections.sign_flips(mine, [theirs])
    assert flips is not None and flips.rows[0].verdict == "differs_within_noise"
    assert flips.flip_count == 0


def test_guard_selects_this_parallelism_when_the_winner_is_worse_elsewhere() -> None:
    fsdp, pp = cases.winner(), cases.pp8()
    fsdp_flips = sections.sign_flips(sections.summarize(fsdp, "f"), [sections.summarize(pp, "p")])
    assert fsdp_flips is not None and fsdp_flips.guard == sections.Guard(
        "dcn_pipeline_parallelism", "-le", "1", ("PP=8",)
    )
    pp_flips = sections.sign_flips(sections.summarize(pp, "p"), [sections.summarize(fsdp, "f")])
    assert pp_flips is not None and pp_flips.guard is None  # overlap2 is within noise on FSDP


def test_render_document_uses_summaries_of_a_sibling_file() -> None:
    pp = cases.pp8()
    english = render_document(None, [("cells/pp8.yml", pp)])
    chinese = render_document(
        None, [("cells/fsdp8.yml", cases.winner())], "zh", known=sections.parse(english).summaries()
    )
    assert "## 与其他并行方式的符号翻转" in chinese and "<!-- xlatune:cell PP=8" not in chinese


def test_the_header_counts_the_baseline_runs_its_mean_is_taken_over() -> None:
    # The header said "mean of 2 repeats" while baseline-deployed was the mean of every baseline
    # run (the repeats and the adaptive sweep's later controls): 3 or 10 runs in these cases.
    import re

    from pytest_xlatune.report.markdown import render_tuning_md

    for data in (cases.winner(), cases.well_powered()):
        base = next(r for r in data.leaderboard if r.profile == "baseline-deployed")
        runs = len(base.runs.split(" = mean of ", 1)[1].split(";", 1)[0].split(", "))
        assert runs > data.cell.baseline_repeats  # the case the header miscounted
        text = render_tuning_md(data)
        header = next(line for line in text.splitlines() if line.startswith("- **Steps:**"))
        assert f"(mean of {runs} runs: the {data.cell.baseline_repeats} repeats and" in header, header
        assert re.search(rf"std/mean of the {runs} baseline-deployed runs", text)


def test_why_the_winner_wins_lists_its_jobs_as_the_runs_text_does() -> None:
    # It read `opt_o2` (job 3 5 7); the runs text elsewhere reads `jobs 3, 5, 7`.
    import dataclasses

    from pytest_xlatune.report.markdown import render_tuning_md

    data = cases.winner()
    assert data.winner is not None
    several = dataclasses.replace(data, winner=dataclasses.replace(data.winner, job_ids="3 5 7"))
    why = render_tuning_md(several).split("## Why the winning flag wins", 1)[1]
    assert f"`{data.winner.profile}` (jobs 3, 5, 7) changes" in why
    one = dataclasses.replace(data, winner=dataclasses.replace(data.winner, job_ids="3"))
    assert f"`{data.winner.profile}` (job 3) changes" in render_tuning_md(one)


def wave6_check(baselines: tuple[float, float], checks: tuple[float, ...]) -> tuple[cases.Jobs, list[JobResult]]:
    """A sweep whose recipe `ag256m` wins on the primary tag, and its wave-6 check on `dense`
    (baselines `baselines`) measured len(checks) times; the jobs and the check's runs."""
    jobs = cases.Jobs()
    jobs.wave1()
    jobs.profile("ag256m", 1080.0, "--xla_gpu_all_gather_combine_threshold_bytes=268435456")
    jobs.wave1(baselines=baselines, restore=None, config_tag="dense")
    flags = ("--xla_gpu_all_gather_combine_threshold_bytes=268435456",)
    runs = [
        jobs.add("wave6::best", "cross_config", "ag256m", tgs, config_tag="dense", flags=flags, resolved_from="ag256m")
        for tgs in checks
    ]
    return jobs, runs


def test_a_wave6_check_measured_again_is_one_row_with_the_figure_the_terminal_prints() -> None:
    # A cross-config check re-run before it decided (thresholds.remeasure) showed one row per job,
    # each with its own Δ %, where the item's failure line gives one figure: their mean, jobs 14 15 16.
    from pytest_xlatune.report.markdown import render_tuning_md
    from pytest_xlatune.results import delta_pct

    jobs, runs = wave6_check(baselines=(900.0, 905.0), checks=(880.0, 860.0, 870.0))
    data = cases.data(cases.cell(), jobs)
    assert len(data.cross_config) == 1
    row = data.cross_config[0]
    assert row.tgs == 870.0 and row.delta_pct == delta_pct(870.0, 902.5)
    assert row.runs == f"870.0 = mean of 880.0, 860.0, 870.0; jobs {', '.join(r.job_id for r in runs)}"
    section = render_tuning_md(data).split("## Cross-config confirmation (Wave 6)", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| `dense`")]
    assert len(lines) == 1 and "870.0 = mean of" in lines[0] and "| 95 % interval |" in section


def test_a_wave6_check_passed_on_its_interval_carries_the_items_warning_into_the_reports() -> None:
    # Baselines 2x apart on `dense`: three runs at 650 TGS are -57 % with >= 80 % odds of a
    # regression, yet their 95 % interval includes no change. The item passed with a warning in the
    # terminal; the tuning report (markdown and HTML) showed the row's figures and no word of it.
    from pytest_xlatune.report.html_top import top_html
    from pytest_xlatune.report.markdown import render_tuning_md
    from pytest_xlatune.verdict import choice

    jobs, runs = wave6_check(baselines=(1000.0, 2000.0), checks=(700.0, 650.0, 600.0))
    data = cases.data(cases.cell(), jobs)
    # What the item printed: the sweep's own check of these runs, final after its re-measures.
    measured = [r for r in jobs.results if r.measured]
    gate = choice.regression_gate([r.tgs or 0.0 for r in runs], measured, "dense", 1.0, final=True)
    assert gate is not None
    said = gate.passed_on_the_interval("ag256m", "dense", [r.job_id for r in runs])
    assert "yet its 95 % interval includes no change" in said
    [row] = data.cross_config
    assert row.warning == said
    section = render_tuning_md(data).split("## Cross-config confirmation (Wave 6)", 1)[1].split("\n## ", 1)[0]
    listed = [line for line in section.splitlines() if line.startswith("- ")]
    assert [line.replace("\\[", "[").replace("\\]", "]") for line in listed] == [f"- {said}"]
    assert f"Wave 6 passed with a warning: {html_escape(said)}." in top_html(data)


def test_the_wave1_table_gives_baseline_no_env_the_leaderboards_figure() -> None:
    # The Wave 1 table took one restore_default run's Δ % (the last), where the TL;DR and the
    # leaderboard give the figure of all its runs (the demo: +121.39 % there, +147.82 % here).
    jobs = cases.Jobs()
    jobs.wave1(restore=950.0)
    jobs.add("wave1::restore_default", "restore_default", "restore_default", 1100.0, flags=(cases.AG_DEFAULT,))
    data = cases.data(cases.cell(), jobs)
    row = next(r for r in data.leaderboard if r.profile == "baseline-no-env")
    assert row.job_ids.count(" ") == 1  # both runs behind one figure
    assert data.restore_default_delta["sparse"] == row.delta_pct
