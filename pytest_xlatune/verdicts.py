"""Noise-aware judgements over stored results (pure): Δ% intervals and the regression gate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import stats
from .plan import RunKind
from .results import JobResult

if TYPE_CHECKING:
    from .lock import Lock


def baseline_values(results: Sequence[JobResult], config_tag: str) -> list[float]:
    """Steady TGS of every measured baseline-deployed repeat of a config tag."""
    return [r.tgs for r in results if r.kind == RunKind.BASELINE.value
            and r.config_tag == config_tag and r.measured and r.tgs is not None]


def noise(results: Sequence[JobResult], config_tag: str) -> stats.Noise:
    """Run-to-run noise of a config tag (pooled with the prior; see stats)."""
    values = baseline_values(results, config_tag)
    return stats.run_noise(values) if values else stats.run_noise([1.0])


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


def image_gate(recipe_runs: Sequence[JobResult], baseline_runs: Sequence[JobResult], lock: Lock,
               tolerance_pct: float, final: bool) -> ImageGate:
    """Judge a locked recipe on a new image, with all its runs and the new baseline's runs.

    The recipe must still beat or match the new image's baseline, and neither the recipe nor the
    baseline may regress beyond the tolerance vs the lock, with confidence. Until `final`, a
    likely regression whose interval still reaches inside the tolerance makes the outcome
    ambiguous (confirm it with more runs) instead of failing.
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
    problems, ambiguous = [], False
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
    return ImageGate(tuple(problems), ambiguous and not problems)


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
            kinds: tuple[RunKind, ...] = (RunKind.PROFILE,)) -> list[JobResult]:
    """Measured runs of waves 2..up_to_wave better than the baseline beyond noise, fastest first."""
    wanted = {k.value for k in kinds}
    found = []
    for r in results:
        if r.kind not in wanted or r.config_tag != config_tag or not r.measured or r.tgs is None:
            continue
        wave = r.wave.removeprefix("wave")
        if not wave.isdigit() or int(wave) > up_to_wave:
            continue
        comparison = compare([r.tgs], results, config_tag)
        if comparison is not None and comparison.verdict is stats.Direction.BETTER:
            found.append(r)
    return sorted(found, key=lambda r: -(r.tgs or 0.0))


def best_measured(results: Sequence[JobResult], config_tag: str,
                  kinds: tuple[RunKind, ...] = (RunKind.PROFILE,)) -> JobResult | None:
    """The highest-TGS measured run of these kinds on a config tag, winner or not."""
    wanted = {k.value for k in kinds}
    candidates = [r for r in results if r.kind in wanted and r.config_tag == config_tag and r.measured]
    return max(candidates, key=lambda r: r.tgs or 0.0, default=None)


def recipe(results: Sequence[JobResult], config_tag: str) -> JobResult | None:
    """The run whose settings are the deployable recipe: the fastest profile or stack better
    than the baseline beyond noise — but a stack only when it also beats the best single
    winner beyond noise (otherwise the simpler recipe, as the skill prefers); None: no winner."""
    found = winners(results, config_tag, 4, kinds=(RunKind.PROFILE, RunKind.STACK))
    if not found:
        return None
    single = next((r for r in found if r.kind == RunKind.PROFILE.value), None)
    top = found[0]
    if top.kind == RunKind.STACK.value and single is not None and top.tgs and single.tgs:
        vs_single = stats.compare([top.tgs], [single.tgs], noise(results, config_tag))
        if vs_single.verdict is not stats.Direction.BETTER:
            return single
    return top
