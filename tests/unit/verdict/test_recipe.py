"""choice.recipe and the lock: which run's settings are the deployable recipe."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_xlatune.cell.load import load_cell
from pytest_xlatune.report.markdown import render_tuning_md
from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.verdict import verdicts
from pytest_xlatune.verdict.choice import choose, recipe, settings_count, winners
from pytest_xlatune.verdict.disagreements import disagreements
from pytest_xlatune.verdict.lock import build_lock
from pytest_xlatune.verdict.numerics import Mode
from pytest_xlatune.verdict.verdicts import noise

CELL = """\
model_tag: rc
nodes: 1
parallelism: FSDP=8
waves:
  2:
    - {name: a, xla_flags: [--xla_a=1], overrides: {remat_policy: full}}
    - {name: b, xla_flags: [--xla_b=1]}
  3:
    stack: 2
"""


def run(
    profile: str,
    tgs: float,
    kind: str = "profile",
    wave: str = "wave2",
    job: str = "",
    resolved_from: str = "",
    flags: tuple[str, ...] = (),
) -> JobResult:
    return JobResult(
        key=f"{profile}-{job}",
        item=f"{wave}::{profile}[default]",
        wave=wave,
        profile=profile,
        config_tag="default",
        kind=kind,
        job_id=job or profile,
        verdict=Verdict.SUCCESS,
        tgs=tgs,
        resolved_from=resolved_from,
        xla_flags=flags,
    )


def confirmed(profile: str, tgs: float, flags: tuple[str, ...] = ()) -> JobResult:
    """The winner's evidence re-run (profiler on) of `profile`, agreeing with it."""
    return dataclasses.replace(
        run("winner", tgs, kind="winner_evidence", wave="evidence2", job=f"w{profile}", flags=flags),
        resolved_from=profile,
    )


BASELINES = [
    run("baseline", 1000.0, kind="baseline", wave="wave1", job="1"),
    run("baseline-r2", 1004.0, kind="baseline", wave="wave1", job="2"),
]
# A control: the baseline measured again after the candidates (job ids sort by length, then text),
# at the baselines' mean; a win no control brackets is never locked (verdicts.unbracketed).
CONTROL = run("baseline", 1002.0, kind="baseline", wave="wave1", job="z-control-after-the-candidates")


def test_a_stack_beating_the_best_single_winner_beyond_noise_is_the_recipe() -> None:
    results = [
        *BASELINES,
        run("a", 1100.0),
        run("b", 1060.0),
        run("stack_top2", 1180.0, kind="stack", wave="wave3", resolved_from="a+b"),
    ]
    assert recipe(results, "default").profile == "stack_top2"


def test_a_stack_within_noise_of_the_best_single_gives_way_to_the_simpler_recipe() -> None:
    results = [
        *BASELINES,
        run("a", 1100.0),
        run("b", 1060.0),
        run("stack_top2", 1104.0, kind="stack", wave="wave3", resolved_from="a+b"),
    ]
    assert recipe(results, "default").profile == "a"


def test_no_run_beyond_noise_means_no_recipe() -> None:
    assert recipe([*BASELINES, run("a", 1008.0), run("b", 990.0)], "default") is None


def test_the_lock_holds_a_winning_stack_with_the_overrides_of_its_profiles(tmp_path: Path) -> None:
    path = tmp_path / "rc.yml"
    path.write_text(CELL)
    results = [
        *BASELINES,
        run("a", 1100.0, flags=("--xla_a=1",)),
        run("b", 1060.0, flags=("--xla_b=1",)),
        run("stack_top2", 1180.0, kind="stack", wave="wave3", resolved_from="a+b", flags=("--xla_a=1", "--xla_b=1")),
        confirmed("stack_top2", 1178.0, flags=("--xla_a=1", "--xla_b=1")),
        CONTROL,
    ]
    lock = build_lock(load_cell(path), results, "localhost", "")
    assert lock is not None
    [locked] = lock.recipes
    assert (locked.profile, locked.xla_flags, locked.overrides) == (
        "stack_top2",
        ("--xla_a=1", "--xla_b=1"),
        (("remat_policy", "full"),),
    )
    assert locked.tgs == 1180.0 and locked.ci_low_pct > 0


def _lock(tmp_path: Path, results: list[JobResult], day: int = 1):
    import datetime as dt

    path = tmp_path / "rc.yml"
    path.write_text(CELL)
    return build_lock(load_cell(path), [*results, CONTROL], "localhost", "", today=dt.date(2026, 12, day))


