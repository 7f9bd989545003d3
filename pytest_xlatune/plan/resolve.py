"""Runs resolved from other runs' results (stack, winner evidence, Wave 6 cross-config; pure)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from ..cell.values import Cell
from ..results import JobResult
from ..verdict import choice, numerics
from .expand import RESOLVED_KINDS, RunKind, RunSpec


def current_results(
    cell: Cell,
    specs: Sequence[RunSpec],
    latest: Mapping[str, JobResult],
    key: Callable[[RunSpec], str],
    mode: numerics.Mode,
    pool: Callable[[list[JobResult]], list[JobResult]] | None = None,
) -> list[JobResult]:
    """The latest result of each spec (what the report and Δ% use); runs resolved from other
    runs (stack, winner evidence, cross-config) are found under their resolution, made from the
    results as `pool` shows them (the adaptive sweep's repeats and controls joined: what the
    session resolved them from when they ran), while the list returned stays unpooled; the gates'
    re-measurements follow the run they repeat (`remeasurements`)."""
    found = [latest[k] for spec in specs if not spec.needs_resolution if (k := key(spec)) in latest]
    ran = [(spec, latest[k]) for spec in specs if not spec.needs_resolution if (k := key(spec)) in latest]
    for kind in RESOLVED_KINDS:  # each kind resolves from the results found before it
        seen = pool(list(found)) if pool is not None else found
        for spec in specs:
            if spec.kind is kind and spec.needs_resolution:
                resolved, _ = resolution(cell, specs, spec, seen, mode)
                result = latest.get(key(resolved)) if resolved is not None else None
                if kind is RunKind.WINNER_EVIDENCE:
                    # An adaptive sweep's earlier evidence run of another candidate (a first win's
                    # confirming run, before the recipe moved on) is a run of that candidate's
                    # settings (verdicts.pooled_evidence): kept, before the recipe's own — only
                    # one of a current candidate's settings (its key: the spec resolved to it).
                    found += [
                        r
                        for source in specs
                        if source.kind is RunKind.PROFILE and source.config_tag == spec.config_tag
                        if (r := latest.get(key(spec.resolve(source)))) is not None and r is not result
                    ]
                if result is not None and resolved is not None:
                    found.append(result)
                    ran.append((resolved, result))
    return found + [r for spec, first in ran for r in remeasurements(cell, spec, first, latest, key)]


# The runs a gate measures again while its answer is ambiguous (engine/sweep.py's gate loops):
# the cross-config check's recipe run, and the image gate's recipe, baseline and old-image controls.
REMEASURED_KINDS = (
    RunKind.BASELINE,
    RunKind.CROSS_CONFIG,
    RunKind.GATE_RECIPE,
    RunKind.GATE_OLD_RECIPE,
    RunKind.GATE_OLD_BASELINE,
)


def remeasurements(
    cell: Cell, spec: RunSpec, first: JobResult, latest: Mapping[str, JobResult], key: Callable[[RunSpec], str]
) -> list[JobResult]:
    """The stored re-measurements of a gate's run (its repeats 1 to thresholds.remeasure), each
    a run of the same settings that the figures pool with it: the figure every output shows is
    the mean the gate judged. Only those submitted after `first`: an older one belongs to an
    earlier gate's time window, which this gate measured again."""
    found: list[JobResult] = []
    if spec.kind not in REMEASURED_KINDS or spec.repeat:
        return found
    for n in range(1, cell.thresholds.remeasure + 1):  # measured in turn: the first gap ends them
        again = latest.get(key(spec.remeasured(n)))
        if again is None:
            break
        if again.submitted_at >= first.submitted_at:
            found.append(again)
    return found


def resolution(
    cell: Cell, specs: Sequence[RunSpec], spec: RunSpec, results: list[JobResult], mode: numerics.Mode
) -> tuple[RunSpec | None, str]:
    """(the run with its flags filled in from `results`, or None with the reason it cannot run yet)."""
    if not spec.needs_resolution:
        return spec, ""
    primary = cell.primary_config.name
    if spec.kind is RunKind.STACK:
        winners = choice.winners(results, primary, spec.wave_number, mode=mode)
        sources: list[RunSpec] = []
        clashes: list[str] = []  # winners left out: a setting a faster winner already sets
        for result in winners:
            if (source := _profile_spec(specs, result.profile)) is None:
                continue
            taken = next((s for s in sources if s.settings() & source.settings()), None)
            if taken is None:
                sources.append(source)
            else:
                shared = ", ".join(sorted(n.removeprefix("key:") for n in taken.settings() & source.settings()))
                clashes.append(f"{source.profile} sets {shared} as {taken.profile} does")
        if len(sources) < 2:
            names = ", ".join(r.profile for r in winners) or "none"
            why = f"; {'; '.join(clashes)} (a stack takes each setting once)" if clashes else ""
            return None, (
                f"fewer than 2 winning profiles (better than baseline-deployed beyond "
                f"noise, with distinct settings) in waves 2-{spec.wave_number} to stack: "
                f"{names}{why}"
            )
        return spec.combine(sources[: spec.top]), ""
    if spec.kind is RunKind.WINNER_EVIDENCE:
        # The winner (better beyond noise); without one, the best run, to show why it is not.
        chosen = choice.recipe(results, primary, mode) or choice.best_measured(
            results, primary, kinds=(RunKind.PROFILE, RunKind.STACK)
        )
        source = _source_spec(specs, chosen) if chosen else None
        if source is None:
            return None, "no measured profile on the primary config tag yet: no winner to re-run"
        return spec.resolve(source), ""
    # Wave 6 re-runs the recipe (a stack too); without a winner, the best profile, to see
    # whether even that regresses the other tags.
    chosen = choice.recipe(results, primary, mode) or choice.best_measured(results, primary)
    if chosen is None:
        return None, "no measured profile on the primary config tag yet: nothing to re-run"
    source = _source_spec(specs, chosen)
    return (spec.resolve(source), "") if source else (None, "the best profile left the cell")


def unmeasured(cell: Cell, specs: Sequence[RunSpec], spec: RunSpec, results: list[JobResult]) -> list[str]:
    """The profiles a resolved run reads (waves 2 to the stack's own, 2-4 for the winner's
    evidence run and wave 6) that have no result on the primary config tag yet."""
    primary = cell.primary_config.name
    last = spec.wave_number if spec.kind is RunKind.STACK else 4
    seen = {r.profile for r in results if r.config_tag == primary}
    return [
        s.profile
        for s in specs
        if s.kind is RunKind.PROFILE
        and s.config_tag == primary
        and 2 <= s.wave_number <= last
        and s.profile not in seen
    ]


def _profile_spec(specs: Sequence[RunSpec], profile: str) -> RunSpec | None:
    return next((s for s in specs if s.kind is RunKind.PROFILE and s.profile == profile), None)


def _source_spec(specs: Sequence[RunSpec], result: JobResult) -> RunSpec | None:
    """The run behind a result: a profile, or a stack with the settings it ran with."""
    if result.kind is RunKind.STACK:
        stack = next((s for s in specs if s.kind is RunKind.STACK and s.profile == result.profile), None)
        if stack is None:
            return None
        own = tuple(kv for kv in result.overrides if kv not in stack.config_overrides)
        return replace(
            stack, xla_flags=result.xla_flags, env=result.env, profile_overrides=own, resolved_from=result.resolved_from
        )
    return _profile_spec(specs, result.profile)
