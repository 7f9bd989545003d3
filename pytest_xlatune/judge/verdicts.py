"""Noise-aware judgements over stored results (pure): Δ% intervals, the numerics guard, the
recipe (simplest of the tied winners), power, and the regression gate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from . import numerics, stats
from .numerics import Mode, Numerics
from ..results import JobResult, RunKind


def baseline_values(results: Sequence[JobResult], config_tag: str) -> list[float]:
    """Steady TGS of every measured baseline-deployed repeat of a config tag."""
    return [r.tgs for r in results if r.kind is RunKind.BASELINE
            and r.config_tag == config_tag and r.measured and r.tgs is not None]


# Profiled runs measure other steps and carry the profiler's cost: never pooled with plain runs.
_UNPOOLED = (RunKind.EVIDENCE, RunKind.WINNER_EVIDENCE)


def settings_key(result: JobResult) -> tuple[object, ...]:
    """What a run effectively ran: XLA flags resolved last-wins, env, overrides, tag, image.
    A run that records no settings of its own but is not a baseline (e.g. a restore_default
    that only unsets env vars) is identical only to runs of its own name."""
    if not (result.xla_flags or result.env or result.overrides) and result.kind is not RunKind.BASELINE:
        return (result.config_tag, result.image, result.kind, result.profile)
    flags: dict[str, str] = {}
    for flag in result.xla_flags:
        name, _, value = flag.partition("=")
        flags[name] = value
    return (result.config_tag, result.image, tuple(sorted(flags.items())),
            tuple(sorted(result.env)), tuple(sorted(result.overrides)))


def identical_groups(results: Sequence[JobResult], config_tag: str) -> list[list[JobResult]]:
    """Measured runs of a tag grouped by identical effective settings (repeats, duplicates,
    controls, re-measurements), the baseline's group first."""
    groups: dict[tuple[object, ...], list[JobResult]] = {}
    for r in results:
        # A shared duplicate's record is its source's job again: no second measurement.
        if r.config_tag == config_tag and r.measured and r.tgs is not None and r.kind not in _UNPOOLED \
                and not r.shared_from:
            groups.setdefault(settings_key(r), []).append(r)
    return sorted(groups.values(), key=lambda g: all(r.kind is not RunKind.BASELINE for r in g))


def noise(results: Sequence[JobResult], config_tag: str) -> stats.Noise:
    """Run-to-run noise of a config tag from every group of identical-settings runs (see stats:
    pooled with the prior unless they contradict it)."""
    groups = [[r.tgs or 0.0 for r in g] for g in identical_groups(results, config_tag)]
    return stats.pooled_noise(groups)


@dataclass(frozen=True)
class Disagreement:
    """Identical-settings runs whose spread is beyond the 0.8 % noise prior."""

    runs: tuple[JobResult, ...]
    spread_pct: float  # (max − min) / mean

    def text(self) -> str:
        values = ", ".join(f"{r.tgs:.1f} (job {r.job_id})" for r in self.runs)
        return f"{' = '.join(sorted({r.profile for r in self.runs}))}: {values}, spread {self.spread_pct:.1f} %"


def disagreements(results: Sequence[JobResult], config_tag: str) -> list[Disagreement]:
    """Groups of identical-settings runs that disagree beyond the prior noise model."""
    found = []
    for group in identical_groups(results, config_tag):
        if len(group) < 2:
            continue
        one = stats.run_noise([r.tgs or 0.0 for r in group])
        if one.prior_rejected:
            values = [r.tgs or 0.0 for r in group]
            found.append(Disagreement(tuple(group), (max(values) - min(values)) / (sum(values) / len(values)) * 100))
    return found


def detectable_effect(results: Sequence[JobResult], config_tag: str, m: int = 1) -> float | None:
    """The smallest Δ% m runs of a profile would show as *better* (80 % power), at this tag's
    noise and baseline repeats; None without a baseline."""
    k = len(baseline_values(results, config_tag))
    return stats.detectable_effect(noise(results, config_tag), m, k) if k else None


def numerics_check(result: JobResult, results: Sequence[JobResult],
                   tolerance: numerics.Tolerance = numerics.DEFAULT_TOLERANCE) -> numerics.Check:
    """The run's loss trajectory against every baseline-deployed repeat of its tag and image."""
    return trajectory_check(result.loss_fields(), result.config_tag, result.image, results,
                            result.key, tolerance)


def trajectory_check(losses: Mapping[str, numerics.Trajectory], config_tag: str, image: str,
                     results: Sequence[JobResult], key: str = "",
                     tolerance: numerics.Tolerance = numerics.DEFAULT_TOLERANCE) -> numerics.Check:
    """Loss trajectories (a finished run's, or a running job's so far) against every stored
    baseline-deployed repeat of `config_tag` and `image` other than run `key`."""
    references = [(r.job_id, r.loss_fields()) for r in results
                  if r.kind is RunKind.BASELINE and r.config_tag == config_tag
                  and r.image == image and r.losses and r.key != key]
    return numerics.guard(losses, references, numerics.widened(tolerance, references))


