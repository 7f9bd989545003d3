"""What one run's value is (verdict/one_run.py): a run stopped early carries the error of the
steady steps it did not run, and every verdict on it shows it (verdicts.compare_result)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.verdict import one_run, stats, verdicts
from tests import report_cases as cases

FLAG = "--xla_gpu_enable_latency_hiding_scheduler=true"


def steps(tgs: float, n: int, scatter: float = 0.006) -> tuple[float, ...]:
    """n steady steps around `tgs`, alternating ±scatter (a known per-step variance)."""
    return tuple(tgs * (1 + scatter * (-1) ** i) for i in range(n))


def sweep(
    stopped_steps: int, baselines: tuple[float, ...] = (1000.0, 1008.0, 996.0)
) -> tuple[list[JobResult], JobResult, JobResult]:
    """Three full baselines (10 steps each), and one candidate run at +1.5 % stopped after
    `stopped_steps` of its 10 steady steps (verdict stopped_early)."""
    jobs = cases.Jobs()
    jobs.wave1(baselines=baselines, restore=None)
    jobs.results[:] = [dataclasses.replace(r, tgs_values=steps(r.tgs or 0.0, 10)) for r in jobs.results]
    full = jobs.profile("lhs", 1015.0, FLAG)
    values = steps(1015.0, stopped_steps)
    stopped = dataclasses.replace(full, tgs_values=values, tgs=sum(values) / len(values), verdict=Verdict.STOPPED_EARLY)
    return jobs.results, full, stopped


def test_a_run_stopped_early_carries_the_variance_of_the_steps_it_did_not_run() -> None:
    results, _, stopped = sweep(2)
    with_stop = [*results[:-1], stopped]
    per_step = one_run.step_variance(steps(1000.0, 10))  # every full run's steps scatter alike here
    assert per_step > 0
    assert one_run.partial_var(with_stop) == {stopped.job_id: pytest.approx(per_step * (1 / 2 - 1 / 10))}
    # A full run, an inert cut and a shared duplicate lack nothing.
    assert one_run.partial_var(results) == {}
    for lacks_nothing in (dataclasses.replace(stopped, inert=True), dataclasses.replace(stopped, shared_from="x")):
        assert one_run.partial_var([*results[:-1], lacks_nothing]) == {}


def test_the_verdict_on_a_stopped_run_shows_the_error_of_its_missing_steps() -> None:
    results, full, stopped = sweep(2)
    with_stop = [*results[:-1], stopped]
    noise = verdicts.noise(with_stop, "sparse")
    base = verdicts.table(with_stop, "sparse").baseline
    extra = one_run.partial_var(with_stop)[stopped.job_id]
    shown = verdicts.compare_result(stopped, with_stop)
    assert shown == stats.compare([stopped.tgs or 0.0], base, noise, extra_var=extra)
    plain = stats.compare([stopped.tgs or 0.0], base, noise)
    assert shown.ci_low_pct < plain.ci_low_pct and shown.ci_high_pct > plain.ci_high_pct
    # the same value run to the end: no extra error
    assert verdicts.compare_result(full, results) == stats.compare([full.tgs or 0.0], base, noise)


def test_the_missing_steps_matter_most_for_a_run_stopped_earliest() -> None:
    widths = []
    for n in (1, 2, 5, 9):
        results, _, stopped = sweep(n)
        cmp = verdicts.compare_result(stopped, [*results[:-1], stopped])
        assert cmp is not None
        widths.append(cmp.ci_high_pct - cmp.ci_low_pct)
    assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1]


def test_extra_variance_must_be_a_variance() -> None:
    noise = stats.pooled_noise([[1000.0, 1010.0]])
    with pytest.raises(ValueError, match=re.escape("extra_var must be >= 0, got -0.1")):
        stats.compare([1000.0], [1000.0], noise, extra_var=-0.1)
    with pytest.raises(ValueError, match="extra_var must be >= 0, got nan"):
        stats.compare([1000.0], [1000.0], noise, extra_var=float("nan"))


@pytest.mark.parametrize(
    "reason, shown",
    [
        ("stopped early: settled after 4 of 10 steady steps: +4.00 % …", stats.Direction.WITHIN_NOISE),
        ("stopped early: futile after 1 of 10 steady steps: +4.00 % …", stats.Direction.WITHIN_NOISE),
        ("stopped early: winner after 2 of 10 steady steps: +4.00 % …", stats.Direction.BETTER),
        ("stopped early: numerics changed: it cannot be the recipe", stats.Direction.BETTER),
    ],
)
def test_one_run_the_planner_stopped_as_no_win_is_never_better_on_its_own(reason: str, shown: stats.Direction) -> None:
    # A drift spike: a no-op's 4 steps read +4 % against tight baselines, beyond their noise.
    # The planner (drift-aware, one partial run never better below win_pct) stopped it as
    # settled or futile; the line that shows its stop reason says what the planner said.
    results, _, stopped = sweep(4, baselines=(1000.0, 1002.0, 999.0))
    spiked = dataclasses.replace(stopped, tgs=1040.0, tgs_values=steps(1040.0, 4, scatter=0.0005), reason=reason)
    with_stop = [*results[:-1], spiked]
    cmp = verdicts.compare_result(spiked, with_stop)
    assert cmp is not None and cmp.ci_low_pct > 0  # beyond the noise on its face
    assert cmp.verdict is shown
    if shown is stats.Direction.WITHIN_NOISE:
        assert one_run.stopped_as_no_win(spiked)
        # a second run of its settings: judged on both, as any group
        again = dataclasses.replace(spiked, job_id="again", key="again", verdict=Verdict.SUCCESS, reason="")
        assert verdicts.compare_result(spiked, [*with_stop, again]).verdict is stats.Direction.BETTER  # type: ignore[union-attr]


def test_a_profiled_baseline_run_off_the_baseline_beyond_its_interval_reads_unstable() -> None:
    """The baseline's evidence run is never better or worse; when its interval lies wholly below
    (or above) zero it is no agreement either: *unstable*, not *within noise* (a 10-step cell
    measures it on step 9 alone, right after the profiler)."""
    jobs = cases.Jobs(1)
    jobs.wave1(baselines=(1000.0, 1004.0, 1002.0), restore=None, config_tag="default")
    near = jobs.add("wave1.5::evidence", "evidence", "evidence", 998.0, config_tag="default")
    results = list(jobs.results)
    far = dataclasses.replace(near, key="far", job_id="far", tgs=985.0)  # beyond 95 %, inside 99 %
    for run, shown in ((near, "within_noise"), (far, "unstable")):
        cmp = verdicts.compare_result(run, [*results, run] if run is far else results)
        assert cmp is not None and stats.direction(cmp) == shown, (run.tgs, cmp)
        assert cmp.verdict is stats.Direction.WITHIN_NOISE


def test_identical_baselines_give_the_baseline_evidence_run_the_step_floor_not_a_zero_width_interval() -> None:
    """A deterministic stand-in: the baseline pair agrees exactly (run-to-run CV 0), so only the
    runs' own steps say how certain a mean is. The profiled evidence run's value is the mean of
    other steps (9-14), 0.01 % off: that is no disagreement, as for every other Δ (the step floor,
    stats.Spread.step_var), and its interval is never narrower than that floor allows."""
    scatter = (0.999, 1.0, 1.001)
    plain = tuple(1000.0 * scatter[(s % 3)] for s in range(5, 15))  # steps 5-14
    profiled_steps = tuple(1000.0 * scatter[(s % 3)] for s in range(9, 15))  # steps 9-14
    jobs = cases.Jobs(1)
    jobs.wave1(baselines=(1000.0, 1000.0), restore=None, config_tag="default")
    mean = sum(plain) / len(plain)
    jobs.results[:] = [
        dataclasses.replace(r, tgs=mean, tgs_values=plain, steps_used=tuple(range(5, 15))) for r in jobs.results
    ]
    evidence = jobs.add("wave1.5::evidence", "evidence", "evidence", 1000.0, config_tag="default")
    evidence = dataclasses.replace(
        evidence, tgs=sum(profiled_steps) / 6, tgs_values=profiled_steps, steps_used=tuple(range(9, 15))
    )
    results = [*jobs.results[:-1], evidence]
    tab = verdicts.table(results, "default")
    assert tab.noise.cv_pct == 0 and tab.baseline_floor > 0
    cmp = verdicts.compare_result(evidence, results)
    assert cmp is not None and -0.02 < cmp.delta_pct < 0
    assert stats.direction(cmp) == "within_noise", cmp
    assert not verdicts.unstable(evidence, results) and tab.witnesses == (evidence.tgs,)
    # the interval shown is the one judged: as wide as the two sides' own steps allow
    own = one_run.own_se(evidence)
    assert cmp.ci_high_pct - cmp.ci_low_pct > 2 * 100 * (own**2 + tab.baseline_floor**2 / 2) ** 0.5
    # a run far off the pair still is: the floor widens the interval, it does not hide a disagreement
    far_steps = tuple(v * 0.97 for v in profiled_steps)
    far = dataclasses.replace(evidence, tgs=sum(far_steps) / 6, tgs_values=far_steps)
    assert stats.direction(verdicts.compare_result(far, [*results[:-1], far])) == "unstable"  # type: ignore[arg-type]
