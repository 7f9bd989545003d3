"""Noise-aware judgements over stored results (pure): Δ% intervals, instability, confirmation,
the numerics guard and power, over the tag's groups of identical settings (verdict/groups.py).
Which settings win (the recipe, the cross-config regression check) is verdict/choice.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..results import JobResult, RunKind
from . import numerics, stats

# Re-exported: callers read the groups as verdicts.X, with the judgements made on them.
from .groups import Table as Table
from .groups import baseline_values as baseline_values
from .groups import ident
from .groups import identical_groups as identical_groups
from .groups import settings_key as settings_key
from .groups import table as table
from .numerics import Numerics
from .one_run import (
    POOLED_MIN_STEPS,
    against_baseline,
    off_baseline,
    own_se,
    profiled,
    run_values,
    steady_steps,
)


def pooled_evidence(result: JobResult, results: Sequence[JobResult]) -> bool:
    """A profiled run counted as a run of its settings' group (the winner's re-run that agrees
    with the group's plain runs; see _UNPOOLED)."""
    return (
        result.kind is RunKind.WINNER_EVIDENCE
        and profiled(result)
        and ident(result) in table(results, result.config_tag).pooled
    )


def noise(results: Sequence[JobResult], config_tag: str) -> stats.Noise:
    """Run-to-run noise of a config tag from every group of identical-settings runs (see stats:
    the prior only when no settings ran twice)."""
    return table(results, config_tag).noise


def source_of(result: JobResult, results: Sequence[JobResult]) -> JobResult | None:
    """The run a shared duplicate's record copies (its `shared_from` item), None for any other
    run. Its settings are the duplicate's effectively (the env file's deployed flags and XLA's
    last-wins included, or the same compiled program), even where the recorded flags differ:
    `settings_key` alone would make the copied job a second measurement of other settings."""
    if not result.shared_from:
        return None
    return next(
        (
            r
            for r in results
            if r.item == result.shared_from and not r.shared_from and r.config_tag == result.config_tag
        ),
        None,
    )


def group_of(result: JobResult, results: Sequence[JobResult]) -> tuple[float, ...]:
    """Every run with the result's effective settings (its own at least; a shared duplicate's:
    its source's)."""
    if (source := source_of(result, results)) is not None:
        return group_of(source, results)
    return table(results, result.config_tag).groups.get(settings_key(result)) or tuple(run_values(result))


def unstable(result: JobResult, results: Sequence[JobResult]) -> bool:
    """The runs of the result's settings disagree beyond what the other groups show (F test at
    99 %); the baseline's evidence run when it disagrees with the baseline's runs (`off_baseline`);
    a winner's evidence run that stands alone when it lies outside its group's 99 % prediction
    interval; a pooled one (`pooled_evidence`) is its group's; the runs of settings whose win
    that re-run contradicts (`Table.contradicted`: +12 % and −6 %) are unstable too."""
    tab = table(results, result.config_tag)
    if profiled(result) and result.kind is RunKind.EVIDENCE:
        return off_baseline(result, tab.baseline, tab.noise, tab.baseline_floor)
    if profiled(result) and ident(result) not in tab.pooled:
        key = settings_key(result)
        reference = tab.groups.get(key, ())
        return (
            bool(reference)
            and result.tgs is not None
            and stats.outlier(
                result.tgs, reference, tab.noise, own_se=own_se(result), floor_se=tab.floors.get(key, 0.0)
            )
        )
    return settings_key(result) in tab.unstable or settings_key(result) in tab.contradicted


def compare_result(result: JobResult, results: Sequence[JobResult]) -> stats.Comparison | None:
    """The result's settings (all their runs) vs the tag's baseline, each side with its own
    spread; `unstable` when the runs disagree. An evidence run of the baseline is a member of
    the baseline's group: never better. A shared duplicate compares as its source does. None
    without a baseline or a measurement."""
    if (source := source_of(result, results)) is not None:
        return compare_result(source, results)
    tab = table(results, result.config_tag)
    if not tab.baseline or result.tgs is None:
        return None
    if profiled(result) and ident(result) not in tab.pooled and result.kind is RunKind.EVIDENCE:
        # The baseline's own settings with the profiler: never better or worse, but a measurement
        # off the baseline beyond its interval is no agreement (`off_baseline`, on this interval).
        cmp = against_baseline(result, tab.baseline, tab.noise, tab.baseline_floor)
        return replace(cmp, verdict=stats.Direction.WITHIN_NOISE, unstable=unstable(result, results))
    if profiled(result) and ident(result) not in tab.pooled:
        _, spread_b = _spreads(tab, settings_key(result))
        cmp = stats.compare(
            [result.tgs],
            tab.baseline,
            tab.noise,
            unstable=unstable(result, results),
            spread_c=stats.Spread(step_var=own_se(result) ** 2),
            spread_b=spread_b,
        )
        return not_applied_marked(cmp, result, results)
    spread_c, spread_b = _spreads(tab, settings_key(result))
    cmp = stats.compare(
        group_of(result, results),
        tab.baseline,
        tab.noise,
        unstable=unstable(result, results),
        extra_var=tab.partial.get(settings_key(result), 0.0),
        spread_c=spread_c,
        spread_b=spread_b,
    )
    if cmp.verdict is stats.Direction.BETTER and settings_key(result) in tab.held:
        # one partial run the planner stopped as no win: never better on its own, as there
        cmp = replace(cmp, verdict=stats.Direction.WITHIN_NOISE)
    return not_applied_marked(cmp, result, results)


