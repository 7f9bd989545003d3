"""Which settings win (pure): the winners beyond the noise, the deployable recipe (the simplest
of the tied winners) and the cross-config regression check of a recipe (wave 6); the noise,
groups and comparisons they read are verdicts'."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..results import JobResult, RunKind
from . import figures, stats
from .numerics import Mode
from .verdicts import baseline_values, compare_result, group_of, noise, numerics_changed, settings_key, table


@dataclass(frozen=True)
class CrossConfigGate:
    """The outcome of a cross-config regression check after any re-measurements."""

    decision: stats.GateDecision
    comparison: stats.Comparison
    tolerance_pct: float
    # The odds that the regression is past the tolerance, when a final check decided on them
    # (its 95 % interval reached across the tolerance line); None when the interval decided.
    odds: float | None = None

    def message(self, name: str, config_tag: str, job_ids: Sequence[str], recipe: bool = True) -> str:
        """The failure line; `recipe` False: `name` is the best profile, re-run without a recipe."""
        c = self.comparison
        who = f"recipe {name!r}" if recipe else f"the best profile {name!r} (no recipe)"
        line = (
            f"{who} regresses config tag {config_tag!r}: TGS {c.candidate_mean:.1f}"
            f" vs baseline {c.baseline_mean:.1f} ({c.delta_pct:+.2f} %, 95 % interval "
            f"[{c.ci_low_pct:+.2f}, {c.ci_high_pct:+.2f}] %, tolerance -{self.tolerance_pct:g} %),"
            f" {figures.jobs_text(job_ids)}"
        )
        return line + figures.odds_text(c, self.odds)

    def passed_on_the_interval(self, name: str, config_tag: str, job_ids: Sequence[str]) -> str:
        """Why a final check passed although its odds of a regression said otherwise ("" when
        they did not): its 95 % interval includes no change (as the image gate's warning)."""
        c = self.comparison
        if (
            self.decision is not stats.GateDecision.PASS
            or self.odds is None
            or self.odds < stats.DEFAULT_FAIL_PROBABILITY
        ):
            return ""
        return (
            f"{name!r} on config tag {config_tag!r}: TGS {c.candidate_mean:.1f} vs baseline {c.baseline_mean:.1f}"
            f" ({c.delta_pct:+.2f} %, 95 % interval [{c.ci_low_pct:+.2f}, {c.ci_high_pct:+.2f}] %, tolerance"
            f" -{self.tolerance_pct:g} %), {figures.jobs_text(job_ids)}; passed: {self.odds * 100:.0f} % odds that it"
            f" regresses beyond the tolerance after {c.n_candidate} run(s), yet its 95 % interval includes no"
            " change (no regression the data show)"
        )


def regression_gate(
    candidate: Sequence[float], results: Sequence[JobResult], config_tag: str, tolerance_pct: float, final: bool
) -> CrossConfigGate | None:
    """PASS/FAIL/AMBIGUOUS for candidate runs of a recipe on a tag; `final` decides ambiguity,
    on the odds, yet never FAILs runs whose interval includes no change (their figure reads
    `within noise` wherever it is shown: no regression the data supports)."""
    baseline = baseline_values(results, config_tag)
    if not candidate or not baseline:
        return None
    tag_noise = noise(results, config_tag)
    comparison = stats.compare(candidate, baseline, tag_noise)
    if not final:
        return CrossConfigGate(
            stats.regression_check(candidate, baseline, tag_noise, tolerance_pct), comparison, tolerance_pct
        )
    decision, odds = stats.decide_final(candidate, baseline, tag_noise, tolerance_pct)
    return CrossConfigGate(decision, comparison, tolerance_pct, odds)


def winners(
    results: Sequence[JobResult],
    config_tag: str,
    up_to_wave: int,
    kinds: tuple[RunKind, ...] = (RunKind.PROFILE,),
    mode: Mode = Mode.FAIL,
) -> list[JobResult]:
    """Measured runs of waves 2..up_to_wave better than the baseline beyond noise, fastest first
    by the figure every output shows (the mean of every run of their settings), one per settings;
    a run whose loss left the baseline's (numerics changed) is none unless `mode` is WARN."""
    found: dict[tuple[object, ...], JobResult] = {}
    for r in results:
        if r.kind not in kinds or r.config_tag != config_tag or not r.measured or r.tgs is None:
            continue
        wave = r.wave.removeprefix("wave")
        if not wave.isdigit() or int(wave) > up_to_wave or settings_key(r) in found:
            continue
        comparison = compare_result(r, results)
        if (
            comparison is not None
            and comparison.verdict is stats.Direction.BETTER
            and (mode is Mode.WARN or not numerics_changed(r, results))
        ):
            found[settings_key(r)] = r
    return sorted(found.values(), key=lambda r: -mean_tgs(r, results))


def mean_tgs(result: JobResult, results: Sequence[JobResult]) -> float:
    """The figure of the result's settings: the mean steady TGS of every run of them."""
    return statistics.fmean(group_of(result, results))


def best_measured(
    results: Sequence[JobResult], config_tag: str, kinds: tuple[RunKind, ...] = (RunKind.PROFILE,)
) -> JobResult | None:
    """The highest-TGS measured run of these kinds on a config tag, winner or not."""
    candidates = [r for r in results if r.kind in kinds and r.config_tag == config_tag and r.measured]
    return max(candidates, key=lambda r: r.tgs or 0.0, default=None)


def settings_count(result: JobResult, results: Sequence[JobResult] = ()) -> int:
    """How many settings a recipe deploys: XLA flags, env vars, unset env vars and overrides —
    not the overrides every run of its config tag carries (its baseline runs' among `results`),
    as the adaptive planner counts a profile's own (adaptive.keys)."""
    tag = {o for r in results if r.kind is RunKind.BASELINE and r.config_tag == result.config_tag for o in r.overrides}
    own = [o for o in result.overrides if o not in tag]
    return len(result.xla_flags) + len(result.env) + len(result.unset_env) + len(own)


@dataclass(frozen=True)
class Choice:
    """The recipe and the winners it tied with (within the noise of the fastest)."""

    recipe: JobResult
    fastest: JobResult
    tied: tuple[tuple[JobResult, stats.Comparison], ...]  # every tied winner vs the fastest

    @property
    def simpler_than_fastest(self) -> bool:
        return self.recipe is not self.fastest


def choose(results: Sequence[JobResult], config_tag: str, mode: Mode = Mode.FAIL) -> Choice | None:
    """The deployable recipe: among the winners (profiles or stacks better than the baseline
    beyond noise) that the fastest one does not beat beyond noise, the one with the fewest
    settings, then the fastest — a stack therefore only when it beats every simpler winner.
    Every figure is of all the runs of a winner's settings (what every output shows)."""
    found = winners(results, config_tag, 4, kinds=(RunKind.PROFILE, RunKind.STACK), mode=mode)
    if not found:
        return None
    top, tag_noise = found[0], noise(results, config_tag)
    tied = []
    for r in found:
        vs_top = stats.compare(group_of(r, results), group_of(top, results), tag_noise)
        if vs_top.verdict is not stats.Direction.WORSE:
            tied.append((r, vs_top))
    chosen = min(
        (r for r, _ in tied),
        key=lambda r: (settings_count(r, results), r.kind is RunKind.STACK, -mean_tgs(r, results)),
    )
    return Choice(chosen, top, tuple(tied))


def recipe(results: Sequence[JobResult], config_tag: str, mode: Mode = Mode.FAIL) -> JobResult | None:
    """The run whose settings are the deployable recipe (see `choose`); None: no winner."""
    chosen = choose(results, config_tag, mode)
    return chosen.recipe if chosen else None


def contradicted(results: Sequence[JobResult], config_tag: str) -> JobResult | None:
    """The fastest profile or stack whose win its profiled re-run contradicts (unstable, so no
    recipe: verdicts.unstable), None when there is none: what a lock not written names."""
    keys = table(results, config_tag).contradicted
    found = [
        r
        for r in results
        if r.kind in (RunKind.PROFILE, RunKind.STACK)
        and r.config_tag == config_tag
        and r.measured
        and r.tgs is not None
        and settings_key(r) in keys
    ]
    return max(found, key=lambda r: mean_tgs(r, results), default=None)


def deployable(results: Sequence[JobResult], config_tag: str, mode: Mode = Mode.FAIL) -> JobResult | None:
    """What the report stars and the lock holds: the recipe (`recipe`); without one, the fastest
    pipeline shape (wave 5) better than the baseline beyond noise, whose microbatch / virtual-stage
    overrides deploy as they are. Wave 6 and the stacks read `recipe`: a shape runs on the primary
    config tag alone, without the profiles' flags."""
    found = recipe(results, config_tag, mode)
    if found is not None:
        return found
    shapes = winners(results, config_tag, 5, kinds=(RunKind.PIPELINE_SHAPE,), mode=mode)
    return shapes[0] if shapes else None
