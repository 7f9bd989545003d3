"""Issue 23's stand-ins: noise far above the prior, unstable null profiles, a flag at its default
"won" by two disagreeing runs, and the profiled baseline: none is ever a win or a lock."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from pytest_xlatune.adaptive import Role, judge, planner, rules
from pytest_xlatune.cell.load import load_cell
from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.verdict import choice, stats, verdicts
from pytest_xlatune.verdict.disagreements import disagreements
from pytest_xlatune.verdict.lock import build_lock, lock_change, unconfirmed
from tests.adaptive_driver import BASE, drive, plan

PROFILES = [f"p{i}" for i in range(12)]


def world(base_cv: float, profile_cv: float, seed: int):  # type: ignore[no-untyped-def]
    """Null profiles: every run's level is BASE × (1 + N(0, cv)), drawn once per run."""

    def tgs(item: str, role: Role, index: int) -> float:
        cv = profile_cv if role is Role.PROFILE else base_cv
        return BASE * max(0.2, 1 + random.Random(f"{seed}/{item}/{role.value}/{index}").gauss(0, cv))

    return tgs


@pytest.mark.parametrize(
    ("base_cv", "profile_cv"),
    [(0.15, 0.15), (0.003, 0.15)],
    ids=["15pct_noise_null_profiles", "steady_baseline_unstable_null_profiles"],
)
def test_the_adaptive_sweep_calls_no_null_profile_better(base_cv: float, profile_cv: float) -> None:
    # Seeds 0-19 (bench-style, measured once): 0/20 false wins at 15 % noise; 1/20 with a steady
    # baseline (seed 5: a null profile's confirming run landed within 1 % of its first, +12 %).
    for seed in range(5):
        result = drive(plan(*PROFILES, winner=False), planner.decide, world(base_cv, profile_cv, seed))
        now = max(r.ended_at or 0.0 for r in result.state.runs)
        board = judge.build(result.state, now)
        assert rules.recipe(board) is None, (seed, board.ranked())
        if board.noise.groups >= 3:  # the repeats the sweep made measure the profiles' noise
            assert 7.5 <= board.noise.cv_pct <= 30.0, (seed, board.noise)


CELL = """\
model_tag: st
nodes: 1
parallelism: FSDP=8
waves:
  2:
    - {name: at_default, xla_flags: [--xla_cpu_enable_fast_math=false]}
    - {name: other, xla_flags: [--xla_b=1]}
"""


def run(
    profile: str,
    tgs: float,
    kind: str = "profile",
    job: str = "",
    flags: tuple[str, ...] = (),
    wave: str = "wave2",
    runs: tuple[tuple[str, float], ...] = (),
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
        xla_flags=flags,
        runs=runs,
    )


def steady_baselines() -> list[JobResult]:
    """Three baseline runs within 0.6 % of each other (jobs 1-3)."""
    return [
        run("baseline", 1000.0, "baseline", "1", wave="wave1"),
        run("baseline-r2", 1004.0, "baseline", "2", wave="wave1"),
        run("baseline-r3", 998.0, "baseline", "3", wave="wave1"),
    ]


def stand_in(tmp_path: Path, results: list[JobResult], control: bool = False) -> tuple[object, str]:
    """The lock built from the results, and why (not); `control`: with the baseline measured again
    after them at its mean (a win no control brackets is never locked: verdicts.unbracketed)."""
    path = tmp_path / "st.yml"
    path.write_text(CELL)
    cell = load_cell(path)
    if control and (base := verdicts.baseline_values(results, "default")):
        results = [*results, run("baseline", sum(base) / len(base), "baseline", "999", wave="wave1")]
    built = build_lock(cell, results, "localhost", "")
    why_not = unconfirmed(cell, results)
    return built, lock_change(None, built, [], False, why_not)[1]