def _spreads(tab: Table, key: tuple[object, ...]) -> tuple[stats.Spread, stats.Spread]:
    """What each side's runs show of their own error (stats.Spread): the candidate's steps; the
    baseline's steps and its disagreeing evidence runs."""
    return stats.Spread(step_var=tab.floors.get(key, 0.0) ** 2), stats.Spread(tab.witnesses, tab.baseline_floor**2)


def not_applied_marked(cmp: stats.Comparison, result: JobResult, results: Sequence[JobResult]) -> stats.Comparison:
    """A settings group one of whose runs' requested library settings left no trace (`not_applied`):
    never better (never a recipe) and read `not applied`, not `within noise`."""
    key = settings_key(result)
    if result.not_applied or any(
        r.not_applied for r in results if r.config_tag == result.config_tag and settings_key(r) == key
    ):
        return replace(cmp, verdict=stats.Direction.WITHIN_NOISE, not_applied=True)
    return cmp


def winner_evidence(result: JobResult, results: Sequence[JobResult]) -> list[JobResult]:
    """The measured evidence re-runs (profiler on) of the result's settings, but those measured on
    fewer than POOLED_MIN_STEPS steady steps (a 10-step cell's profiled run has step 9 alone, right
    after the profiler's window: no measurement to confirm or contradict a win with)."""
    key = settings_key(result)
    return [
        e
        for e in results
        if e.kind is RunKind.WINNER_EVIDENCE
        and e.measured
        and e.tgs is not None
        and (not profiled(e) or not 0 < steady_steps(e) < POOLED_MIN_STEPS)  # 0: not recorded
        and e.config_tag == result.config_tag
        and (e.resolved_from == result.profile or settings_key(e) == key)
    ]


def confirmation(result: JobResult, results: Sequence[JobResult], require_control: bool = True) -> str:
    """Why a win is not confirmed ("" when it is): a win needs a second run that agrees with it,
    a repeat (the runs agree) or the winner's evidence run; that re-run contradicts the win when
    it is not above the baseline, or outside the runs' 99 % prediction interval and under half
    their gain; and, with `require_control`, a control after its first run (`unbracketed`)."""
    tab = table(results, result.config_tag)
    values = group_of(result, results)
    base = sum(tab.baseline) / len(tab.baseline) if tab.baseline else 0.0
    shown = ", ".join(f"{v:.1f}" for v in values)
    evidence = winner_evidence(result, results)
    mean = sum(values) / len(values)
    floor = tab.floors.get(settings_key(result), 0.0)
    for e in evidence:
        tgs = e.tgs or 0.0
        # Contradicts: no win at all, or beyond the runs' noise and under half the win.
        off = stats.outlier(tgs, values, tab.noise, own_se=own_se(e), floor_se=floor)
        if tgs <= base or (off and tgs - base < (mean - base) / 2):
            return (
                f"the winner's re-run {e.item} (job {e.job_id}) measured {tgs:.1f} TGS "
                f"({(tgs / base - 1) * 100 if base else 0.0:+.2f} % vs the baseline), which "
                f"contradicts {result.profile}'s {len(values)} run(s) ({shown})"
            )
    if unstable(result, results):
        return f"{result.profile}'s runs disagree beyond the noise ({shown})"
    if len(values) < 2 and not evidence:
        return f"{result.profile}'s win rests on one run ({shown} TGS): no second run confirmed it"
    # The first run is why these settings were repeated or profiled (the fastest, a possible win):
    # a biased witness, so the runs after it must show the win on their own (a replication).
    first, *after = [v for _, v in _in_order(result, results)] or list(values)
    alone = [e.tgs or 0.0 for e in evidence if not pooled_evidence(e, results)]
    spread_c, spread_b = _spreads(tab, settings_key(result))
    again = stats.compare([*after, *alone], tab.baseline, tab.noise, spread_c=spread_c, spread_b=spread_b)
    if again.verdict is not stats.Direction.BETTER:
        return (
            f"{result.profile}'s runs after its first ({', '.join(f'{v:.1f}' for v in [*after, *alone])}) "
            f"do not show the win on their own: {again.delta_pct:+.2f} % [{again.ci_low_pct:+.2f}, "
            f"{again.ci_high_pct:+.2f}] vs the baseline (the first, {first:.1f}, is why they ran)"
        )
    return unbracketed(result, results) if require_control else ""