def numerics_changed(result: JobResult, results: Sequence[JobResult]) -> bool:
    return numerics_check(result, results).verdict is Numerics.CHANGED


def compare(candidate: Sequence[float], results: Sequence[JobResult],
            config_tag: str) -> stats.Comparison | None:
    """Δ% of candidate runs vs the tag's baseline, with its interval; None without a baseline."""
    baseline = baseline_values(results, config_tag)
    if not candidate or not baseline:
        return None
    return stats.compare(candidate, baseline, noise(results, config_tag))


@dataclass(frozen=True)
class Gate:
    """The outcome of a cross-config regression check after any re-measurements."""

    decision: stats.Decision
    comparison: stats.Comparison
    tolerance_pct: float

    def message(self, recipe: str, config_tag: str, job_ids: Sequence[str]) -> str:
        c = self.comparison
        return (f"recipe {recipe!r} regresses config tag {config_tag!r}: TGS {c.candidate_mean:.1f}"
                f" vs baseline {c.baseline_mean:.1f} ({c.delta_pct:+.2f} %, 95 % interval "
                f"[{c.ci_low_pct:+.2f}, {c.ci_high_pct:+.2f}] %, tolerance -{self.tolerance_pct:g} %),"
                f" jobs {' '.join(job_ids)}")


def regression_gate(candidate: Sequence[float], results: Sequence[JobResult], config_tag: str,
                    tolerance_pct: float, final: bool) -> Gate | None:
    """PASS/FAIL/AMBIGUOUS for candidate runs of a recipe on a tag; `final` decides ambiguity."""
    baseline = baseline_values(results, config_tag)
    if not candidate or not baseline:
        return None
    tag_noise = noise(results, config_tag)
    check = stats.decide_after_remeasure if final else stats.regression_check
    decision = check(candidate, baseline, tag_noise, tolerance_pct)
    return Gate(decision, stats.compare(candidate, baseline, tag_noise), tolerance_pct)


def winners(results: Sequence[JobResult], config_tag: str, up_to_wave: int,
            kinds: tuple[RunKind, ...] = (RunKind.PROFILE,),
            mode: Mode = Mode.FAIL) -> list[JobResult]:
    """Measured runs of waves 2..up_to_wave better than the baseline beyond noise, fastest first;
    a run whose loss left the baseline's (numerics changed) is none unless `mode` is WARN."""
    wanted = {k.value for k in kinds}
    found = []
    for r in results:
        if r.kind not in wanted or r.config_tag != config_tag or not r.measured or r.tgs is None:
            continue
        wave = r.wave.removeprefix("wave")
        if not wave.isdigit() or int(wave) > up_to_wave:
            continue
        comparison = compare([r.tgs], results, config_tag)
        if comparison is not None and comparison.verdict is stats.Direction.BETTER and (
                mode is Mode.WARN or not numerics_changed(r, results)):
            found.append(r)
    return sorted(found, key=lambda r: -(r.tgs or 0.0))


def best_measured(results: Sequence[JobResult], config_tag: str,
                  kinds: tuple[RunKind, ...] = (RunKind.PROFILE,)) -> JobResult | None:
    """The highest-TGS measured run of these kinds on a config tag, winner or not."""
    wanted = {k.value for k in kinds}
    candidates = [r for r in results if r.kind in wanted and r.config_tag == config_tag and r.measured]
    return max(candidates, key=lambda r: r.tgs or 0.0, default=None)


def settings_count(result: JobResult) -> int:
    """How many settings a recipe deploys: XLA flags, env vars and overrides."""
    return len(result.xla_flags) + len(result.env) + len(result.overrides)


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
    settings, then the fastest — a stack therefore only when it beats every simpler winner."""
    found = winners(results, config_tag, 4, kinds=(RunKind.PROFILE, RunKind.STACK), mode=mode)
    if not found:
        return None
    top, tag_noise = found[0], noise(results, config_tag)
    tied = []
    for r in found:
        vs_top = stats.compare([r.tgs or 0.0], [top.tgs or 0.0], tag_noise)
        if vs_top.verdict is not stats.Direction.WORSE:
            tied.append((r, vs_top))
    chosen = min((r for r, _ in tied), key=lambda r: (settings_count(r), r.kind is RunKind.STACK,
                                                      -(r.tgs or 0.0)))
    return Choice(chosen, top, tuple(tied))


def recipe(results: Sequence[JobResult], config_tag: str, mode: Mode = Mode.FAIL) -> JobResult | None:
    """The run whose settings are the deployable recipe (see `choose`); None: no winner."""
    chosen = choose(results, config_tag, mode)
    return chosen.recipe if chosen else None