def test_a_flag_at_its_default_won_by_two_disagreeing_runs_is_unstable_and_never_locked(tmp_path: Path) -> None:
    # The cell: 7928 and 11164 TGS (+29 % on their mean), the baseline steady at ~7380.
    baselines = [
        run("baseline", 7370.0, "baseline", "1", wave="wave1"),
        run("baseline-r2", 7395.0, "baseline", "2", wave="wave1"),
        run("baseline-r3", 7381.0, "baseline", "3", wave="wave1"),
    ]
    pooled = run(
        "at_default", 9546.0, job="5", flags=("--xla_cpu_enable_fast_math=false",), runs=(("5", 7928.0), ("6", 11164.0))
    )
    rerun = dataclasses.replace(
        run("winner", 7300.0, "winner_evidence", "9", ("--xla_cpu_enable_fast_math=false",), wave="evidence2"),
        resolved_from="at_default",
    )
    results = [*baselines, pooled, run("other", 7385.0, job="7", flags=("--xla_b=1",)), rerun]
    cmp = verdicts.compare_result(pooled, results)
    assert cmp is not None and cmp.unstable and cmp.verdict is not stats.Direction.BETTER
    assert stats.direction(cmp) == "unstable" and cmp.n_candidate == 2
    assert choice.winners(results, "default", 4) == []
    built, why = stand_in(tmp_path, results)
    assert built is None and "no lock" not in why  # not even a win: nothing to confirm


def test_a_win_its_evidence_rerun_contradicts_is_not_locked_and_says_why(tmp_path: Path) -> None:
    baselines, win = steady_baselines(), run("other", 1100.0, job="5", flags=("--xla_b=1",))
    rerun = dataclasses.replace(
        run("winner", 990.0, "winner_evidence", "9", ("--xla_b=1",), wave="evidence2"), resolved_from="other"
    )
    assert verdicts.compare_result(win, [*baselines, win]).verdict is stats.Direction.BETTER  # type: ignore[union-attr]
    built, why = stand_in(tmp_path, [*baselines, win, rerun])
    assert built is None
    assert why.startswith("no lock: the win is not confirmed: the winner's re-run") and "job 9" in why
    agreeing = dataclasses.replace(rerun, tgs=1097.0)
    built, why = stand_in(tmp_path, [*baselines, win, agreeing], control=True)
    assert built is not None and why.startswith("new lock: other")


def test_the_profiled_baseline_is_never_better_than_the_baseline() -> None:
    baselines = [
        run("baseline", 1000.0, "baseline", "1", wave="wave1"),
        run("baseline-r2", 1006.0, "baseline", "2", wave="wave1"),
        run("baseline-r3", 1003.0, "baseline", "3", wave="wave1"),
    ]
    evidence = run("evidence", 1308.4, "evidence", "4", wave="wave1.5")  # "+30.84 % better"
    cmp = verdicts.compare_result(evidence, [*baselines, evidence])
    assert cmp is not None and cmp.verdict is not stats.Direction.BETTER and stats.direction(cmp) == "unstable"
    assert [d.runs[0].job_id for d in disagreements([*baselines, evidence], "default")] == ["4"]
    agrees = dataclasses.replace(evidence, tgs=1004.0)
    assert stats.direction(verdicts.compare_result(agrees, [*baselines, agrees])) == "within_noise"  # type: ignore[arg-type]
    assert verdicts.noise([*baselines, evidence], "default") == verdicts.noise(baselines, "default")


def test_noise_far_above_the_prior_is_reported_as_measured_and_nothing_wins(tmp_path: Path) -> None:
    rng = random.Random(23)
    truth = 0.15
    results = [
        run(
            f"baseline{'-r' + str(i) if i else ''}",
            1000 * (1 + rng.gauss(0, truth)),
            "baseline",
            str(i + 1),
            wave="wave1",
        )
        for i in range(2)
    ]
    for i, name in enumerate(("at_default", "other")):
        values = [1000 * (1 + rng.gauss(0, truth)) for _ in range(3)]
        jobs = [str(10 + 3 * i + j) for j in range(3)]
        results.append(
            run(
                name,
                sum(values) / 3,
                job=jobs[0],
                flags=(f"--xla_{name}=1",),
                runs=tuple(zip(jobs, values, strict=True)),
            )
        )
    noise = verdicts.noise(results, "default")
    assert truth * 100 / 2 <= noise.cv_pct <= truth * 100 * 2 and noise.df == 5 and not noise.assumed
    assert choice.winners(results, "default", 4) == []
    assert stand_in(tmp_path, results)[0] is None


