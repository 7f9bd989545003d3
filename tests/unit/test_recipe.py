"""verdicts.recipe and the lock: which run's settings are the deployable recipe."""

from __future__ import annotations

from pathlib import Path

from pytest_xlatune.cell import load_cell
from pytest_xlatune.lock import build_lock
from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.verdicts import recipe

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


def run(profile: str, tgs: float, kind: str = "profile", wave: str = "wave2", job: str = "",
        resolved_from: str = "", flags: tuple[str, ...] = ()) -> JobResult:
    return JobResult(key=f"{profile}-{job}", item=f"{wave}::{profile}[default]", wave=wave,
                     profile=profile, config_tag="default", kind=kind, job_id=job or profile,
                     verdict=Verdict.SUCCESS, tgs=tgs, resolved_from=resolved_from, xla_flags=flags)


BASELINES = [run("baseline", 1000.0, kind="baseline", wave="wave1", job="1"),
             run("baseline-r2", 1004.0, kind="baseline", wave="wave1", job="2")]


def test_a_stack_beating_the_best_single_winner_beyond_noise_is_the_recipe() -> None:
    results = BASELINES + [run("a", 1100.0), run("b", 1060.0),
                           run("stack_top2", 1180.0, kind="stack", wave="wave3", resolved_from="a+b")]
    assert recipe(results, "default").profile == "stack_top2"


def test_a_stack_within_noise_of_the_best_single_gives_way_to_the_simpler_recipe() -> None:
    results = BASELINES + [run("a", 1100.0), run("b", 1060.0),
                           run("stack_top2", 1104.0, kind="stack", wave="wave3", resolved_from="a+b")]
    assert recipe(results, "default").profile == "a"


def test_no_run_beyond_noise_means_no_recipe() -> None:
    assert recipe(BASELINES + [run("a", 1008.0), run("b", 990.0)], "default") is None


def test_the_lock_holds_a_winning_stack_with_the_overrides_of_its_profiles(tmp_path: Path) -> None:
    path = tmp_path / "rc.yml"
    path.write_text(CELL)
    results = BASELINES + [run("a", 1100.0, flags=("--xla_a=1",)), run("b", 1060.0, flags=("--xla_b=1",)),
                           run("stack_top2", 1180.0, kind="stack", wave="wave3", resolved_from="a+b",
                               flags=("--xla_a=1", "--xla_b=1"))]
    lock = build_lock(load_cell(path), results, "localhost", "")
    assert lock is not None
    [locked] = lock.recipes
    assert (locked.profile, locked.xla_flags, locked.overrides) == (
        "stack_top2", ("--xla_a=1", "--xla_b=1"), (("remat_policy", "full"),))
    assert locked.tgs == 1180.0 and locked.ci_low_pct > 0


def _lock(tmp_path: Path, results: list[JobResult], day: int = 1):
    import datetime as dt

    path = tmp_path / "rc.yml"
    path.write_text(CELL)
    return build_lock(load_cell(path), results, "localhost", "", today=dt.date(2026, 12, day))


def test_lock_change_only_after_a_whole_sweep_with_another_recipe(tmp_path: Path) -> None:
    from pytest_xlatune.lock import lock_change

    first = _lock(tmp_path, BASELINES + [run("a", 1100.0), run("b", 1060.0)])
    same_next_day = _lock(tmp_path, BASELINES + [run("a", 1100.0), run("b", 1060.0)], day=2)
    other = _lock(tmp_path, BASELINES + [run("a", 1010.0), run("b", 1160.0)])
    assert lock_change(None, first, []) == (True, "new lock: a [default] +9.78 % (job a)")
    assert lock_change(first, same_next_day, []) == (
        False, "the sweep found the recipe on file (a [default] +9.78 % (job a))")
    assert lock_change(first, other, []) == (
        True, "recipe changed: a [default] +9.78 % (job a) → b [default] +15.77 % (job b)")
    changed, why = lock_change(first, other, ["wave2::a[default]"])
    assert not changed and why.startswith("1 item(s) of the cell did not run in this session "
                                          "(wave2::a[default])")
    assert lock_change(first, None, []) == (
        False, "the sweep found no recipe better than baseline-deployed beyond the noise; "
        "the lock on file is kept")
    changed, why = lock_change(None, first, [f"wave2::p{i}[default]" for i in range(5)])
    assert not changed and "(wave2::p0[default], wave2::p1[default], wave2::p2[default] and 2 more)" in why
