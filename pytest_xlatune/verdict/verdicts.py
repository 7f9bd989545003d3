"""Noise-aware judgements over stored results (pure): groups of identical settings, their noise,
Δ% intervals, confirmation, the numerics guard and power. Which settings win (the recipe, the
cross-config regression check) is verdict/choice.py."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..results import JobResult, RunKind
from . import numerics, stats
from .numerics import Numerics
from .one_run import (
    POOLED_MIN_STEPS,
    disagreeing_baseline_evidence,
    off_baseline,
    own_se,
    partial_var,
    profiled,
    profiled_run_of,
    run_values,
    steady_steps,
    step_error,
    stopped_as_no_win,
)


def baseline_values(results: Sequence[JobResult], config_tag: str) -> list[float]:
    """Steady TGS of every measured baseline-deployed repeat of a config tag."""
    return [
        r.tgs
        for r in results
        if r.kind is RunKind.BASELINE and r.config_tag == config_tag and r.measured and r.tgs is not None
    ]


def settings_key(result: JobResult) -> tuple[object, ...]:
    """What a run effectively ran: XLA flags resolved last-wins, env, overrides, unset env, tag, image.
    A run that records no settings of its own but is not a baseline (e.g. a restore_default
    that only unsets env vars) is identical only to runs of its own name."""
    if (
        not (result.xla_flags or result.env or result.overrides or result.unset_env)
        and result.kind is not RunKind.BASELINE
    ):
        return (result.config_tag, result.image, result.kind, result.profile)
    flags: dict[str, str] = {}
    for flag in result.xla_flags:
        name, _, value = flag.partition("=")
        flags[name] = value
    return (
        result.config_tag,
        result.image,
        tuple(sorted(flags.items())),
        tuple(sorted(result.env)),
        tuple(sorted(result.overrides)),
        tuple(sorted(result.unset_env)),
    )


def identical_groups(results: Sequence[JobResult], config_tag: str) -> list[list[JobResult]]:
    """Measured runs of a tag grouped by identical effective settings (repeats, duplicates,
    controls, re-measurements), the baseline's group first."""
    groups: dict[tuple[object, ...], list[JobResult]] = {}
    for r in results:
        # A shared duplicate's record is its source's job again: no second measurement.
        if r.config_tag == config_tag and r.measured and r.tgs is not None and not profiled(r) and not r.shared_from:
            groups.setdefault(settings_key(r), []).append(r)
    return sorted(groups.values(), key=lambda g: all(r.kind is not RunKind.BASELINE for r in g))


@dataclass(frozen=True)
class Table:
    """One config tag's noise and its groups of identical settings (built once per results list)."""

    noise: stats.Noise  # pooled over the groups that agree with the others
    groups: Mapping[tuple[object, ...], tuple[float, ...]]  # settings → every run's steady TGS
    baseline: tuple[float, ...]  # the baseline-deployed repeats (and controls)
    unstable: frozenset[tuple[object, ...]] = frozenset()  # groups beyond the others' noise
    pooled: frozenset[tuple[str, str]] = (
        frozenset()
    )  # (key, job id) of the profiled runs that joined their group (pooled_evidence)
    partial: Mapping[tuple[object, ...], float] = field(
        default_factory=dict
    )  # settings → the missing steps' variance of their one run, stopped early (partial_var)
    held: frozenset[tuple[object, ...]] = frozenset()  # settings whose one run stopped as no win
    # The baseline's profiled evidence runs outside its runs' 99 % prediction interval: its
    # settings measured again disagree with it, so its side of every Δ carries that spread.
    witnesses: tuple[float, ...] = ()
    # settings → the error of one run's mean that their runs' own steps show (step_error), and
    # the baseline repeats': no interval is narrower than that (stats.Spread.step_var)
    floors: Mapping[tuple[object, ...], float] = field(default_factory=dict)
    baseline_floor: float = 0.0


@dataclass(frozen=True, eq=False)
class _Results:
    """A results list as a cache key: equal only to the same results objects, in the same order
    (the key holds them alive, so their ids stay theirs)."""

    config_tag: str
    results: tuple[JobResult, ...]

    def _ids(self) -> tuple[object, ...]:
        return (self.config_tag, *map(id, self.results))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Results) and self._ids() == other._ids()

    def __hash__(self) -> int:
        return hash(self._ids())


def table(results: Sequence[JobResult], config_tag: str) -> Table:
    """The tag's `Table`, cached per results list: O(groups) for every comparison after the first."""
    return _table(_Results(config_tag, tuple(results)))


@functools.lru_cache(maxsize=16)
def _table(key: _Results) -> Table:
    results, config_tag = key.results, key.config_tag
    found = identical_groups(results, config_tag)
    plain = {settings_key(g[0]): tuple(v for r in g for v in run_values(r)) for g in found}
    joined = _joining_evidence(results, config_tag, plain, stats.pooled_noise(list(plain.values())))
    found = [[*g, *(r for r in joined if settings_key(r) == settings_key(g[0]))] for g in found]
    groups = {settings_key(g[0]): tuple(v for r in g for v in run_values(r)) for g in found}
    floors = {settings_key(g[0]): step_error(g) for g in found}
    everything = stats.pooled_noise(list(groups.values()))
    # A group whose runs disagree beyond all the others (F test at 99 %) is unstable: its spread
    # widens its own interval (stats.compare) but not everyone's.
    unstable = frozenset(
        k
        for k, v in groups.items()
        if len(v) >= 2 and stats.disagree(v, stats.without(everything, v), floor_se=floors[k])
    )
    steady = [v for k, v in groups.items() if k not in unstable]
    noise = stats.pooled_noise(steady) if unstable and any(len(v) >= 2 for v in steady) else everything
    partial = partial_var([r for g in found for r in g])
    baseline = tuple(baseline_values(results, config_tag))
    return Table(
        noise,
        groups,
        baseline,
        unstable,
        frozenset(_ident(r) for r in joined),
        {settings_key(g[0]): partial[g[0].job_id] for g in found if len(g) == 1 and g[0].job_id in partial},
        frozenset(settings_key(g[0]) for g in found if len(g) == 1 and stopped_as_no_win(g[0])),
        disagreeing_baseline_evidence(results, config_tag, baseline, noise),
        floors,
        step_error([r for g in found for r in g if r.kind is RunKind.BASELINE]),
    )