def test_the_noise_table_is_built_once_per_results_list() -> None:
    results = [
        run("baseline", 1000.0, "baseline", "1", wave="wave1"),
        run("baseline-r2", 1006.0, "baseline", "2", wave="wave1"),
    ]
    assert verdicts.table(results, "default") is verdicts.table(results, "default")
    assert verdicts.table(list(results), "default") is verdicts.table(results, "default")  # same runs
    assert verdicts.table(results[:1], "default") is not verdicts.table(results, "default")


def test_a_baseline_its_own_evidence_run_contradicts_carries_that_spread_in_every_delta(tmp_path: Path) -> None:
    # A lucky (or loaded) baseline pair agrees to 0.02 %; the baseline's evidence run, the same
    # settings measured again, lands 3 % off it; a no-op profile and its re-run land beside it.
    baselines = [
        run("baseline", 1000.0, "baseline", "1", wave="wave1"),
        run("baseline-r2", 1000.2, "baseline", "2", wave="wave1"),
    ]
    evidence = run("evidence", 1030.0, "evidence", "3", wave="wave1.5")
    noop = run("other", 1035.0, job="4", flags=("--xla_b=1",), runs=(("4", 1035.0), ("5", 1036.0)))
    results = [*baselines, evidence, noop]
    assert stats.direction(verdicts.compare_result(evidence, results)) == "unstable"  # type: ignore[arg-type]
    assert [d.runs[0].job_id for d in disagreements(results, "default")] == ["3"]
    cmp = verdicts.compare_result(noop, results)
    assert cmp is not None and cmp.verdict is stats.Direction.WITHIN_NOISE and cmp.ci_low_pct < 0 < cmp.ci_high_pct
    assert cmp.delta_pct == pytest.approx(3.54, abs=0.01)  # the figure itself does not move
    assert choice.winners(results, "default", 4) == [] and stand_in(tmp_path, results)[0] is None
    # its power follows the spread the baseline's settings showed, not the pair's agreement
    spread = verdicts.baseline_spread(results, "default")
    assert spread is not None and spread.cv_pct > 1.0
    assert verdicts.detectable_effect(results, "default") > 3.0  # type: ignore[operator]
    # an evidence run that agrees with the pair leaves everything as it was
    agrees = dataclasses.replace(evidence, tgs=1000.1)
    steady = [*baselines, agrees, noop]
    assert verdicts.baseline_spread(steady, "default") is None and disagreements(steady, "default") == []
    assert verdicts.compare_result(noop, steady) == verdicts.compare_result(noop, [*baselines, noop])


def test_a_run_whose_steps_shifted_mid_run_carries_its_own_steps_error() -> None:
    steady = (999.0, 1000.0, 1001.0) * 3 + (1000.0,)
    baselines = [
        dataclasses.replace(run("baseline", 1000.0, "baseline", "1", wave="wave1"), tgs_values=steady),
        dataclasses.replace(run("baseline-r2", 1002.0, "baseline", "2", wave="wave1"), tgs_values=steady),
    ]
    shifted = (1000.0,) * 5 + (600.0,) * 5  # load on its nodes for the second half of its steps
    slowed = dataclasses.replace(run("other", 800.0, job="4", flags=("--xla_b=1",)), tgs_values=shifted)
    cmp = verdicts.compare_result(slowed, [*baselines, slowed])
    assert (
        cmp is not None and cmp.verdict is stats.Direction.WITHIN_NOISE and cmp.ci_low_pct < -20 < 0 < cmp.ci_high_pct
    )
    # the same value from steady steps is a measurement like any other: worse
    even = dataclasses.replace(slowed, tgs_values=(799.0, 800.0, 801.0) * 3 + (800.0,))
    assert verdicts.compare_result(even, [*baselines, even]).verdict is stats.Direction.WORSE  # type: ignore[union-attr]


