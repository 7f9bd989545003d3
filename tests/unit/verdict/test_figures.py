"""One figure per settings (verdict/figures.py): the pooled value every output shows, and the jobs
behind it; the report's appendix lists every stored job; "why it wins" finds the winner's
evidence run among them."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_xlatune.report.data import build
from pytest_xlatune.results import Verdict
from pytest_xlatune.verdict import figures, one_run
from pytest_xlatune.verdict.disagreements import disagreements
from pytest_xlatune.verdict.lock import build_lock
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
    assert build_lock(data.cell, jobs.results, "n", "") is None  # no control after its first run
    jobs.control()
    lock = build_lock(data.cell, jobs.results, "n", "")
    assert lock is not None
    [recipe] = lock.recipes
    assert recipe.tgs == pytest.approx(1090.0) and list(recipe.job_ids) == ids
    assert recipe.delta_pct == pytest.approx(row.delta_pct)


def test_appendix_lists_every_job_of_the_store_once() -> None:
    jobs = confirmed_winner()
    retried = dataclasses.replace(jobs.results[-1], job_id="99", verdict=Verdict.RCCL_INIT_FLAKE, tgs=None)
    superseded = dataclasses.replace(jobs.results[2], job_id="98")  # an older result of a run key
    data = build(
        cases.cell(), jobs.results, "n", "maxtext-slurm", today=cases.DATE, jobs=[retried, superseded, *jobs.results]
    )
    listed = [r.job_id for r in data.appendix]
    assert sorted(listed) == sorted({r.job_id for r in jobs.results} | {"98", "99"})
    assert listed == sorted(listed, key=int)


def test_why_uses_the_winners_evidence_run_from_the_store() -> None:
    jobs = confirmed_winner()
    jobs.add("wave1.5::evidence", "evidence", "evidence", 990.0)
    evidence2 = jobs.add("evidence2::winner", "winner_evidence", "winner", 1070.0, flags=(LHS,), resolved_from="lhs")
    current = [r for r in jobs.results if r is not evidence2]  # the plan no longer names it
    without = build(cases.cell(), current, "n", "maxtext-slurm", today=cases.DATE)
    assert without.why is None
    data = build(cases.cell(), current, "n", "maxtext-slurm", today=cases.DATE, jobs=jobs.results)
    assert data.why is not None and data.why.winner.result.job_id == evidence2.job_id


def _first_win_and_its_profiled_rerun(rerun: float) -> cases.Jobs:
    """lhs's one plain run (1100) and the winner's evidence run of lhs (profiler on) at `rerun`."""
    jobs = cases.Jobs()
    jobs.wave1()
    jobs.profile("lhs", 1100.0, LHS)
    jobs.add("evidence2::winner", "winner_evidence", "winner", rerun, flags=(LHS,), resolved_from="lhs")
    return jobs


def test_the_winners_profiled_rerun_confirms_its_win_and_is_one_of_the_figures_runs() -> None:
    from pytest_xlatune.verdict import verdicts

    jobs = _first_win_and_its_profiled_rerun(1090.0)
    first, profiled = jobs.results[-2], jobs.results[-1]
    assert verdicts.pooled_evidence(profiled, jobs.results)
    found = figures.figure(first, jobs.results)
    assert found is not None and found == figures.figure(profiled, jobs.results)
    assert found.runs == ((first.job_id, 1100.0), (profiled.job_id, 1090.0))
    assert found.runs_text() == f"1095.0 = mean of 1100.0, 1090.0 (profiled); jobs {first.job_id}, {profiled.job_id}"
    assert found.comparison is not None and found.comparison.candidate_mean == pytest.approx(1095.0)
    assert found.profiles == ("lhs",)
    assert verdicts.group_of(first, jobs.results) == (1100.0, 1090.0)
    # two runs agree: the win is confirmed once a control ran after its first run
    assert "no control (a baseline run) ran after lhs's first run" in verdicts.confirmation(first, jobs.results)
    assert verdicts.confirmation(first, [*jobs.results, jobs.control()]) == ""
    assert not verdicts.unstable(profiled, jobs.results)
    by_item = figures.by_item(jobs.results)
    assert by_item[profiled.item] is by_item[first.item]


def test_a_profiled_rerun_outside_its_groups_interval_is_flagged_and_never_pooled() -> None:
    from pytest_xlatune.verdict import verdicts

    jobs = _first_win_and_its_profiled_rerun(1300.0)  # +18 % over its own plain run: an outlier
    first, profiled = jobs.results[-2], jobs.results[-1]
    assert not verdicts.pooled_evidence(profiled, jobs.results)
    assert verdicts.unstable(profiled, jobs.results)  # flagged, as before
    assert verdicts.group_of(first, jobs.results) == (1100.0,)  # the win's figure is its plain run alone
    found = figures.figure(first, jobs.results)
    assert found is not None and found.runs == ((first.job_id, 1100.0),)
    alone = figures.figure(profiled, jobs.results)
    assert alone is not None and alone.runs == ((profiled.job_id, 1300.0),)
    assert any(d.runs == (profiled,) for d in disagreements(jobs.results, "sparse"))


def test_a_profiled_rerun_with_too_few_steady_steps_is_not_pooled() -> None:
    from pytest_xlatune.verdict import verdicts

    jobs = _first_win_and_its_profiled_rerun(1090.0)
    short = dataclasses.replace(jobs.results[-1], tgs_values=(1090.0, 1090.0), steps_used=(9, 10))
    results = [*jobs.results[:-1], short]
    assert one_run.POOLED_MIN_STEPS > 2
    assert not verdicts.pooled_evidence(short, results)
    assert verdicts.group_of(results[-2], results) == (1100.0,)


def test_a_plain_run_of_the_winners_settings_is_a_plain_run_whatever_its_kind() -> None:
    # The gate repair's confirming run (`repair::confirm`) resolves from the winner like an
    # evidence run but runs without the profiler: its steps from 5 on are measured, so it is one
    # of its settings' runs as a repeat is — no "(profiled)" mark, no outlier guard that would
    # drop a plain repeat from the noise it shows.
    from pytest_xlatune.verdict import verdicts

    jobs = _first_win_and_its_profiled_rerun(1300.0)
    first = jobs.results[-2]
    plain = dataclasses.replace(jobs.results[-1], steps_used=(5, 6, 7))
    results = [*jobs.results[:-1], plain]
    assert one_run.profiled(jobs.results[-1]) and not one_run.profiled(plain)
    assert verdicts.group_of(first, results) == (1100.0, 1300.0)  # pooled although 18 % apart
    found = figures.figure(first, results)
    assert found is not None and found.runs_text() == (
        f"1200.0 = mean of 1100.0, 1300.0; jobs {first.job_id}, {plain.job_id}"
    )
    assert found == figures.figure(plain, results)
    assert not verdicts.pooled_evidence(plain, results)  # not a profiled run that joined: a plain one


def test_a_shared_duplicate_of_the_baseline_shows_the_baselines_figure_not_its_copied_job() -> None:
    """A profile whose flag is the one the env file deploys (the catalog's opt_o0 under a deployed
    -O0) shares the baseline's job: its figure is the baseline's, Δ 0, not the copied job's TGS
    compared with a baseline mean that holds that same job."""
    jobs = cases.Jobs()
    jobs.wave1(baselines=(1000.0, 1040.0, 1020.0), restore=None)
    first = jobs.results[0]
    shared = dataclasses.replace(
        first,
        key="opt_o0",
        item="wave3::opt_o0[sparse]",
        wave="wave3",
        profile="opt_o0",
        kind="profile",
        xla_flags=("--xla_backend_optimization_level=0",),
        shared_from=first.item,
    )
    results = [*jobs.results, shared]
    base, dup = figures.figure(first, results), figures.figure(shared, results)
    assert base is not None and dup is not None
    assert (dup.tgs, dup.job_ids) == (base.tgs, base.job_ids) and dup.tgs == pytest.approx(1020.0)
    assert dup.comparison is not None and dup.comparison.delta_pct == pytest.approx(0.0)
    assert dup.comparison.verdict.value == "within_noise"


def test_the_gate_old_image_baseline_repeats_are_one_figure() -> None:
    """`baseline-oldimage` and `baseline-r2-oldimage` run the same (no) settings on the lock's
    image: one figure with every job, as the gate judges them, not one figure per repeat's name."""
    jobs = cases.Jobs()
    jobs.wave1()
    old = [
        dataclasses.replace(jobs.add(f"gate::{name}", "gate_old_baseline", name, tgs), image="old-image")
        for name, tgs in (("baseline-oldimage", 1000.0), ("baseline-r2-oldimage", 1010.0))
    ]
    jobs.results[-2:] = old
    found = figures.by_item(jobs.results)
    first, second = (found[r.item] for r in old)
    assert first is second and first.job_ids == tuple(r.job_id for r in old)
    assert first.tgs == pytest.approx(1005.0)