def _joining_evidence(
    results: Sequence[JobResult],
    config_tag: str,
    plain: Mapping[tuple[object, ...], tuple[float, ...]],
    noise: stats.Noise,
) -> list[JobResult]:
    """The winner's profiled re-runs that join their settings' group of plain runs: measured on
    POOLED_MIN_STEPS steady steps or more, and inside the plain runs' 99 % prediction interval."""
    return [
        r
        for r in results
        if r.tgs is not None
        and profiled_run_of(r, RunKind.WINNER_EVIDENCE, config_tag)
        and steady_steps(r) >= POOLED_MIN_STEPS
        and (group := plain.get(settings_key(r)))
        and not stats.outlier(r.tgs, group, noise, own_se=own_se(r))
    ]


def _ident(result: JobResult) -> tuple[str, str]:
    return (result.key, result.job_id)


def pooled_evidence(result: JobResult, results: Sequence[JobResult]) -> bool:
    """A profiled run counted as a run of its settings' group (the winner's re-run that agrees
    with the group's plain runs; see _UNPOOLED)."""
    return (
        result.kind is RunKind.WINNER_EVIDENCE
        and profiled(result)
        and _ident(result) in table(results, result.config_tag).pooled
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
    interval; a pooled one (`pooled_evidence`) is its group's."""
    tab = table(results, result.config_tag)
    if profiled(result) and result.kind is RunKind.EVIDENCE:
        return off_baseline(result, tab.baseline, tab.noise)
    if profiled(result) and _ident(result) not in tab.pooled:
        reference = tab.groups.get(settings_key(result), ())
        return (
            bool(reference)
            and result.tgs is not None
            and stats.outlier(result.tgs, reference, tab.noise, own_se=own_se(result))
        )
    return settings_key(result) in tab.unstable


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
    if profiled(result) and _ident(result) not in tab.pooled:
        cmp = stats.compare([result.tgs], tab.baseline, tab.noise, unstable=unstable(result, results))
        return (
            not_applied_marked(cmp, result, results)
            if result.kind is RunKind.WINNER_EVIDENCE
            # The baseline's own settings with the profiler: never better or worse, but a
            # measurement off the baseline beyond its interval is no agreement (`off_baseline`).
            else replace(cmp, verdict=stats.Direction.WITHIN_NOISE)
        )
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


def confirmation(result: JobResult, results: Sequence[JobResult]) -> str:
    """Why a win is not confirmed ("" when it is): a win needs a second run that agrees with it,
    a repeat (the runs agree) or the winner's evidence run; that re-run contradicts the win when
    it is not above the baseline, or outside the runs' 99 % prediction interval and under half
    their gain."""
    tab = table(results, result.config_tag)
    values = group_of(result, results)
    base = sum(tab.baseline) / len(tab.baseline) if tab.baseline else 0.0
    shown = ", ".join(f"{v:.1f}" for v in values)
    evidence = winner_evidence(result, results)
    mean = sum(values) / len(values)
    for e in evidence:
        tgs = e.tgs or 0.0
        # Contradicts: no win at all, or beyond the runs' noise and under half the win.
        if tgs <= base or (stats.outlier(tgs, values, tab.noise, own_se=own_se(e)) and tgs - base < (mean - base) / 2):
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
    if again.verdict is stats.Direction.BETTER:
        return ""
    return (
        f"{result.profile}'s runs after its first ({', '.join(f'{v:.1f}' for v in [*after, *alone])}) "
        f"do not show the win on their own: {again.delta_pct:+.2f} % [{again.ci_low_pct:+.2f}, "
        f"{again.ci_high_pct:+.2f}] vs the baseline (the first, {first:.1f}, is why they ran)"
    )


def _in_order(result: JobResult, results: Sequence[JobResult]) -> list[tuple[str, float]]:
    """(job id, TGS) of every run in the result's group (`group_of`), in job order."""
    key, tab = settings_key(result), table(results, result.config_tag)
    members = [r for g in identical_groups(results, result.config_tag) if settings_key(g[0]) == key for r in g]
    members += [r for r in results if _ident(r) in tab.pooled and settings_key(r) == key]
    runs = {job: tgs for r in members for job, tgs in (r.runs or ((r.job_id, r.tgs or 0.0),))}
    return sorted(runs.items(), key=lambda run: (len(run[0]), run[0]))


def baseline_spread(results: Sequence[JobResult], config_tag: str) -> stats.Noise | None:
    """The spread of the tag's baseline runs with its disagreeing evidence runs (`Table.witnesses`)
    when wider than the pooled noise: the baseline side of every Δ carries it; None otherwise."""
    tab = table(results, config_tag)
    if not tab.witnesses or not tab.baseline:
        return None
    spread = stats.pooled_noise([[*tab.baseline, *tab.witnesses]])
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
