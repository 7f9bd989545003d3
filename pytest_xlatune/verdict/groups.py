"""Groups of identical settings (pure): what a run effectively ran (`settings_key`), the tag's
groups of runs and their noise, the unstable groups, the profiled runs that join a group, and
each side's own step floor (`Table`, built once per results list). verdicts.py judges by it."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..results import JobResult, RunKind
from . import stats
from .one_run import (
    POOLED_MIN_STEPS,
    baseline_evidence,
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
    if not (result.xla_flags or result.env or result.overrides or result.unset_env) and result.kind not in (
        RunKind.BASELINE,
        RunKind.GATE_OLD_BASELINE,
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
    # The baseline's profiled evidence runs (one_run.baseline_evidence): its settings measured
    # again, agreeing or not, so its side of every Δ carries their spread with its repeats'
    # (counted only when they disagree, a lucky pair's agreement would stand unchecked).
    witnesses: tuple[float, ...] = ()
    # settings → the error of one run's mean that their runs' own steps show (step_error), and
    # the baseline repeats': no interval is narrower than that (stats.Spread.step_var)
    floors: Mapping[tuple[object, ...], float] = field(default_factory=dict)
    baseline_floor: float = 0.0
    # settings whose win their profiled re-run contradicts (`_contradicted`): unstable, as the
    # adaptive planner flags them (adaptive.judge._join_profiled), never better, never the recipe
    contradicted: frozenset[tuple[object, ...]] = frozenset()


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
    plain_floors = {settings_key(g[0]): step_error(g) for g in found}
    joined = _joining_evidence(results, config_tag, plain, stats.pooled_noise(list(plain.values())), plain_floors)
    contradicted = _contradicted(results, config_tag, plain, {ident(r) for r in joined})
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
    baseline_floor = step_error([r for g in found for r in g if r.kind is RunKind.BASELINE])
    return Table(
        noise,
        groups,
        baseline,
        unstable,
        frozenset(ident(r) for r in joined),
        {settings_key(g[0]): partial[g[0].job_id] for g in found if len(g) == 1 and g[0].job_id in partial},
        frozenset(settings_key(g[0]) for g in found if len(g) == 1 and stopped_as_no_win(g[0])),
        baseline_evidence(results, config_tag),
        floors,
        baseline_floor,
        contradicted,
    )


def _joining_evidence(
    results: Sequence[JobResult],
    config_tag: str,
    plain: Mapping[tuple[object, ...], tuple[float, ...]],
    noise: stats.Noise,
    floors: Mapping[tuple[object, ...], float],
) -> list[JobResult]:
    """The winner's profiled re-runs that join their settings' group of plain runs: measured on
    POOLED_MIN_STEPS steady steps or more, and inside the plain runs' 99 % prediction interval
    (the plain runs' own step floor counted)."""
    return [
        r
        for r in results
        if r.tgs is not None
        and profiled_run_of(r, RunKind.WINNER_EVIDENCE, config_tag)
        and steady_steps(r) >= POOLED_MIN_STEPS
        and (group := plain.get(settings_key(r)))
        and not stats.outlier(r.tgs, group, noise, own_se=own_se(r), floor_se=floors[settings_key(r)])
    ]


def _contradicted(
    results: Sequence[JobResult],
    config_tag: str,
    plain: Mapping[tuple[object, ...], tuple[float, ...]],
    joined: set[tuple[str, str]],
) -> frozenset[tuple[object, ...]]:
    """Settings whose winner's profiled re-run (POOLED_MIN_STEPS steady steps or more) stayed out
    of their group, outside its prediction interval (`_joining_evidence`), and below half the
    plain runs' gain over the baseline: their runs disagree on the win itself (+12 % and −6 %),
    as verdicts.confirmation reads such a re-run."""
    base = baseline_values(results, config_tag)
    if not base:
        return frozenset()
    level = sum(base) / len(base)
    return frozenset(
        settings_key(r)
        for r in results
        if r.tgs is not None
        and profiled_run_of(r, RunKind.WINNER_EVIDENCE, config_tag)
        and steady_steps(r) >= POOLED_MIN_STEPS
        and ident(r) not in joined
        and (group := plain.get(settings_key(r)))
        and r.tgs - level < (sum(group) / len(group) - level) / 2
    )


def ident(result: JobResult) -> tuple[str, str]:
    """(key, job id): one stored run's identity."""
    return (result.key, result.job_id)
