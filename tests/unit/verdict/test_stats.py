"""stats: job estimates, pooled run-to-run noise, noise-aware comparisons and the regression gate."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from pytest_xlatune.verdict.stats import (
    Comparison,
    Direction,
    GateDecision,
    Noise,
    Spread,
    compare,
    decide_after_remeasure,
    direction,
    disagree,
    job_estimate,
    pooled_noise,
    regression_check,
    regression_probability,
    run_noise,
    too_noisy,
    words,
)

NO_NOISE = Noise(cv_pct=0.0, df=5.0)


# --- job_estimate -----------------------------------------------------------------------------


def test_job_estimate_of_uncorrelated_steps_is_the_textbook_t_interval() -> None:
    est = job_estimate([99.0, 101.0, 99.0, 101.0])  # alternating: r < 0, clipped to 0
    assert est.mean == 100.0 and est.n == 4 and est.autocorr == 0.0
    assert est.stderr == pytest.approx(math.sqrt(4 / 3 / 4))
    assert est.ci_high - est.mean == pytest.approx(3.182446 * est.stderr, rel=1e-6)  # t(3), 97.5 %
    assert est.ci_low == pytest.approx(2 * est.mean - est.ci_high)


def test_job_estimate_widens_for_autocorrelated_steps() -> None:
    drifting = [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]
    est = job_estimate(drifting)
    naive = float(np.std(drifting, ddof=1)) / math.sqrt(len(drifting))
    assert 0.0 < est.autocorr <= 0.8
    assert est.stderr == pytest.approx(naive * math.sqrt((1 + est.autocorr) / (1 - est.autocorr)))


def test_job_estimate_of_constant_steps_has_a_zero_width_interval() -> None:
    est = job_estimate([1000.0] * 10)
    assert (est.mean, est.stderr, est.ci_low, est.ci_high) == (1000.0, 0.0, 1000.0, 1000.0)


def test_job_estimate_of_one_step_has_an_unbounded_interval() -> None:
    est = job_estimate([950.0])
    assert est.mean == 950.0 and est.n == 1 and math.isinf(est.stderr)
    assert (est.ci_low, est.ci_high) == (-math.inf, math.inf)


@pytest.mark.parametrize("values", [[], [100.0, float("nan")], [100.0, 0.0], [100.0, -5.0]])
def test_job_estimate_rejects_empty_or_nonpositive_values(values: list[float]) -> None:
    with pytest.raises(ValueError, match="job_estimate"):
        job_estimate(values)


# --- run_noise --------------------------------------------------------------------------------


def test_two_repeats_give_their_own_cv_with_one_degree_of_freedom() -> None:
    # No prior shrinks what the data show: the pair's own CV, with the df it honestly carries.
    noise = run_noise([988.0, 1012.0])
    assert noise.cv_pct == pytest.approx(24 / math.sqrt(2) / 1000 * 100)
    assert (noise.df, noise.n, noise.assumed) == (1.0, 2, False)


def test_baselines_that_contradict_the_prior_are_never_pulled_down_by_it() -> None:
    # The demo run: 11.8 % measured, pooled with the 0.8 % prior it read 5.3 %.
    noise = run_noise([1000.0, 1180.0])
    assert noise.prior_rejected
    assert noise.cv_pct == pytest.approx(noise.sample_cv_pct) and noise.cv_pct > 11
    assert noise.df == 1
    # and two runs that far apart are not both "better" than each other's mean
    assert compare([1180.0], [1000.0], noise).verdict is Direction.WITHIN_NOISE


def test_a_profile_noisier_than_the_pool_gets_its_own_wider_interval() -> None:
    noise = pooled_noise([[1000.0, 1002.0, 998.0, 1001.0]])  # 0.17 %, df 3
    steady = compare([1100.0, 1102.0], [1000.0, 1002.0, 998.0, 1001.0], noise)
    noisy = compare([1000.0, 1200.0], [1000.0, 1002.0, 998.0, 1001.0], noise)
    assert steady.verdict is Direction.BETTER
    assert noisy.verdict is Direction.WITHIN_NOISE  # its own 13 % spread over 1 df
    assert noisy.ci_high_pct - noisy.ci_low_pct > 10 * (steady.ci_high_pct - steady.ci_low_pct)


def test_runs_that_disagree_beyond_the_other_groups_are_unstable() -> None:
    rest = pooled_noise([[1000.0, 1004.0, 997.0], [1200.0, 1203.0]])
    assert disagree([7928.0, 11164.0], rest)  # the issue's +29 % "win" from two runs
    assert not disagree([1000.0, 1003.0], rest)
    assert compare([7928.0, 11164.0], [7200.0, 7210.0], rest, unstable=True).verdict is Direction.WITHIN_NOISE


def test_many_baselines_converge_to_the_sample_cv() -> None:
    rng = np.random.default_rng(0)
    means = list(1000 * (1 + rng.normal(0, 0.02, 400)))
    noise = run_noise(means)
    assert noise.cv_pct == pytest.approx(noise.sample_cv_pct, rel=0.02)
    assert noise.cv_pct == pytest.approx(2.0, rel=0.1)


def test_one_baseline_falls_back_to_the_prior_stated_as_an_assumption() -> None:
    noise = run_noise([1000.0], prior_cv_pct=0.5)
    assert (noise.cv_pct, noise.df, noise.n, noise.sample_cv_pct, noise.assumed) == (0.5, 4.0, 1, None, True)
    assert "assumed" in noise.text()


def test_without_a_prior_the_sample_stands_alone_and_one_run_is_an_error() -> None:
    assert run_noise([990.0, 1010.0], prior_df=0).cv_pct == pytest.approx(20 / math.sqrt(2) / 10)
    with pytest.raises(ValueError, match="one baseline run and no prior"):
        run_noise([1000.0], prior_df=0)


# --- compare ----------------------------------------------------------------------------------


def test_compare_reports_delta_of_the_run_means() -> None:
    cmp = compare([1030.0, 1010.0], [1000.0], NO_NOISE)
    assert cmp.delta_pct == pytest.approx(2.0)
    assert (cmp.candidate_mean, cmp.baseline_mean, cmp.n_candidate, cmp.n_baseline) == (1020.0, 1000.0, 2, 1)
    # The candidate's own spread (1.4 %, 1 df) counts even when the pooled noise says 0.
    assert cmp.ci_low_pct < 0.0 and cmp.ci_high_pct > 2.0
    assert compare([1020.0], [1000.0], NO_NOISE).ci_low_pct == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("candidate", "higher_is_better", "verdict"),
    [
        (1050.0, True, Direction.BETTER),
        (950.0, True, Direction.WORSE),
        (1005.0, True, Direction.WITHIN_NOISE),
        (950.0, False, Direction.BETTER),
        (1050.0, False, Direction.WORSE),
        (995.0, False, Direction.WITHIN_NOISE),
    ],
)
def test_compare_verdict_follows_the_metric_direction(
    candidate: float, higher_is_better: bool, verdict: Direction
) -> None:
    noise = Noise(0.72, 5.0)  # ±2.3 % for one run vs two
    cmp = compare([candidate], [1000.0, 1000.0], noise, higher_is_better=higher_is_better)
    assert cmp.verdict is verdict
    assert cmp.ci_low_pct < cmp.delta_pct < cmp.ci_high_pct


def test_an_identical_candidate_is_within_noise_even_without_noise() -> None:
    assert compare([1000.0], [1000.0], NO_NOISE).verdict is Direction.WITHIN_NOISE


def test_more_runs_and_lower_confidence_narrow_the_interval() -> None:
    noise = Noise(0.72, 5.0)

    def width(c: Comparison) -> float:
        return c.ci_high_pct - c.ci_low_pct

    one = compare([1000.0], [1000.0, 1000.0], noise)
    three = compare([1000.0] * 3, [1000.0, 1000.0], noise)
    loose = compare([1000.0], [1000.0, 1000.0], noise, confidence=0.8)
    assert width(three) < width(one) and width(loose) < width(one)
    # log(ratio) ± t·CV·√(1/m + 1/k), t = t(5) at 97.5 %
    assert one.ci_high_pct == pytest.approx(math.expm1(2.570582 * noise.cv_pct / 100 * math.sqrt(1.5)) * 100)


# --- regression_check: both directions, both sides of the tolerance ----------------------------


@pytest.mark.parametrize(
    ("candidate", "higher_is_better", "decision"),
    [
        # TGS, higher is better, tolerance 1 %: the line is at 990
        (985.0, True, GateDecision.FAIL),
        (995.0, True, GateDecision.PASS),
        (990.0, True, GateDecision.PASS),
        (1100.0, True, GateDecision.PASS),
        # step seconds, lower is better, tolerance 1 %: the line is at 1010
        (1015.0, False, GateDecision.FAIL),
        (1005.0, False, GateDecision.PASS),
        (1010.0, False, GateDecision.PASS),
        (900.0, False, GateDecision.PASS),
    ],
)
def test_regression_gate_without_noise(candidate: float, higher_is_better: bool, decision: GateDecision) -> None:
    assert regression_check([candidate], [1000.0], NO_NOISE, 1.0, higher_is_better) is decision


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_regression_gate_with_noise_fails_passes_or_defers(higher_is_better: bool) -> None:
    noise = Noise(cv_pct=0.5, df=1000.0)  # one run vs one run: ±1.39 %
    sign = 1 if higher_is_better else -1  # a -3 % TGS regression is a +3 % step-time one

    def gate(delta: float) -> GateDecision:
        return regression_check([1000 * (1 + sign * delta / 100)], [1000.0], noise, 1.0, higher_is_better)

    assert gate(-3.0) is GateDecision.FAIL  # the whole interval past -1 %
    assert gate(+1.0) is GateDecision.PASS  # the whole interval inside
    assert gate(-1.0) is GateDecision.AMBIGUOUS and gate(0.0) is GateDecision.AMBIGUOUS


def test_zero_tolerance_fails_any_confident_regression() -> None:
    assert regression_check([999.0], [1000.0], NO_NOISE, 0.0) is GateDecision.FAIL
    assert regression_check([1000.0], [1000.0], NO_NOISE, 0.0) is GateDecision.PASS


def test_regression_check_rejects_a_negative_tolerance() -> None:
    with pytest.raises(ValueError, match="tolerance_pct"):
        regression_check([1000.0], [1000.0], NO_NOISE, -1.0)


# --- decide_after_remeasure --------------------------------------------------------------------


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_after_remeasure_a_still_ambiguous_result_is_decided_by_the_odds(higher_is_better: bool) -> None:
    noise = Noise(cv_pct=0.5, df=1000.0)
    sign = 1 if higher_is_better else -1

    def at(delta: float) -> list[float]:
        return [1000 * (1 + sign * delta / 100)]

    args = ([1000.0], noise, 1.0, higher_is_better)
    for delta in (-1.0, -0.3, -1.8):
        assert regression_check(at(delta), *args) is GateDecision.AMBIGUOUS
    assert regression_probability(at(-1.0), *args) == pytest.approx(0.5, abs=0.01)
    assert decide_after_remeasure(at(-1.0), *args) is GateDecision.PASS  # 50 % < 80 %
    assert decide_after_remeasure(at(-0.3), *args) is GateDecision.PASS
    assert decide_after_remeasure(at(-1.8), *args) is GateDecision.FAIL  # ≈ 87 %
    # fail_probability=0.5 is the plain "point estimate vs tolerance" rule
    assert decide_after_remeasure(at(-1.1), *args, fail_probability=0.5) is GateDecision.FAIL
    assert decide_after_remeasure(at(-0.9), *args, fail_probability=0.5) is GateDecision.PASS


def test_after_remeasure_a_clear_result_keeps_its_decision() -> None:
    assert decide_after_remeasure([985.0], [1000.0], NO_NOISE, 1.0) is GateDecision.FAIL
    assert decide_after_remeasure([995.0], [1000.0], NO_NOISE, 1.0) is GateDecision.PASS


# --- acceptance: a scripted noisy trainer through the 1 % gate ---------------------------------

STEPS, STEADY_FROM = 15, 5


def noisy_run(
    rng: np.random.Generator, true_tgs: float, cv_run: float = 0.008, cv_step: float = 0.007, autocorr: float = 0.3
) -> list[float]:
    """Per-step TGS of one job: a run-level offset, then AR(1) step jitter, slow warm-up."""
    run_mean = true_tgs * (1 + rng.normal(0, cv_run))
    jitter = np.empty(STEPS)
    jitter[0] = rng.normal(0, cv_step)
    for i in range(1, STEPS):
        jitter[i] = autocorr * jitter[i - 1] + math.sqrt(1 - autocorr**2) * rng.normal(0, cv_step)
    warmup = np.where(np.arange(STEPS) < STEADY_FROM, 0.6, 1.0)
    return list(run_mean * warmup * (1 + jitter))


def gate(seed: int, true_delta_pct: float, tolerance_pct: float = 1.0, extra_runs: int = 2) -> GateDecision:
    """Baseline ×2, candidate ×1, up to extra_runs more candidate runs while ambiguous."""
    rng = np.random.default_rng(seed)

    def steady(true_tgs: float) -> float:
        return job_estimate(noisy_run(rng, true_tgs)[STEADY_FROM:]).mean

    baseline = [steady(1000.0), steady(1000.0)]
    noise = run_noise(baseline)
    candidate = [steady(1000.0 * (1 + true_delta_pct / 100))]
    decision = regression_check(candidate, baseline, noise, tolerance_pct)
    while decision is GateDecision.AMBIGUOUS and len(candidate) <= extra_runs:
        candidate.append(steady(1000.0 * (1 + true_delta_pct / 100)))
        decision = regression_check(candidate, baseline, noise, tolerance_pct)
    return decide_after_remeasure(candidate, baseline, noise, tolerance_pct)


def test_no_true_change_never_fails_the_1pct_gate() -> None:
    # Observed with seeds 0-49: 0 FAIL / 50 (2 PASS on run 1, 7 on run 2, 2 on run 3, 39 still
    # ambiguous after 3 runs and PASSed by the 80 % odds rule; the 50 % point-estimate rule FAILs 5).
    # Not a guarantee: over 20 000 other seeds the false-FAIL rate is 1.5 %, so 0/50 holds for ~47 %
    # of seed sets. With 2 + 3 runs at 0.85 % per-run noise no fallback odds make (a) and (b) both sure.
    fails = sum(gate(seed, 0.0) is GateDecision.FAIL for seed in range(50))
    assert fails == 0


def test_a_3pct_regression_fails_the_1pct_gate() -> None:
    # Observed with seeds 50-99: 44 FAIL / 50 with the noise's honest 1 degree of freedom from two
    # baseline repeats (48 while a 0.8 % prior lent it 4 pseudo-degrees of freedom).
    fails = sum(gate(seed, -3.0) is GateDecision.FAIL for seed in range(50, 100))
    assert fails >= 44


def test_an_interval_spanning_a_halving_and_a_doubling_is_worded_too_noisy_and_says_why() -> None:
    # The first interval under heavy load: baselines 6943.5 and 2779.0, one candidate run.
    cmp = compare([4477.0], [6943.5, 2779.0], pooled_noise([[6943.5, 2779.0]]))
    assert cmp.ci_low_pct <= -50 and cmp.ci_high_pct >= 100 and cmp.verdict is Direction.WITHIN_NOISE
    assert direction(cmp) == "too_noisy" and too_noisy(cmp)
    assert words(cmp) == "noise too large to judge: baselines differ by 150 %"
    # the wording never moves the figure
    assert dataclasses.replace(cmp, noise_note="") == dataclasses.replace(
        compare([4477.0], [6943.5, 2779.0], pooled_noise([[6943.5, 2779.0]])), noise_note=""
    )
    # the candidate's own runs, when they are what widens it
    wild = compare([3000.0, 9000.0], [1000.0, 1001.0, 999.0], pooled_noise([[1000.0, 1001.0, 999.0]]))
    assert words(wild) == "noise too large to judge: its runs differ by 200 %"
    # its own steps (a run that lost 40 % mid-run, one run each side)
    steps = compare([800.0], [1000.0, 1001.0], pooled_noise([[1000.0, 1001.0]]), spread_c=Spread(step_var=0.2**2))
    assert words(steps) == "noise too large to judge: its steps shifted within its run (±20.0 % on its mean)"
    # an ordinary interval, a win, an unstable or not-applied one keep their words
    plain = compare([1010.0], [1000.0, 1004.0], pooled_noise([[1000.0, 1004.0]]))
    assert not too_noisy(plain) and direction(plain) == "within_noise" and words(plain) == "within noise"
    assert words(dataclasses.replace(cmp, unstable=True)) == "unstable"
    assert words(dataclasses.replace(cmp, not_applied=True)) == "not applied"
    win = compare([1500.0], [1000.0, 1001.0], pooled_noise([[1000.0, 1001.0]]))
    assert words(win) == "better" and not too_noisy(win)