def test_a_win_is_locked_only_when_the_runs_after_its_first_show_it_on_their_own(tmp_path: Path) -> None:
    # ~3 % noise: a no-op's first run landed high (why it was repeated), its repeats between:
    # pooled, its three runs clear 0; the two after the first, alone, do not.
    baselines = [
        run(f"baseline{'-r' + str(i + 1) if i else ''}", v, "baseline", str(i + 1), wave="wave1")
        for i, v in enumerate((1000.0, 1040.0, 970.0, 1010.0))
    ]
    other = run("at_default", 1005.0, job="5", flags=("--xla_cpu_enable_fast_math=false",))
    other = dataclasses.replace(other, runs=(("5", 1000.0), ("6", 1030.0), ("7", 985.0)))
    noop = run("other", 1081.7, job="8", flags=("--xla_b=1",), runs=(("8", 1125.0), ("9", 1055.0), ("10", 1065.0)))
    results = [*baselines, other, noop]
    cmp = verdicts.compare_result(noop, results)
    assert cmp is not None and cmp.verdict is stats.Direction.BETTER
    built, why = stand_in(tmp_path, results)
    assert built is None and "runs after its first (1055.0, 1065.0) do not show the win on their own" in why
    # the same first run followed by runs that win on their own is locked
    strong = dataclasses.replace(noop, runs=(("8", 1125.0), ("9", 1115.0), ("10", 1120.0)), tgs=1120.0)
    assert stand_in(tmp_path, [*baselines, other, strong], control=True)[0] is not None


def _stepped(result: JobResult, profiled: bool = False) -> JobResult:
    """The run with steady steps around its value: 5-14, or 9-14 after the profiler's window."""
    first, n = (9, 6) if profiled else (5, 10)
    level = result.tgs or 0.0
    values = tuple(level * (1 + 0.002 * ((i % 3) - 1)) for i in range(n))
    return dataclasses.replace(result, tgs_values=values, steps_used=tuple(range(first, first + n)))


def test_a_lucky_baseline_pair_its_evidence_run_widens_locks_no_noop(tmp_path: Path) -> None:
    # True run-to-run noise ~4 %: the baseline pair happened to agree to 2.05 %; its evidence run
    # (the same settings, steps 9-14) landed 4 % off their mean, inside their one-df prediction
    # interval (no disagreement), and a no-op's run and its profiled re-run landed at +6.7 %.
    baselines = [
        _stepped(run("baseline", 1000.0, "baseline", "1", wave="wave1")),
        _stepped(run("baseline-r2", 1020.5, "baseline", "2", wave="wave1")),
    ]
    evidence = _stepped(run("evidence", 1050.0, "evidence", "3", wave="wave1.5"), profiled=True)
    other = _stepped(run("other", 1001.0, job="4", flags=("--xla_b=1",)))
    noop = _stepped(run("at_default", 1077.5, job="5", flags=("--xla_cpu_enable_fast_math=false",)))
    rerun = dataclasses.replace(
        _stepped(run("winner", 1077.5, "winner_evidence", "6", wave="evidence2"), profiled=True),
        xla_flags=noop.xla_flags,
        resolved_from="at_default",
    )
    results = [*baselines, evidence, other, noop, rerun]
    assert not verdicts.unstable(evidence, results)  # no disagreement on its own
    cmp = verdicts.compare_result(noop, results)
    assert cmp is not None and cmp.verdict is stats.Direction.WITHIN_NOISE and cmp.ci_low_pct < 0, cmp
    assert stand_in(tmp_path, results)[0] is None
    # the baseline's spread counts it (its power too), the baseline's mean does not
    assert verdicts.table(results, "default").baseline == (1000.0, 1020.5)
    spread = verdicts.baseline_spread(results, "default")
    assert spread is not None and spread.df == 2
    # a real win beyond that spread still wins and is locked
    fast = [dataclasses.replace(r, tgs=(r.tgs or 0.0) * 1.2) for r in (noop, rerun)]
    won = [*baselines, evidence, other, *(_stepped(r, r is fast[1]) for r in fast)]
    assert verdicts.compare_result(fast[0], won).verdict is stats.Direction.BETTER  # type: ignore[union-attr]
    assert stand_in(tmp_path, won, control=True)[0] is not None


