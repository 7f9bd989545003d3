"""The image-upgrade gate (pure): a locked recipe and the baseline replayed on a new image."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import numerics, stats
from .lock import Lock
from .numerics import Mode, Numerics
from ..results import JobResult


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