def test_lock_change_only_after_a_whole_sweep_with_another_recipe(tmp_path: Path) -> None:
    from pytest_xlatune.verdict.lock import lock_change

    first = _lock(tmp_path, [*BASELINES, run("a", 1100.0), run("b", 1060.0), confirmed("a", 1098.0)])
    same_next_day = _lock(tmp_path, [*BASELINES, run("a", 1100.0), run("b", 1060.0), confirmed("a", 1098.0)], day=2)
    other = _lock(tmp_path, [*BASELINES, run("a", 1010.0), run("b", 1160.0), confirmed("b", 1161.0)])
    assert lock_change(None, first, []) == (True, "new lock: a [default] +9.78 % (job a)")
    assert lock_change(first, same_next_day, []) == (
        False,
        "the sweep found the recipe on file (a [default] +9.78 % (job a))",
    )
    assert lock_change(first, other, []) == (
        True,
        "recipe changed: a [default] +9.78 % (job a) → b [default] +15.77 % (job b)",
    )
    changed, why = lock_change(first, other, ["wave2::a[default]"])
    assert not changed and why.startswith("1 item(s) of the cell did not run in this session (wave2::a[default])")
    assert lock_change(first, None, []) == (
        False,
        "the sweep found no recipe better than baseline-deployed beyond the noise; the lock on file is kept",
    )
    changed, why = lock_change(None, first, [f"wave2::p{i}[default]" for i in range(5)])
    assert not changed and "(wave2::p0[default], wave2::p1[default], wave2::p2[default] and 2 more)" in why
    changed, why = lock_change(first, other, [], stopped=True)  # a STOP in the cell's last item
    assert not changed and why.startswith("the session stopped (xlatune STOP above)")


# ---- simplest of the tied winners, the numerics guard, noise from identical settings, power --

LOSSES = tuple(enumerate((7.444, 5.975, 4.481, 3.624, 2.741, 1.826, 1.392, 1.001, 0.709, 0.469)))
BF16 = tuple(enumerate((7.444, 5.973, 4.475, 3.618, 2.739, 1.822, 1.389, 0.998, 0.707, 0.468)))


def lossy(result: JobResult, losses: tuple[tuple[int, float], ...] = LOSSES) -> JobResult:
    return dataclasses.replace(result, losses=losses)


BASE_LOSSY = [lossy(r) for r in BASELINES]


def test_winners_within_the_noise_of_each_other_pick_the_one_with_fewer_settings() -> None:
    # The demo run of the issue: o2_no_fastmath (+108.9 %, two flags) over opt_o1 (+106.9 %, one).
    results = [
        *BASELINES,
        run("o2_no_fastmath", 1090.0, flags=("--xla_o=2", "--xla_fm=false")),
        run("opt_o1", 1080.0, flags=("--xla_o=1",)),
    ]
    choice = choose(results, "default")
    assert choice is not None and choice.recipe.profile == "opt_o1"
    assert choice.fastest.profile == "o2_no_fastmath" and choice.simpler_than_fastest
    assert [r.profile for r, _ in choice.tied] == ["o2_no_fastmath", "opt_o1"]
    [(_, vs_fastest)] = [(r, c) for r, c in choice.tied if r.profile == "opt_o1"]
    assert (
        vs_fastest.delta_pct == pytest.approx(-0.917, abs=1e-3) and vs_fastest.ci_low_pct < 0 < vs_fastest.ci_high_pct
    )


def test_ties_are_judged_on_every_run_of_the_settings_and_the_tags_overrides_are_no_setting() -> None:
    """The figure of each winner is the mean of all its runs (the leaderboard's): o2's first job
    read lower than o1, its repeat higher, so o2 is the fastest; both deploy one flag, the
    config tag's override (every run of the tag carries it) is not one of their settings."""
    tag = (("mlp_dim", "128"),)
    base = [dataclasses.replace(r, overrides=tag) for r in BASELINES]
    o2 = [
        dataclasses.replace(run("o2", v, job=j, flags=("--xla_o=2",)), overrides=tag)
        for v, j in ((1083.0, "3"), (1100.0, "8"))
    ]
    o1 = dataclasses.replace(run("o1", 1085.0, job="4", flags=("--xla_o=1",)), overrides=tag)
    results = [*base, *o2, o1]
    choice = choose(results, "default")
    assert choice is not None and choice.fastest.profile == "o2" and choice.recipe.profile == "o2"
    assert [r.profile for r, _ in choice.tied] == ["o2", "o1"]  # one row per settings
    assert settings_count(o2[0], results) == 1 and settings_count(o2[0]) == 2