def test_a_win_no_control_brackets_is_never_locked(tmp_path: Path) -> None:
    # Drift: the baselines ran under load; the machine is 12 % faster for everything after them.
    # A no-op's run and its agreeing re-run read +12 %, confirmed by each other: no control ran
    # after its first run (the fixed protocol runs none), so nothing tells drift from a win.
    baselines = [
        run("baseline", 1000.0, "baseline", "1", wave="wave1"),
        run("baseline-r2", 1004.0, "baseline", "2", wave="wave1"),
        run("baseline-r3", 998.0, "baseline", "3", wave="wave1"),
    ]
    noop = run("other", 1121.0, job="5", flags=("--xla_b=1",), runs=(("5", 1120.0), ("6", 1122.0)))
    results = [*baselines, noop]
    assert verdicts.compare_result(noop, results).verdict is stats.Direction.BETTER  # type: ignore[union-attr]
    built, why = stand_in(tmp_path, results)
    assert built is None
    assert "no control (a baseline run) ran after other's first run (job 5)" in why and "jobs 1, 2, 3" in why
    # a control after it that sees the drift: no win at all
    drifted = run("baseline", 1119.0, "baseline", "7", wave="wave1")
    assert choice.winners([*results, drifted], "default", 4) == []
    # a control that sees none: the win stands, bracketed, and is locked
    steady = run("baseline", 1001.0, "baseline", "7", wave="wave1")
    built, why = stand_in(tmp_path, [*results, steady])
    assert built is not None and why.startswith("new lock: other"), why
    # a control before the win's first run brackets nothing
    early = run("baseline", 1001.0, "baseline", "4", wave="wave1")
    assert stand_in(tmp_path, [*results, early])[0] is None


def test_the_detectable_effect_carries_a_baseline_pair_the_noise_leaves_out() -> None:
    # A pair 150 % apart under load, no evidence run of the baseline; two no-ops ran twice each,
    # tight: the pooled noise leaves the baseline's group out (unstable), but every Δ carries its
    # spread (stats._side), and so must the smallest effect the report says it could show.
    baselines = [
        run("baseline", 1000.0, "baseline", "1", wave="wave1"),
        run("baseline-r2", 400.0, "baseline", "2", wave="wave1"),
    ]
    noops = [
        run("other", 1000.5, job="3", flags=("--xla_b=1",), runs=(("3", 1000.0), ("4", 1001.0))),
        run("at_default", 999.5, job="5", flags=("--xla_c=1",), runs=(("5", 999.0), ("6", 1000.0))),
    ]
    results = [*baselines, *noops]
    assert verdicts.noise(results, "default").cv_pct < 1  # the no-ops' repeats alone
    cmp = verdicts.compare_result(noops[0], results)
    assert cmp is not None and stats.too_noisy(cmp)
    detectable = verdicts.detectable_effect(results, "default")
    assert detectable is not None and detectable > 100, detectable


def test_a_win_its_profiled_rerun_contradicts_is_unstable_and_no_recipe() -> None:
    # +10 % on its plain run, -1 % on its profiled re-run (steps 9-14, six of them): the settings'
    # runs disagree on the win itself. Neither is the recipe; the re-run agreeing joins the win.
    baselines, win = steady_baselines(), run("other", 1100.0, job="5", flags=("--xla_b=1",))
    rerun = dataclasses.replace(
        run("winner", 990.0, "winner_evidence", "9", ("--xla_b=1",), wave="evidence2"),
        resolved_from="other",
        steps_used=tuple(range(9, 15)),
        tgs_values=(990.0,) * 6,
    )
    results = [*baselines, win, rerun]
    cmp = verdicts.compare_result(win, results)
    assert cmp is not None and stats.direction(cmp) == "unstable" and cmp.n_candidate == 1
    assert choice.winners(results, "default", 4) == [] and choice.deployable(results, "default") is None
    assert choice.contradicted(results, "default") is win
    # only the re-run is listed as disagreeing, not the win's own (single) run
    assert [d.runs[0].job_id for d in disagreements(results, "default")] == ["9"]
    agreeing = dataclasses.replace(rerun, tgs=1097.0, tgs_values=(1097.0,) * 6)
    assert choice.deployable([*baselines, win, agreeing], "default") is win
