"""What the report's verdicts say of an adaptive sweep, for its planner (pure over stored results):
the wins that regressed another config tag, and the recipe the report names and whether the
lock would hold it. The planner's board judges against the drift model; the report and the lock
judge against the baselines' mean. The planner defers to them so that a search ends on a recipe
the lock holds (adaptive.planner: a win the lock would not hold runs again)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..adaptive.stored import RERUN
from ..adaptive.values import ReportView, Role
from ..plan.expand import RunKind
from ..results import JobResult
from ..verdict import choice, numerics, stats, verdicts

# The candidates the report may name the recipe of (choice.deployable): not restore_default.
NAMED_BY_THE_REPORT = (RunKind.PROFILE, RunKind.PIPELINE_SHAPE)


def cross_checks(
    latest: Mapping[str, JobResult],
    stored: Sequence[JobResult],
    tags: Sequence[str],
    candidates: Sequence[str],
    key_of: Callable[[str, str], str],
    tolerance_pct: float,
) -> tuple[frozenset[tuple[str, str]], frozenset[str]]:
    """The candidates' ended checks on the other config tags (their runs stored under
    `key_of(candidate, tag)`), and the candidates that regressed a tag there beyond
    `tolerance_pct` or failed on it. A tag without a measured baseline cannot be checked: it
    counts as checked (its wave-6 item says what it needs)."""
    checked, regressing = set[tuple[str, str]](), set[str]()
    for tag in tags:
        unmeasured = not verdicts.baseline_values(stored, tag)
        for name in candidates:
            if unmeasured:
                checked.add((name, tag))
                continue
            result = latest.get(key_of(name, tag))
            if result is None or result.verdict in RERUN:
                continue
            checked.add((name, tag))
            gate = (
                choice.regression_gate(
                    [result.tgs] if result.tgs is not None else [], stored, tag, tolerance_pct, final=True
                )
                if result.measured
                else None
            )
            if not result.measured or (gate is not None and gate.decision is stats.GateDecision.FAIL):
                regressing.add(name)
    return frozenset(checked), frozenset(regressing)


def recipe_view(
    stored: Sequence[JobResult], config_tag: str, mode: numerics.Mode
) -> tuple[JobResult, str, bool] | None:
    """The run whose settings the report names the recipe of `config_tag` (choice.deployable), why
    the lock would not hold it ("" when it would: verdict.lock.build_lock's rule,
    `verdicts.confirmation`), and whether a control after its first run is all it lacks; None
    when the report names none."""
    measured = [r for r in stored if r.measured and r.tgs is not None]
    best = choice.deployable(measured, config_tag, mode)
    if best is None:
        return None
    why = verdicts.confirmation(best, measured)
    return best, why, bool(why) and not verdicts.confirmation(best, measured, require_control=False)


def view(
    stored: Sequence[JobResult],
    config_tag: str,
    mode: numerics.Mode,
    roles: Mapping[str, tuple[str, Role]],
    kinds: Mapping[str, RunKind],
) -> ReportView:
    """The report's recipe as the planner names it (`roles`: a run's store key → its plan item
    and role), whether the lock holds it or lacks only a control, and the candidates the report
    may name (`kinds`: each plan item's run kind)."""
    named = frozenset(name for name, kind in kinds.items() if kind in NAMED_BY_THE_REPORT)
    found = recipe_view(stored, config_tag, mode)
    if found is None:
        return ReportView(named=named)
    best, why, unbracketed = found
    role = roles.get(best.key)
    name = role[0] if role is not None and role[1] is Role.PROFILE else best.item
    return ReportView(name, not why, unbracketed, named)