def test_a_winner_with_more_settings_beyond_the_noise_of_the_simpler_one_stays_the_recipe() -> None:
    results = [
        *BASELINES,
        run("two", 1200.0, flags=("--xla_o=2", "--xla_fm=false")),
        run("one", 1080.0, flags=("--xla_o=1",)),
    ]
    choice = choose(results, "default")
    assert choice is not None and choice.recipe.profile == "two" and [r.profile for r, _ in choice.tied] == ["two"]


def test_a_numerics_changed_winner_is_never_the_recipe_the_stack_or_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "rc.yml"
    path.write_text(CELL)
    fast = lossy(run("a", 1150.0, flags=("--xla_a=1",)), BF16)
    results = [
        *BASE_LOSSY,
        fast,
        lossy(run("b", 1080.0, flags=("--xla_b=1",))),
        confirmed("a", 1149.0, ("--xla_a=1",)),
        confirmed("b", 1081.0, ("--xla_b=1",)),
        CONTROL,
    ]
    assert recipe(results, "default").profile == "b"
    assert [r.profile for r in winners(results, "default", 4)] == ["b"]  # what a stack takes
    lock = build_lock(load_cell(path), results, "localhost", "")
    assert lock is not None and [r.profile for r in lock.recipes] == ["b"]
    # --xlatune-numerics=warn: the user changes numerics on purpose; the faster run wins.
    assert recipe(results, "default", Mode.WARN).profile == "a"
    assert [r.profile for r in winners(results, "default", 4, mode=Mode.WARN)] == ["a", "b"]
    warned = build_lock(load_cell(path), results, "localhost", "", mode=Mode.WARN)
    assert warned is not None and warned.recipes[0].profile == "a"


def test_every_run_with_identical_settings_feeds_the_noise() -> None:
    # Three tight baselines alone: their own CV, 2 df (no prior). A duplicate pair measured 12 %
    # apart (identical effective flags: last-wins) counts as well and disagrees beyond the others.
    base = [*BASELINES, run("baseline-r3", 1002.0, kind="baseline", wave="wave1", job="3")]
    dup = [
        run("opt_o2", 1000.0, flags=("--xla_o=2",), job="5"),
        run("restore_default", 1120.0, kind="restore_default", wave="wave1", flags=("--xla_o=0", "--xla_o=2"), job="6"),
    ]
    tight = noise(base, "default")
    assert tight.groups == 1 and tight.df == 2 and not tight.assumed and tight.cv_pct == pytest.approx(0.2, abs=0.001)
    # Beyond the others' noise (F test at 99 %): unstable, so its spread is its own (a wide
    # interval, never a win) and does not widen everyone else's.
    assert noise(base + dup, "default") == tight
    assert verdicts.compare_result(dup[0], base + dup).unstable  # type: ignore[union-attr]
    agreeing = [dup[0], dataclasses.replace(dup[1], tgs=1004.0)]
    pooled = noise(base + agreeing, "default")
    assert pooled.groups == 2 and pooled.n == 5 and pooled.df == 3
    [flagged] = disagreements(base + dup, "default")
    assert {r.job_id for r in flagged.runs} == {"5", "6"} and flagged.spread_pct == pytest.approx(11.3, abs=0.1)
    # Evidence runs (profiled) never pool with plain runs.
    profiled = run("evidence", 1300.0, kind="evidence", wave="wave1.5", job="7")
    assert noise([*base, profiled], "default") == tight


def test_an_under_powered_null_sweep_is_not_called_bounded_and_a_well_powered_one_is() -> None:
    from tests import report_cases

    under = report_cases.under_powered()
    assert under.profiles_tested >= 25 and under.power is not None and not under.power.enough
    assert under.power.detectable_pct > 2.0 and under.power.runs_needed == 3
    assert "under-powered" in render_tuning_md(under) and "structurally bounded at" not in render_tuning_md(under)
    well = report_cases.well_powered()
    assert well.power is not None and well.power.enough and well.power.detectable_pct < 2.0
    assert "the cell is structurally bounded at the editable scope" in render_tuning_md(well)


