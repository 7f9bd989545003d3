"""One figure per settings (judge/figures.py): the pooled value every output shows, and the jobs
behind it; the report's appendix lists every stored job; "why it wins" finds the winner's
evidence run among them."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_xlatune.judge import figures
from pytest_xlatune.judge.lock import build_lock
from pytest_xlatune.report.data import build
from pytest_xlatune.results import Verdict
from tests import report_cases as cases

LHS = "--xla_gpu_enable_latency_hiding_scheduler=true"


def confirmed_winner() -> cases.Jobs:
    """A winner and its confirmation (the same settings, another item): 1100 and 1080."""
    jobs = cases.Jobs()
    jobs.wave1()
    jobs.profile("lhs", 1100.0, LHS)
    jobs.add("wave4::lhs-confirm", "profile", "lhs", 1080.0, flags=(LHS,))
    return jobs


def test_identical_settings_are_one_figure_with_its_runs() -> None:
    jobs = confirmed_winner()
    first, again = jobs.results[-2], jobs.results[-1]
    found = figures.figure(first, jobs.results)
    assert found is not None and found == figures.figure(again, jobs.results)
    assert found.tgs == pytest.approx(1090.0)
    assert found.runs_text() == f"1090.0 = mean of 1100.0, 1080.0; jobs {first.job_id}, {again.job_id}"
    assert found.comparison is not None and found.comparison.candidate_mean == pytest.approx(1090.0)
    by_item = figures.by_item(jobs.results)
    assert by_item[first.item] is by_item[again.item]
    # the baseline repeats too: one figure for both items, no Δ % of its own
    base = by_item["wave1::baseline[sparse]"]
    assert base.tgs == pytest.approx(1003.0) and base.comparison is None and len(base.runs) == 3


def test_leaderboard_and_lock_show_the_pooled_figure_and_every_job() -> None:
    jobs = confirmed_winner()
    ids = [r.job_id for r in jobs.results[-2:]]
    data = cases.data(cases.cell(), jobs)
    [row] = [r for r in data.leaderboard if r.profile == "lhs"]  # one row for both runs
    assert row.tgs == pytest.approx(1090.0) and row.job_ids.split() == ids and row.winner
    lock = build_lock(data.cell, jobs.results, "n", "")
    assert lock is not None
    [recipe] = lock.recipes
    assert recipe.tgs == pytest.approx(1090.0) and list(recipe.job_ids) == ids
    assert recipe.delta_pct == pytest.approx(row.delta_pct)


def test_appendix_lists_every_job_of_the_store_once() -> None:
    jobs = confirmed_winner()
    retried = dataclasses.replace(jobs.results[-1], job_id="99", verdict=Verdict.RCCL_INIT_FLAKE, tgs=None)
    superseded = dataclasses.replace(jobs.results[2], job_id="98")  # an older result of a run key
    data = build(cases.cell(), jobs.results, "n", "maxtext-slurm", today=cases.DATE,
                 jobs=[retried, superseded, *jobs.results])
    listed = [r.job_id for r in data.appendix]
    assert sorted(listed) == sorted({r.job_id for r in jobs.results} | {"98", "99"})
    assert listed == sorted(listed, key=int)


def test_why_uses_the_winners_evidence_run_from_the_store() -> None:
    jobs = confirmed_winner()
    jobs.add("wave1.5::evidence", "evidence", "evidence", 990.0)
    evidence2 = jobs.add("evidence2::winner", "winner_evidence", "winner", 1070.0, flags=(LHS,),
                         resolved_from="lhs")
    current = [r for r in jobs.results if r is not evidence2]  # the plan no longer names it
    without = build(cases.cell(), current, "n", "maxtext-slurm", today=cases.DATE)
    assert without.why is None
    data = build(cases.cell(), current, "n", "maxtext-slurm", today=cases.DATE, jobs=jobs.results)
    assert data.why is not None and data.why.winner.result.job_id == evidence2.job_id
