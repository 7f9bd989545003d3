"""What one run's value is (pure): profiled or plain, the steady steps it is the mean of, its own
standard error, and what a run stopped early lacks — the facts verdicts.py pools runs by."""

from __future__ import annotations

from collections.abc import Sequence

from ..results import JobResult, RunKind, Verdict
from . import stats
from .steady import PROFILER_LAST_STEP

# Profiled runs: their steady value is taken after the profiler's window (steps 9-14, as the
# workflow's SKILL measures them; steady.steady_state), so the winner's profiled re-run is a run
# of the winner's settings and joins its group (`pooled_evidence`) — unless it has fewer than
# POOLED_MIN_STEPS steady steps or lies outside its group's 99 % prediction interval: then it
# stands alone and is flagged (`unstable`), never silently moving a verdict. The baseline's
# evidence run stands alone, checked against the baseline's runs.
_UNPOOLED = (RunKind.EVIDENCE, RunKind.WINNER_EVIDENCE)
POOLED_MIN_STEPS = 3  # a profiled run's steady steps (9-14) at least, to count as a measurement


def profiled(result: JobResult) -> bool:
    """An evidence run measured with the profiler on: its value is its steps after the profiler's
    window (steady.steady_state). A run of the winner's settings measured plain (the gate
    repair's confirming run) is a plain run of its settings, whatever its kind; a stored result
    without its steps is taken as profiled."""
    if result.kind not in _UNPOOLED:
        return False
    return not result.steps_used or min(result.steps_used) > PROFILER_LAST_STEP


def steady_steps(result: JobResult) -> int:
    """The steady steps a run's value is the mean of (its recorded steps, else their values)."""
    return len(result.tgs_values) or len(result.steps_used)


def run_values(result: JobResult) -> list[float]:
    """The steady TGS of every run behind a result (a pooled adaptive result's repeats each)."""
    if result.runs:
        return [v for _, v in result.runs]
    return [result.tgs] if result.tgs is not None else []


def partial_var(runs: Sequence[JobResult]) -> dict[str, float]:
    """By job id, the relative variance a run stopped early carries for the steady steps it did
    not run: the per-step scatter of the full runs among `runs` (their mean; the run's own
    steps' without any) × (1/n − 1/N), n its steps, N a full run's. The run-to-run noise is
    measured on full runs, so a stopped run's mean is that much less certain (as the adaptive
    planner counts it: adaptive.judge.Board.stopped_var); a pooled result (several runs) is left
    as it is."""
    full = [
        r for r in runs if r.verdict is Verdict.SUCCESS and not profiled(r) and not r.runs and len(r.tgs_values) >= 2
    ]
    steps = max((len(r.tgs_values) for r in full), default=0)
    shared = [step_variance(r.tgs_values) for r in full]
    out: dict[str, float] = {}
    for r in runs:
        n = steady_steps(r)
        if r.verdict is not Verdict.STOPPED_EARLY or r.runs or r.inert or r.shared_from or not 0 < n < steps:
            continue
        step_var = (
            sum(shared) / len(shared) if shared else step_variance(r.tgs_values) if len(r.tgs_values) >= 2 else 0.0
        )
        out[r.job_id] = step_var * (1 / n - 1 / steps)
    return out


def step_variance(tgs_values: Sequence[float]) -> float:
    """One run's relative per-step variance, its steps' autocorrelation counted (stats.job_estimate;
    the adaptive planner's too: adaptive.judge.step_variance)."""
    job = stats.job_estimate(tgs_values)
    return job.stderr**2 * job.n / job.mean**2


def own_se(result: JobResult) -> float:
    """A run's relative standard error from its own steady steps (0 without them)."""
    n = len(result.tgs_values)
    return (step_variance(result.tgs_values) / n) ** 0.5 if n >= 2 else 0.0


def step_error(runs: Sequence[JobResult]) -> float:
    """The runs' typical relative standard error of one run's mean, from their own steps (root
    mean square of `own_se`; a pooled result's steps are its runs' together: its SE × √runs is
    one run's)."""
    squares = [(own_se(r) ** 2) * max(1, len(r.runs)) for r in runs]
    return (sum(squares) / len(squares)) ** 0.5 if squares else 0.0


# The adaptive planner's stops that found a run no win (adaptive.values.StopKind's values; the
# engine stores the stop's reason as "stopped early: <kind> after n of N steady steps: …").
NO_WIN_STOPS = ("futile", "settled")


def stopped_as_no_win(result: JobResult) -> bool:
    """A run the adaptive planner stopped early as futile or settled: then its standing was within
    the noise or worse, and one partial run is never *better* on its own below the win threshold
    (adaptive.judge.Estimate.partial). A verdict on it alone says the same (verdicts.compare_result)."""
    if result.verdict is not Verdict.STOPPED_EARLY or result.runs or result.inert or result.shared_from:
        return False
    kind, _, rest = result.reason.removeprefix("stopped early: ").partition(" ")
    return kind in NO_WIN_STOPS and rest.startswith("after ")


def step_cv_pct(runs: Sequence[JobResult]) -> float:
    """The typical error of one run's mean from its own steady steps, in % (the root mean square
    of `own_se` over the runs that recorded two steps or more; 0 without any)."""
    return 100 * step_error([r for r in runs if r.measured and len(r.tgs_values) >= 2])


def baseline_evidence(results: Sequence[JobResult], config_tag: str) -> tuple[float, ...]:
    """The baseline's profiled evidence runs measured on POOLED_MIN_STEPS steady steps or more:
    the baseline's own settings measured again (steps after the profiler's window), so the
    baseline is no steadier than they show with its repeats (a loaded pair, a lucky agreement),
    whatever its repeats alone say. They count in the baseline's spread, not in its mean."""
    return tuple(
        r.tgs
        for r in results
        if r.tgs is not None
        and profiled_run_of(r, RunKind.EVIDENCE, config_tag)
        and not 0 < steady_steps(r) < POOLED_MIN_STEPS  # 0: not recorded
    )


def profiled_run_of(result: JobResult, kind: RunKind, config_tag: str) -> bool:
    """A measured profiled run of this kind and config tag, its own job (not a shared duplicate)."""
    return (
        result.kind is kind
        and profiled(result)
        and result.config_tag == config_tag
        and result.measured
        and result.tgs is not None
        and not result.shared_from
    )


def against_baseline(
    result: JobResult, baseline: Sequence[float], noise: stats.Noise, baseline_floor: float
) -> stats.Comparison:
    """One profiled run vs the baseline's runs, each side's interval no narrower than its own steps
    allow (stats.Spread.step_var: the run's `own_se`, the baseline runs' `step_error`), as every
    other Δ is: identical runs that happen to agree exactly make no zero-width interval."""
    return stats.compare(
        [result.tgs or 0.0],
        baseline,
        noise,
        spread_c=stats.Spread(step_var=own_se(result) ** 2),
        spread_b=stats.Spread(step_var=baseline_floor**2),
    )


def off_baseline(result: JobResult, baseline: Sequence[float], noise: stats.Noise, baseline_floor: float) -> bool:
    """The baseline's profiled evidence run disagrees with the baseline's runs: outside their 99 %
    prediction interval (its own steps' error and the baseline runs' step floor counted), or its
    Δ's 95 % interval (`against_baseline`) clear of 0."""
    if not baseline or result.tgs is None:
        return False
    cmp = against_baseline(result, baseline, noise, baseline_floor)
    return (
        stats.outlier(result.tgs, baseline, noise, own_se=own_se(result), floor_se=baseline_floor)
        or not cmp.ci_low_pct <= 0 <= cmp.ci_high_pct
    )