def test_the_detectable_effect_shrinks_with_repeats() -> None:
    from pytest_xlatune.verdict.stats import detectable_effect, run_noise

    two = run_noise([1000.0, 1006.0])
    # 0.42 % over 1 df (no prior): t quantiles of 1 df make it 7.6 % (3.2 % with the old prior's 5 df)
    assert detectable_effect(two, 1, 2) == pytest.approx(7.57, abs=0.01)
    assert detectable_effect(two, 4, 4) < detectable_effect(two, 2, 2) < detectable_effect(two, 1, 2)


def test_a_profiled_re_run_on_fewer_than_three_steady_steps_neither_confirms_nor_contradicts() -> None:
    """A 10-step cell measures the winner's evidence run on step 9 alone, right after the profiler:
    its reading (here far below) does not contradict two agreeing runs, nor confirm one run alone."""
    two = [run("fast", 1100.0, job="3", flags=("--xla_f=1",)), run("fast", 1104.0, job="4", flags=("--xla_f=1",))]
    short = dataclasses.replace(confirmed("fast", 700.0, flags=("--xla_f=1",)), steps_used=(9,), tgs_values=(700.0,))
    assert verdicts.confirmation(two[0], [*BASELINES, *two, short, CONTROL]) == ""
    assert "rests on one run" in verdicts.confirmation(two[0], [*BASELINES, two[0], short])
    longer = dataclasses.replace(short, steps_used=(9, 10, 11), tgs_values=(700.0, 700.0, 700.0))
    assert "contradicts" in verdicts.confirmation(two[0], [*BASELINES, *two, longer])


def test_the_lock_message_lists_its_jobs_as_the_runs_text_does(tmp_path: Path) -> None:
    """A figure pooled from runs stored out of job order (an adaptive result holding its repeats):
    the lock, its message and the runs text list them `jobs 3, 5, 20`, never `job 3 20 5`."""
    from pytest_xlatune.verdict import figures
    from pytest_xlatune.verdict.lock import lock_change

    pooled = dataclasses.replace(run("a", 1100.0, job="3"), runs=(("3", 1100.0), ("20", 1102.0)))
    results = [*BASELINES, pooled, run("a", 1098.0, job="5"), run("b", 1060.0), confirmed("a", 1099.0)]
    lock = _lock(tmp_path, results)
    assert lock is not None
    [locked] = lock.recipes
    assert locked.job_ids == ("3", "5", "20")
    fig = figures.figure(pooled, results)
    assert fig is not None and fig.runs_text().endswith("; jobs 3, 5, 20")
    changed, why = lock_change(None, lock, [])
    assert changed and why.endswith("(jobs 3, 5, 20)")


def test_wave6_never_fails_runs_whose_interval_includes_no_change_and_names_what_it_re_ran() -> None:
    """Two baselines 2x apart (a loaded machine): three runs at 650 TGS are -57 % with 85 % odds of a
    regression, yet their 95 % interval includes no change (the figure reads `within noise`): the
    final check passes rather than fail on a regression the data does not show. A clear one fails,
    naming the best profile as such when there is no recipe."""
    from pytest_xlatune.verdict import choice, stats

    loose = [
        run("baseline", 1000.0, kind="baseline", wave="wave1", job="1"),
        run("baseline-r2", 2000.0, kind="baseline", wave="wave1", job="2"),
    ]
    unsure = choice.regression_gate([700.0, 650.0, 600.0], loose, "default", 1.0, final=True)
    assert unsure is not None and unsure.comparison.ci_low_pct < 0 < unsure.comparison.ci_high_pct
    assert unsure.odds is not None and unsure.odds >= stats.DEFAULT_FAIL_PROBABILITY
    assert unsure.decision is stats.GateDecision.PASS
    # the pass says why, as the image gate's warning does (wave 6 passed silently)
    said = unsure.passed_on_the_interval("a", "long", ["12", "10", "11"])
    assert said.startswith("'a' on config tag 'long': TGS 650.0") and "jobs 10, 11, 12; passed: " in said
    assert f"passed: {unsure.odds * 100:.0f} % odds" in said and "its 95 % interval includes no change" in said
    clear = choice.regression_gate([700.0, 650.0, 600.0], BASELINES, "default", 1.0, final=True)
    assert clear is not None and clear.decision is stats.GateDecision.FAIL
    assert clear.message("a", "long", ["10", "9"], recipe=False).startswith(
        "the best profile 'a' (no recipe) regresses config tag 'long': TGS 650.0"
    )
    assert clear.message("a", "long", ["10", "9"]).startswith("recipe 'a' regresses config tag 'long'")
    assert clear.message("a", "long", ["10", "9"]).endswith("jobs 9, 10")
    assert clear.passed_on_the_interval("a", "long", ["10", "9"]) == ""


