"""Noise-aware judgements over stored results (pure): Δ% intervals, the numerics guard, the
recipe (simplest of the tied winners), power, and the regression and image gates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import numerics, stats
from .numerics import Mode, Numerics
from ..plan.expand import RunKind
from ..results import JobResult

if TYPE_CHECKING:
    from .lock import Lock


def baseline_values(results: Sequence[JobResult], config_tag: str) -> list[float]:
    """Steady TGS of every measured baseline-deployed repeat of a config tag."""
    return [r.tgs for r in results if r.kind == RunKind.BASELINE.value
            and r.config_tag == config_tag and r.measured and r.tgs is not None]


# Profiled runs measure other steps and carry the profiler's cost: never pooled with plain runs.
_UNPOOLED = (RunKind.EVIDENCE.value, RunKind.WINNER_EVIDENCE.value)


def settings_key(result: JobResult) -> tuple[object, ...]:
    """What a run effectively ran: XLA flags resolved last-wins, env, overrides, tag, image.
    A run that records no settings of its own but is not a baseline (e.g. a restore_default
    that only unsets env vars) is identical only to runs of its own name."""
    if not (result.xla_flags or result.env or result.overrides) and result.kind != RunKind.BASELINE.value:
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
        if r.config_tag == config_tag and r.measured and r.tgs is not None and r.kind not in _UNPOOLED:
            groups.setdefault(settings_key(r), []).append(r)
    return sorted(groups.values(), key=lambda g: all(r.kind != RunKind.BASELINE.value for r in g))


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
    references = [(r.job_id, r.loss_fields()) for r in results
                  if r.kind == RunKind.BASELINE.value and r.config_tag == result.config_tag
                  and r.image == result.image and r.losses and r.key != result.key]
    return numerics.guard(result.loss_fields(), references, numerics.widened(tolerance, references))


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


@dataclass(frozen=True)
class ImageGate:
    """What an image upgrade broke for one locked recipe (empty: passed), or that it is too
    close to call yet (`ambiguous`: measure the recipe and the baseline again)."""

    problems: tuple[str, ...]
    ambiguous: bool
    warnings: tuple[str, ...] = ()  # numerics changed under --xlatune-numerics=warn


def image_gate(recipe_runs: Sequence[JobResult], baseline_runs: Sequence[JobResult], lock: Lock,
               tolerance_pct: float, final: bool, mode: Mode = Mode.FAIL) -> ImageGate:
    """Judge a locked recipe on a new image, with all its runs and the new baseline's runs.

    The recipe must still beat or match the new image's baseline, and neither the recipe nor the
    baseline may regress beyond the tolerance vs the lock, with confidence. Until `final`, a
    likely regression whose interval still reaches inside the tolerance makes the outcome
    ambiguous (confirm it with more runs) instead of failing. The numerics guard holds the
    recipe's loss trajectory to the new baseline's: a departure is a problem (a warning in
    WARN mode), whatever the speed.
    """
    recipe = [r.tgs for r in recipe_runs if r.measured and r.tgs is not None]
    baseline = [r.tgs for r in baseline_runs if r.measured and r.tgs is not None]
    tag = recipe_runs[0].config_tag if recipe_runs else ""
    locked = lock.recipe(tag)
    if locked is None or not recipe or not baseline:
        return ImageGate((), False)
    tag_noise = stats.run_noise(baseline)
    recipe_ids = " ".join(r.job_id for r in recipe_runs)
    base_ids = " ".join(r.job_id for r in baseline_runs)
    problems, ambiguous, warnings = [], False, []
    references = [(r.job_id, r.loss_fields()) for r in baseline_runs if r.losses]
    tolerance = numerics.widened(numerics.DEFAULT_TOLERANCE, references)
    check = numerics.guard(recipe_runs[0].loss_fields(), references, tolerance)
    if check.verdict is Numerics.CHANGED:
        line = (f"recipe {locked.profile!r} [{tag}] changes numerics on the new image: "
                f"{check.where()}, job {recipe_runs[0].job_id} (tolerance {tolerance.text})")
        (warnings if mode is Mode.WARN else problems).append(line)
    vs_base = stats.compare(recipe, baseline, tag_noise)
    if vs_base.verdict is stats.Direction.WORSE:
        problems.append(_line(f"recipe {locked.profile!r} [{tag}] no longer beats or matches the "
                              "baseline on the new image", vs_base, 0.0,
                              f"{recipe_ids} vs {base_ids}"))
    checks = ((f"recipe {locked.profile!r} [{tag}] regressed vs the lock ({lock.date})",
               recipe, locked.tgs, recipe_ids),
              (f"baseline [{tag}] regressed vs the lock ({lock.date})",
               baseline, locked.baseline_tgs, base_ids))
    for what, values, reference, ids in checks:
        decision = _confirmed(values, reference, tag_noise, tolerance_pct, final)
        if decision is stats.Decision.FAIL:
            problems.append(_line(what, stats.compare(values, [reference], tag_noise),
                                  tolerance_pct, f"{ids} vs locked {reference:.1f}"))
        ambiguous |= decision is stats.Decision.AMBIGUOUS
    return ImageGate(tuple(problems), ambiguous and not problems, tuple(warnings))


def _confirmed(values: Sequence[float], reference: float, noise: stats.Noise,
               tolerance_pct: float, final: bool) -> stats.Decision:
    """A regression vs a locked figure: FAIL at once only when the whole interval is past the
    tolerance; a likely but unconfirmed one is AMBIGUOUS (measure again) until `final`. A gate
    that looks fine passes without extra jobs."""
    decision = stats.decide_after_remeasure(values, [reference], noise, tolerance_pct)
    if final or decision is stats.Decision.PASS:
        return decision
    clear = stats.regression_check(values, [reference], noise, tolerance_pct)
    return stats.Decision.FAIL if clear is stats.Decision.FAIL else stats.Decision.AMBIGUOUS


def _line(what: str, c: stats.Comparison, tolerance_pct: float, jobs: str) -> str:
    return (f"{what}: TGS {c.candidate_mean:.1f} vs {c.baseline_mean:.1f} ({c.delta_pct:+.2f} %, "
            f"95 % interval [{c.ci_low_pct:+.2f}, {c.ci_high_pct:+.2f}] %, tolerance "
            f"-{tolerance_pct:g} %), jobs {jobs}")


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
    chosen = min((r for r, _ in tied), key=lambda r: (settings_count(r), r.kind == RunKind.STACK.value,
                                                      -(r.tgs or 0.0)))
    return Choice(chosen, top, tuple(tied))


def recipe(results: Sequence[JobResult], config_tag: str, mode: Mode = Mode.FAIL) -> JobResult | None:
    """The run whose settings are the deployable recipe (see `choose`); None: no winner."""
    chosen = choose(results, config_tag, mode)
    return chosen.recipe if chosen else None
