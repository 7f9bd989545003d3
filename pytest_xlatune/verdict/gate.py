"""The image-upgrade gate (pure): a locked recipe and the baseline replayed on a new image, judged
against the same runs on the lock's image in the same session (never the lock's stored TGS alone)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..results import JobResult
from . import figures, numerics, stats
from .lock import Lock
from .numerics import Mode, Numerics
from .one_run import step_cv_pct


@dataclass(frozen=True)
class ImageGate:
    """What an image upgrade broke for one locked recipe (empty: passed), or that it is too
    close to call yet (`ambiguous`: measure the recipe and the baseline again)."""

    problems: tuple[str, ...]
    ambiguous: bool
    # Numerics changed under --xlatune-numerics=warn; a final check that passed a likely
    # regression because its 95 % interval includes no change (no regression the data show).
    warnings: tuple[str, ...] = ()


def image_gate(
    recipe_runs: Sequence[JobResult],
    baseline_runs: Sequence[JobResult],
    lock: Lock,
    tolerance_pct: float,
    final: bool,
    mode: Mode = Mode.FAIL,
    *,
    old_recipe_runs: Sequence[JobResult] = (),
    old_baseline_runs: Sequence[JobResult] = (),
) -> ImageGate:
    """Judge a locked recipe on a new image, with all its runs and the new baseline's runs, each
    against its control: the same run on the lock's (old) image in this session's time window.

    The recipe must still beat or match the new image's baseline, and neither the recipe nor the
    baseline may regress beyond the tolerance vs its old-image control, with confidence: a
    cluster that drifted since the lock moves both sides alike, so the lock's stored TGS is
    shown for context only. Until `final`, a likely regression whose interval still reaches
    inside the tolerance makes the outcome ambiguous (measure again) instead of failing. The
    numerics guard holds the recipe's loss trajectory to the new baseline's: a departure is a
    problem (a warning in WARN mode), whatever the speed.
    """
    recipe, baseline = _tgs(recipe_runs), _tgs(baseline_runs)
    old_recipe, old_baseline = _tgs(old_recipe_runs), _tgs(old_baseline_runs)
    tag = recipe_runs[0].config_tag if recipe_runs else ""
    locked = lock.recipe(tag)
    if locked is None or not recipe or not baseline:
        return ImageGate((), False)
    if not old_recipe or not old_baseline:  # never judged from the lock's stored TGS alone
        return ImageGate(
            (
                f"recipe {locked.profile!r} [{tag}]: no run on the lock's image "
                f"{lock.image or '(default)'} measured in this session to compare with",
            ),
            False,
        )
    # The repeats' spread, never below the error the runs' own steps show (a burst of load
    # inside two runs of one image is no regression, however well those two agree).
    runs = [*recipe_runs, *baseline_runs, *old_recipe_runs, *old_baseline_runs]
    tag_noise = stats.floored(stats.pooled_noise([baseline, old_baseline, recipe, old_recipe]), step_cv_pct(runs))
    recipe_ids = figures.jobs_text([r.job_id for r in recipe_runs])
    base_ids = figures.jobs_text([r.job_id for r in baseline_runs])
    problems: list[str] = []
    warnings: list[str] = []
    ambiguous = False
    references = [(r.job_id, r.loss_fields()) for r in baseline_runs if r.losses]
    tolerance = numerics.widened(numerics.DEFAULT_TOLERANCE, references)
    check = numerics.guard(recipe_runs[0].loss_fields(), references, tolerance)
    if check.verdict is Numerics.CHANGED:
        line = (
            f"recipe {locked.profile!r} [{tag}] changes numerics on the new image: "
            f"{check.where()}, job {recipe_runs[0].job_id} (tolerance {tolerance.text})"
        )
        (warnings if mode is Mode.WARN else problems).append(line)
    vs_base = stats.compare(recipe, baseline, tag_noise)
    if vs_base.verdict is stats.Direction.WORSE and not (final or _repeated(recipe, baseline)):
        ambiguous = True  # one run each: measured again before it can fail (see _confirmed)
    elif vs_base.verdict is stats.Direction.WORSE:
        problems.append(
            _line(
                f"recipe {locked.profile!r} [{tag}] no longer beats or matches the baseline on the new image",
                vs_base,
                0.0,
                f"{recipe_ids} vs {base_ids}",
            )
        )
    old = f"the lock's image {lock.image or '(default)'}"
    checks = (
        (
            f"recipe {locked.profile!r} [{tag}] regressed vs the lock ({lock.date})",
            recipe,
            old_recipe,
            recipe_ids,
            old_recipe_runs,
            locked.tgs,
        ),
        (
            f"baseline [{tag}] regressed vs the lock ({lock.date})",
            baseline,
            old_baseline,
            base_ids,
            old_baseline_runs,
            locked.baseline_tgs,
        ),
    )
    for what, values, controls, ids, control_runs, stored in checks:
        decision, odds = _confirmed(values, controls, tag_noise, tolerance_pct, final)
        control_ids = figures.jobs_text([r.job_id for r in control_runs])
        jobs = f"{ids} vs {control_ids} on {old} in this session (locked {stored:.1f}, for context)"
        c = stats.compare(values, controls, tag_noise)
        if decision is stats.GateDecision.FAIL:
            problems.append(_line(what, c, tolerance_pct, jobs) + figures.odds_text(c, odds))
        elif odds is not None and odds >= stats.DEFAULT_FAIL_PROBABILITY:  # passed: no change is inside
            warnings.append(
                _line(what.replace(" regressed vs ", " vs ", 1), c, tolerance_pct, jobs)
                + f"; passed: {odds * 100:.0f} % odds that it regresses beyond the tolerance after {c.n_candidate}"
                " run(s), yet its 95 % interval includes no change (no regression the data show)"
            )
        ambiguous |= decision is stats.GateDecision.AMBIGUOUS
    return ImageGate(tuple(problems), ambiguous and not problems, tuple(warnings))


def _tgs(runs: Sequence[JobResult]) -> list[float]:
    return [r.tgs for r in runs if r.measured and r.tgs is not None]


def _confirmed(
    values: Sequence[float], controls: Sequence[float], noise: stats.Noise, tolerance_pct: float, final: bool
) -> tuple[stats.GateDecision, float | None]:
    """A regression vs the same-window controls: FAIL before `final` only when the whole interval
    is past the tolerance and both sides were measured at least twice; a likely but unconfirmed
    one is AMBIGUOUS (measure again). One run against one control says nothing about the noise
    (no identical-settings repeat tests the prior), and a burst of load on the cluster during
    one of them would read as a regression: that pair is measured again first. A gate that
    looks fine (its point estimate inside the tolerance) passes without extra jobs; one whose
    point estimate is past it is measured again even when the noise is too large to fail it
    (a -53 % recipe on a loaded machine passed on its first pair). When `final`, the odds decide
    what the interval left open (`stats.decide_final`, returned with the decision), yet never FAIL
    runs whose interval includes no change."""
    if final:
        return stats.decide_final(values, controls, noise, tolerance_pct)
    decision = stats.decide_after_remeasure(values, controls, noise, tolerance_pct)
    if decision is stats.GateDecision.PASS and (
        stats.regression_check(values, controls, noise, tolerance_pct) is stats.GateDecision.PASS
        or stats.regression_probability(values, controls, noise, tolerance_pct) < 0.5
    ):
        return decision, None  # it looks fine: its point estimate is inside the tolerance
    clear = stats.regression_check(values, controls, noise, tolerance_pct)
    if clear is stats.GateDecision.FAIL and _repeated(values, controls):
        return stats.GateDecision.FAIL, None
    return stats.GateDecision.AMBIGUOUS, None


def _repeated(values: Sequence[float], controls: Sequence[float]) -> bool:
    """Both sides measured at least twice: the pair's disagreement was seen again."""
    return len(values) >= 2 and len(controls) >= 2


def _line(what: str, c: stats.Comparison, tolerance_pct: float, jobs: str) -> str:
    return (
        f"{what}: TGS {c.candidate_mean:.1f} vs {c.baseline_mean:.1f} ({c.delta_pct:+.2f} %, "
        f"95 % interval [{c.ci_low_pct:+.2f}, {c.ci_high_pct:+.2f}] %, tolerance "
        f"-{tolerance_pct:g} %), {jobs}"
    )