PP_CELL = """\
model_tag: pp
nodes: 1
parallelism: PP=2
overrides: {num_decoder_layers: 4}
waves:
  2:
    - {name: a, xla_flags: [--xla_a=1]}
pipeline_shapes:
  - {microbatches: 4}
  - {microbatches: 8, virtual_stages: 2}
"""


def shape(name: str, tgs: float, job: str, overrides: tuple[tuple[str, str], ...]) -> JobResult:
    return dataclasses.replace(run(name, tgs, kind="pipeline_shape", wave="wave5", job=job), overrides=overrides)


def test_a_winning_pipeline_shape_is_the_recipe_the_report_stars_and_the_lock_holds(tmp_path: Path) -> None:
    """No profile wins; the shape mb4_v1 does (+9 %): the report's star, its 'not confirmed' line,
    the terminal's lock line and the lock agree on it, its overrides the recipe's."""
    from pytest_xlatune.report.data import build
    from pytest_xlatune.verdict.lock import lock_change, unconfirmed

    path = tmp_path / "pp.yml"
    path.write_text(PP_CELL)
    cell = load_cell(path)
    mb4 = (("num_pipeline_microbatches", "4"),)
    once = [
        *BASELINES,
        run("a", 1002.0, flags=("--xla_a=1",), job="3"),
        shape("mb4_v1", 1090.0, "4", mb4),
        shape("mb8_v2", 1001.0, "5", (("num_pipeline_microbatches", "8"), ("num_layers_per_pipeline_stage", "1"))),
    ]
    data = build(cell, once, "localhost", "local")
    assert data.winner is not None and data.winner.profile == "mb4_v1"
    # One run: the report says it is not confirmed, and the terminal gives the same reason.
    assert build_lock(cell, once, "n", "") is None
    why = unconfirmed(cell, once)
    assert why and data.unconfirmed == why and "mb4_v1" in why
    assert lock_change(None, None, [], why_not=why)[1] == f"no lock: the win is not confirmed: {why}"
    # Measured again and agreeing: locked, with the shape's overrides.
    again = [*once, shape("mb4_v1", 1088.0, "6", mb4), CONTROL]
    assert build(cell, again, "localhost", "local").winner.profile == "mb4_v1"
    lock = build_lock(cell, again, "n", "")
    assert lock is not None
    [locked] = lock.recipes
    assert (locked.profile, locked.xla_flags, locked.overrides, locked.job_ids) == ("mb4_v1", (), mb4, ("4", "6"))
    assert locked.delta_pct > 0 and locked.ci_low_pct > 0


def test_a_lock_on_file_with_its_jobs_in_pooling_order_is_the_same_recipe(tmp_path: Path) -> None:
    """Older versions stored a recipe's job ids in pooling order (`3, 20, 5`); the lock built from
    the same stored results lists them in job order. A whole sweep that reuses every result finds
    the recipe on file (it said `recipe changed: X → X` and rewrote the lock); other jobs are a change."""
    from pytest_xlatune.verdict.lock import lock_change

    pooled = dataclasses.replace(run("a", 1100.0, job="3"), runs=(("3", 1100.0), ("20", 1102.0)))
    results = [*BASELINES, pooled, run("a", 1098.0, job="5"), run("b", 1060.0), confirmed("a", 1099.0)]
    built = _lock(tmp_path, results)
    assert built is not None and built.recipes[0].job_ids == ("3", "5", "20")
    on_file = dataclasses.replace(
        built, recipes=tuple(dataclasses.replace(r, job_ids=("3", "20", "5")) for r in built.recipes)
    )
    changed, why = lock_change(on_file, built, [])
    assert (
        not changed
        and why
        == f"the sweep found the recipe on file (a [default] {built.recipes[0].delta_pct:+.2f} % (jobs 3, 5, 20))"
    )
    changed, why = lock_change(on_file, dataclasses.replace(built, measured_on="jax 9"), [])
    assert changed and why.startswith("the recipe on file (") and why.endswith("now measured on jax 9")
    other = dataclasses.replace(
        built, recipes=tuple(dataclasses.replace(r, job_ids=("3", "5", "21")) for r in built.recipes)
    )
    assert lock_change(on_file, other, [])[1].startswith("recipe changed: ")