def unbracketed(result: JobResult, results: Sequence[JobResult]) -> str:
    """Why a win no control brackets is not confirmed ("" when a baseline run, a control, ran after
    its first run): without one, a drift since the baseline's runs (load that left, a node that
    warmed up) reads as the win, as the adaptive planner counts it (adaptive.rules.confirmed_win).
    The fixed protocol runs none: its wins are reported, never locked."""
    runs = _in_order(result, results)
    if not runs:
        return ""
    first = _job_order(runs[0][0])
    baselines = sorted(
        {
            job
            for r in results
            if r.kind is RunKind.BASELINE and r.config_tag == result.config_tag and r.measured
            for job, _ in (r.runs or ((r.job_id, r.tgs or 0.0),))
        },
        key=_job_order,
    )
    if any(_job_order(job) > first for job in baselines):
        return ""
    return (
        f"no control (a baseline run) ran after {result.profile}'s first run (job {runs[0][0]}): a drift "
        f"since the baseline's runs (job{'s' if len(baselines) != 1 else ''} {', '.join(baselines)}) would read "
        "as this win"
    )


def _job_order(job: str) -> tuple[int, str]:
    return (len(job), job)


def _in_order(result: JobResult, results: Sequence[JobResult]) -> list[tuple[str, float]]:
    """(job id, TGS) of every run in the result's group (`group_of`), in job order."""
    key, tab = settings_key(result), table(results, result.config_tag)
    members = [r for g in identical_groups(results, result.config_tag) if settings_key(g[0]) == key for r in g]
    members += [r for r in results if ident(r) in tab.pooled and settings_key(r) == key]
    runs = {job: tgs for r in members for job, tgs in (r.runs or ((r.job_id, r.tgs or 0.0),))}
    return sorted(runs.items(), key=lambda run: _job_order(run[0]))


def baseline_spread(results: Sequence[JobResult], config_tag: str) -> stats.Noise | None:
    """The spread of the tag's baseline runs with its evidence runs (`Table.witnesses`), when wider
    than the pooled noise: the baseline side of every Δ carries it; None otherwise."""
    tab = table(results, config_tag)
    runs = [*tab.baseline, *tab.witnesses]
    if len(runs) < 2:
        return None
    # its repeats alone too: a baseline group the noise leaves out as unstable (a pair 150 % apart
    # under load) still widens every Δ (stats._side), and so the smallest one it can show
    spread = stats.pooled_noise([runs])
    return spread if spread.cv_pct > tab.noise.cv_pct else None


def detectable_effect(results: Sequence[JobResult], config_tag: str, m: int = 1) -> float | None:
    """The smallest Δ% m runs of a profile would show as *better* (80 % power), at this tag's
    noise, baseline repeats and `baseline_spread`; None without a baseline."""
    k = len(baseline_values(results, config_tag))
    spread = baseline_spread(results, config_tag)
    return stats.detectable_effect(noise(results, config_tag), m, k, baseline=spread) if k else None


def numerics_check(
    result: JobResult, results: Sequence[JobResult], tolerance: numerics.Tolerance = numerics.DEFAULT_TOLERANCE
) -> numerics.Check:
    """The run's loss trajectory against every baseline-deployed repeat of its tag and image."""
    return trajectory_check(result.loss_fields(), result.config_tag, result.image, results, result.key, tolerance)


def trajectory_check(
    losses: Mapping[str, numerics.Trajectory],
    config_tag: str,
    image: str,
    results: Sequence[JobResult],
    key: str = "",
    tolerance: numerics.Tolerance = numerics.DEFAULT_TOLERANCE,
) -> numerics.Check:
    """Loss trajectories (a finished run's, or a running job's so far) against every stored
    baseline-deployed repeat of `config_tag` and `image` other than run `key`."""
    references = [
        (r.job_id, r.loss_fields())
        for r in results
        if r.kind is RunKind.BASELINE and r.config_tag == config_tag and r.image == image and r.losses and r.key != key
    ]
    return numerics.guard(losses, references, numerics.widened(tolerance, references))


def numerics_changed(result: JobResult, results: Sequence[JobResult]) -> bool:
    return numerics_check(result, results).verdict is Numerics.CHANGED


def compare(candidate: Sequence[float], results: Sequence[JobResult], config_tag: str) -> stats.Comparison | None:
    """Δ% of candidate runs vs the tag's baseline, with its interval; None without a baseline."""
    baseline = baseline_values(results, config_tag)
    if not candidate or not baseline:
        return None
    return stats.compare(candidate, baseline, noise(results, config_tag))
