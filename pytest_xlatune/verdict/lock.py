"""The recipe lock: what a finished sweep found, committed next to the cell, replayed by the gate.

`<cell>.lock.json` holds, per config tag, the winning recipe (flags, env, overrides), its TGS
and 95 % interval, the baseline it beat, the image, the nodelist and the date. A gate run
(`--xlatune-gate --xlatune-image NEW`) re-runs only the baselines and the locked recipes, each
after the same run on the lock's image (its same-window control).
The lock changes only when a whole sweep ran in the session and found a recipe other than the
one on file (`lock_change`): never from a `-k`/`--lf` subset, a stopped session or an empty store.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..cell import grammar
from ..cell.values import Cell
from ..results import JobResult, RunKind
from . import choice, figures, verdicts
from .lock_read import LockError as LockError
from .lock_read import Reader, read_json
from .numerics import Mode

LOCK_SCHEMA = 1
JOB_ID = grammar.Grammar("a job id", r"[A-Za-z0-9_.:+-]+", max_len=64)


@dataclass(frozen=True)
class LockedRecipe:
    config_tag: str
    profile: str
    xla_flags: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    overrides: tuple[tuple[str, str], ...]
    tgs: float
    ci_low_pct: float
    ci_high_pct: float
    baseline_tgs: float
    delta_pct: float
    job_ids: tuple[str, ...]
    # Env-file variables the recipe unsets (a restore_default recipe, where the image leaves
    # them unset): the gate unsets them too. () in a lock written before it was kept.
    unset_env: tuple[str, ...] = ()


@dataclass(frozen=True)
class Lock:
    model_tag: str
    parallelism: str
    image: str
    nodelist: str
    date: str
    recipes: tuple[LockedRecipe, ...]
    # What the sweep measured on: the interpreter and JAX version (local backend), the container
    # image (maxtext-slurm); "" when the backend does not say (a lock written before it was kept).
    measured_on: str = ""

    def recipe(self, config_tag: str) -> LockedRecipe | None:
        return next((r for r in self.recipes if r.config_tag == config_tag), None)


def build_lock(
    cell: Cell,
    results: list[JobResult],
    nodelist: str,
    image: str,
    today: dt.date | None = None,
    mode: Mode = Mode.FAIL,
    measured_on: str = "",
    require_control: bool = True,
) -> Lock | None:
    """The recipe of the primary tag (better beyond noise, the simplest of the tied winners,
    never one whose loss left the baseline's unless `mode` is WARN), and its re-run on each
    other tag that it did not regress; None when nothing beat the baseline. `require_control`:
    only a win a control brackets (verdicts.unbracketed; the gate repair's proposal, which the
    next gate run measures against its own controls, goes without)."""
    measured = [r for r in results if r.measured and r.tgs is not None]
    best = choice.deployable(measured, cell.primary_config.name, mode)  # a profile, a stack or a shape
    if best is None or verdicts.confirmation(best, measured, require_control):
        return None  # no win, or one no second run agrees with (or no control brackets): never locked
    # A stack's overrides are those of the profiles it combined; a pipeline shape's, its own.
    sources = best.resolved_from.split("+") if best.kind is RunKind.STACK else [best.profile]
    profile_overrides = tuple(o for name in sources if (p := cell.profile(name)) for o in p.overrides)
    shape = best.kind is RunKind.PIPELINE_SHAPE
    if shape:
        base = [r for r in measured if r.kind is RunKind.BASELINE and r.config_tag == best.config_tag]
        profile_overrides = tuple(o for o in best.overrides if not any(o in r.overrides for r in base))
    recipes = []
    # Wave 6 re-ran the profile recipe (or the best profile), never a shape: not this recipe's runs.
    candidates = [best] + ([] if shape else [r for r in measured if r.kind is RunKind.CROSS_CONFIG])
    for run in candidates:
        # The figure every output shows: the mean of the runs of these settings (figures.py).
        fig = figures.figure(run, measured)
        cmp = fig.comparison if fig else None
        if fig is None or cmp is None or (run is best and cmp.verdict.value != "better"):
            continue
        if run is not best and cmp.delta_pct < -cell.thresholds.regression_pct:
            continue  # the recipe regresses this tag: the deployment must be tag-conditional
        recipes.append(
            LockedRecipe(
                config_tag=run.config_tag,
                profile=best.profile,
                xla_flags=best.xla_flags,
                env=best.env,
                overrides=profile_overrides,
                tgs=fig.tgs,
                ci_low_pct=cmp.ci_low_pct,
                ci_high_pct=cmp.ci_high_pct,
                baseline_tgs=cmp.baseline_mean,
                delta_pct=cmp.delta_pct,
                job_ids=fig.job_ids,
                unset_env=best.unset_env,
            )
        )
    if not recipes:
        return None
    return Lock(
        model_tag=cell.model_tag,
        parallelism=cell.parallelism.text,
        image=image,
        nodelist=nodelist,
        date=(today or dt.date.today()).isoformat(),
        recipes=tuple(recipes),
        measured_on=measured_on,
    )


def unconfirmed(cell: Cell, results: list[JobResult], mode: Mode = Mode.FAIL) -> str:
    """Why the primary tag's recipe is not locked although it beat the baseline, or although its
    plain runs did and its re-run contradicts them ("" otherwise)."""
    measured = [r for r in results if r.measured and r.tgs is not None]
    best = choice.deployable(measured, cell.primary_config.name, mode)
    # no recipe because the fastest win's re-run contradicts it: that is why there is no lock
    best = best or choice.contradicted(measured, cell.primary_config.name)
    return verdicts.confirmation(best, measured) if best is not None else ""


def lock_change(
    existing: Lock | None, built: Lock | None, not_run: list[str], stopped: bool = False, why_not: str = ""
) -> tuple[bool, str]:
    """Whether this session's sweep rewrites the lock, and why (one phrase for the terminal);
    `not_run` names the items of the cell that did not run in the session, `stopped` says a
    STOP ended the cell's sweep (also in its last item, when every item ran), `why_not` why a
    win was not confirmed (`unconfirmed`)."""
    if stopped:
        return False, "the session stopped (xlatune STOP above); the lock changes only after a whole sweep"
    if not_run:
        shown = ", ".join(not_run[:3]) + (f" and {len(not_run) - 3} more" if len(not_run) > 3 else "")
        return False, (
            f"{len(not_run)} item(s) of the cell did not run in this session ({shown}); "
            "the lock changes only after a whole sweep"
        )
    if built is None and why_not:
        return False, (
            f"no lock: the win is not confirmed: {why_not}"
            + ("; the lock on file is kept" if existing is not None else "")
        )
    if built is None:
        return False, (
            "the sweep found no recipe better than baseline-deployed beyond the noise"
            + ("; the lock on file is kept" if existing is not None else "")
        )
    if existing is not None and _same(existing, built):
        return False, f"the sweep found the recipe on file ({_recipes(built)})"
    if existing is not None and _same(existing, replace(built, measured_on=existing.measured_on)):
        return True, f"the recipe on file ({_recipes(built)}), now measured on {built.measured_on}"
    if existing is None:
        return True, f"new lock: {_recipes(built)}"
    return True, f"recipe changed: {_recipes(existing)} → {_recipes(built)}"


def _same(a: Lock, b: Lock) -> bool:
    """Equal but for the date (a rerun reusing every stored result measures nothing new) and the
    order of each recipe's job ids (older locks stored them in pooling order: `3, 20, 5`)."""
    return (a.model_tag, a.parallelism, a.image, a.nodelist, _in_job_order(a), a.measured_on) == (
        b.model_tag,
        b.parallelism,
        b.image,
        b.nodelist,
        _in_job_order(b),
        b.measured_on,
    )


def _in_job_order(lock: Lock) -> tuple[LockedRecipe, ...]:
    return tuple(replace(r, job_ids=figures.in_job_order(r.job_ids)) for r in lock.recipes)


def _recipes(lock: Lock) -> str:
    return "; ".join(
        f"{r.profile} [{r.config_tag}] {r.delta_pct:+.2f} % ({figures.jobs_text(r.job_ids)})" for r in lock.recipes
    )


def dumps(lock: Lock) -> str:
    return json.dumps({"schema": LOCK_SCHEMA, **asdict(lock)}, indent=2, sort_keys=True) + "\n"


def load_lock(path: Path) -> Lock:
    """Read a lock file; every problem is one LockError line naming the key (lock_read)."""
    data = read_json(path, LOCK_SCHEMA)
    r = Reader(path)
    recipes = r.field(data, "recipes", "", r.items)
    return Lock(
        model_tag=r.field(data, "model_tag", "", lambda v, k: r.checked(v, k, grammar.MODEL_TAG)),
        parallelism=r.field(data, "parallelism", "", r.parallelism),
        image=r.field(data, "image", "", lambda v, k: r.optional(v, k, grammar.CONTAINER_IMAGE)),
        nodelist=r.field(data, "nodelist", "", r.nodelist),
        date=r.field(data, "date", "", r.date),
        recipes=tuple(_recipe(r, item, f"recipes[{i}]") for i, item in enumerate(recipes)),
        measured_on=r.field(data, "measured_on", "", r.text, default=""),
    )


def _recipe(r: Reader, item: object, at: str) -> LockedRecipe:
    """One recipe; its strings held to the cell grammars (a lock is replayed on the cluster)."""
    item = r.mapping(item, at)
    return LockedRecipe(
        config_tag=r.field(item, "config_tag", at, lambda v, k: r.checked(v, k, grammar.NAME)),
        profile=r.field(item, "profile", at, lambda v, k: r.checked(v, k, grammar.NAME)),
        xla_flags=r.field(item, "xla_flags", at, lambda v, k: r.texts(v, k, grammar.XLA_FLAG)),
        env=r.field(item, "env", at, lambda v, k: r.pairs(v, k, grammar.ENV_NAME, grammar.ENV_VALUE)),
        overrides=r.field(
            item, "overrides", at, lambda v, k: r.pairs(v, k, grammar.OVERRIDE_KEY, grammar.OVERRIDE_VALUE)
        ),
        tgs=r.field(item, "tgs", at, r.tgs),
        ci_low_pct=r.field(item, "ci_low_pct", at, r.pct),
        ci_high_pct=r.field(item, "ci_high_pct", at, r.pct),
        baseline_tgs=r.field(item, "baseline_tgs", at, r.tgs),
        delta_pct=r.field(item, "delta_pct", at, r.pct),
        job_ids=r.field(item, "job_ids", at, lambda v, k: r.texts(v, k, JOB_ID)),
        unset_env=r.field(item, "unset_env", at, lambda v, k: r.texts(v or [], k, grammar.ENV_NAME), default=[]),
    )
