"""The adaptive sweep's policy (pure): from the plan and every run so far, what to do next.

`decide(state, now)` is called by the engine whenever something changed (a run started, a steady
step arrived, a run ended) and returns the actions to take now, in order. It keeps no memory:
everything it knows is in the state, so a resumed session decides exactly as the killed one
would have. What it works through:

1. the planned baselines and the evidence run, in list order;
2. a running candidate whose remaining steps cannot change a decision is stopped (rules.stop_early);
3. a first win at or above thresholds.win_pct gets its confirming run (rules.confirmation), and
   a run at or above it that is not yet better beyond the noise (a first run, or a replication
   the noise's few degrees of freedom left short) its repeat (rules.promising); a first run's
   second run is the recipe's evidence run (the candidate with the profiler, measured over the
   steps after the profiler's window) while none has run;
4. a confirmed win runs again while the report's lock would hold no recipe (state.report), up
   to one run beyond the repeat cap; the search never ends before the lock would hold one;
5. the next candidate in list order, unless a stop condition holds — a confirmed win that does
   not regress the other config tags (plan.other_tags: each is checked with a CrossCheck run
   first; a win that regresses one is no stop), then only the recipe's variants, items setting
   the same names, still run — or thresholds.bounded_profiles
   tested with none above thresholds.bounded_pct; an item with the effective settings of an
   earlier one is shared (Share), never run;
6. then undecided keys are repeated (rules.undecided) and the leader and runner-up raced
   (rules.race), each up to its cap;
7. a control goes first whenever one is due (every `control_every` candidate runs, or when the
   last is older than `control_max_age_s`); at the end a closing control brackets the last runs
   if the controls drifted or the last is that old, the recipe (else the best run) gets its
   evidence run unless one of its settings ran (a second one when the first went to a win that
   is not the recipe), and Conclude names what was skipped.

The budget ends the search when less than `budget.reserve_s` is left (a first win's confirming
run still goes ahead there: an unconfirmed win is no recipe) and concludes at once when nothing
is; the engine does not start runs after a Conclude.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..verdict.one_run import POOLED_MIN_STEPS
from ..verdict.steady import PROFILER_LAST_STEP
from . import judge, rules
from .judge import Board, Estimate, item_of
from .values import (
    Action,
    Conclude,
    Conclusion,
    Control,
    CrossCheck,
    Observation,
    Plan,
    PlanItem,
    Repeat,
    Role,
    Share,
    Submit,
    SweepState,
)


def decide(state: SweepState, now: float) -> tuple[Action, ...]:
    """The actions to take now (empty: wait for the runs in flight)."""
    board = _board(state.plan, tuple(r for r in state.runs if not r.state.active))
    stops = tuple(s for r in state.active if (s := rules.stop_early(r, board, now)) is not None)
    if stops or len(state.active) >= state.plan.rules.max_in_flight:
        return stops
    return tuple(_next(state, board, now))


def search_over(state: SweepState, now: float) -> str | None:
    """Why the search for new candidates is over — the budget (short of its reserve) or a stop
    condition (a confirmed win: only the recipe's variants still run; bounded) — None while it
    goes on. The engine names it when it skips a candidate the planner passes over."""
    plan = state.plan
    left = plan.budget.left(state, now)
    if left <= plan.budget.reserve_s:
        return "the budget is spent" if left <= 0 else f"less than {plan.budget.reserve_s / 60:.0f} min of budget left"
    stop = _stop(_board(plan, tuple(r for r in state.runs if not r.state.active)), state)
    return stop[1] if stop is not None else None


@functools.lru_cache(maxsize=16)
def _board(plan: Plan, ended: tuple[Observation, ...]) -> Board:
    # Ended runs have fixed times, so the board does not depend on `now`: one per ended set.
    return judge.build(SweepState(plan, ended), now=0.0)


def _ran(state: SweepState, item: PlanItem) -> bool:
    return any(r.item == item.name for r in state.runs)


def _next(state: SweepState, board: Board, now: float) -> list[Action]:
    plan = state.plan
    left = plan.budget.left(state, now)
    if left <= 0:
        return _conclude(state, Conclusion.BUDGET, "the budget is spent")
    for item in plan.items:
        if item.role in (Role.BASELINE, Role.EVIDENCE) and not _ran(state, item):
            return [Submit(item.name, f"planned {item.role.value} run")]
    searching = left > plan.budget.reserve_s
    control = _control_due(state, now)
    if (repeat := _repeat(state, board, rules.confirmation)) is not None:
        # within the reserve too: an unconfirmed win is no recipe to profile
        return [control or _confirming(state, board, repeat)]
    if searching and (repeat := _repeat(state, board, rules.promising)) is not None:
        return [control or _confirming(state, board, repeat)]
    if (repeat := _report_unconfirmed(state, board)) is not None:
        return [control or repeat]
    if (lock_control := _lock_control(state)) is not None:
        return [control or lock_control]
    if (
        searching
        and (why := next((w for e in board.estimates if (w := rules.awaiting_control(e, board))), None)) is not None
    ):
        return [control or Control(why)]
    if searching and (check := _cross_check(state, board)) is not None:
        return [control or check]
    stop = _stop(board, state)
    shares, candidate = _cursor(state, stop)
    if searching and candidate is not None:
        return [*shares, control or Submit(candidate.name, _why_next(plan, candidate))]
    if searching and (repeat := _repeat(state, board, rules.undecided)) is not None:
        return [*shares, control or repeat]
    if searching and (raced := rules.race(board)) is not None:
        racer = item_of(plan, raced[0].key)
        if racer is not None:
            return [*shares, control or Repeat(racer.name, raced[1])]
    closing = _closing_control(state, board, now)
    if closing is not None:
        return [*shares, closing]
    evidence = _winner_evidence(state, board)
    if evidence is not None:
        return [*shares, evidence]
    if stop is not None:
        return _conclude(state, stop[0], stop[1])
    if not searching:
        return _conclude(state, Conclusion.BUDGET, f"less than {plan.budget.reserve_s / 60:.0f} min of budget left")
    return _conclude(state, Conclusion.EXHAUSTED, "every planned candidate ran")


def _repeat(state: SweepState, board: Board, rule: Callable[[Estimate, Board], str | None]) -> Repeat | None:
    """A repeat `rule` asks for, of the key run most recently, as its first item."""
    latest = {r.key: r.submitted_at for r in state.runs}
    pending = [(e, why) for e in board.estimates if (why := rule(e, board)) is not None]
    if not pending:
        return None
    est, why = max(pending, key=lambda p: latest.get(p[0].key, 0.0))
    item = item_of(state.plan, est.key)
    return Repeat(item.name, why) if item is not None else None


def _wins(board: Board, state: SweepState) -> list[tuple[Estimate, PlanItem]]:
    """Confirmed wins that have not regressed another config tag, fastest first."""
    found = [
        (e, item)
        for e in board.estimates
        if rules.confirmed_win(e, board)
        and (item := item_of(board.plan, e.key)) is not None
        and item.name not in state.regressing
        and (state.report is None or state.report.locked or not state.report.decides(item.name))
    ]
    return sorted(found, key=lambda w: -w[0].log_delta)


def _report_unconfirmed(state: SweepState, board: Board) -> Repeat | None:
    """The fastest win the board confirms while the report's lock would hold no recipe
    (state.report: the verdicts judge the runs after a win's first on their own, against the
    baselines' mean), when the report names it or nothing: its next run, up to one beyond the
    repeat cap (a run costs less than the rest of a search that a win which ends nothing goes
    on to). The search never ends before the lock would hold a recipe."""
    report = state.report
    if report is None or report.locked:
        return None
    cap = state.plan.rules.repeat_cap + 1
    wins = [
        (e, item)
        for e in sorted(board.estimates, key=lambda e: -e.log_delta)
        if rules.confirmed_win(e, board)
        and (item := item_of(board.plan, e.key)) is not None
        and item.name not in state.regressing
        and report.decides(item.name)
    ]
    if not wins or report.recipe not in ("", wins[0][1].name) or wins[0][0].m >= cap:
        return None
    est, item = wins[0]
    if any(r.key == item.key for r in state.active):
        return None  # its next run is in flight
    return Repeat(
        item.name,
        f"a win the report does not lock yet: {est.text()}; the runs after its first must show it "
        f"on their own (run {est.m + 1} of at most {cap})",
    )


def _lock_control(state: SweepState) -> Control | None:
    """A control when all the report's lock lacks is one after its recipe's first run — once:
    never right after a control (one that failed is not asked for again and again)."""
    report, last = state.report, state.runs[-1] if state.runs else None
    if report is None or not report.unbracketed or state.active or (last is not None and last.role.is_control):
        return None
    return Control(f"the lock holds {report.recipe} only once a control ran after its first run")


def _cross_check(state: SweepState, board: Board) -> CrossCheck | None:
    """The fastest confirmed win's first unchecked other config tag (None: checked everywhere)."""
    wins = _wins(board, state)
    if not wins:
        return None
    est, item = wins[0]
    tag = next((t for t in state.plan.other_tags if (item.name, t) not in state.checked), None)
    if tag is None:
        return None
    return CrossCheck(
        item.name,
        tag,
        f"confirmed win {est.text()}: a recipe must not regress [{tag}] "
        f"by more than {state.plan.thresholds.regression_pct:g} %",
    )


def _stop(board: Board, state: SweepState) -> tuple[Conclusion, str, PlanItem | None] | None:
    thresholds = board.plan.thresholds
    checked = [
        (e, item)
        for e, item in _wins(board, state)
        if all((item.name, t) in state.checked for t in state.plan.other_tags)
    ]
    if checked:
        best, item = checked[0]
        where = f", and regresses none of {', '.join(state.plan.other_tags)}" if state.plan.other_tags else ""
        return (
            Conclusion.WIN,
            f"confirmed win: {item.name} {best.text()}, at or above +{thresholds.win_pct:g} %{where}",
            item,
        )
    if board.tested >= thresholds.bounded_profiles and not any(rules.above_bounded(e, board) for e in board.estimates):
        return (
            Conclusion.BOUNDED,
            f"{board.tested} candidates tested, none better than the baseline "
            f"by more than +{thresholds.bounded_pct:g} %",
            None,
        )
    return None


def _cursor(
    state: SweepState, stop: tuple[Conclusion, str, PlanItem | None] | None
) -> tuple[list[Action], PlanItem | None]:
    """Shares for the duplicates reached, and the next candidate to run (None: the search is
    over). After a confirmed win only the recipe's variants are candidates."""
    plan, shares = state.plan, list[Action]()
    for item in plan.candidate_order:
        if _ran(state, item) or item.name in state.shared:
            continue
        source = plan.source_of(item)
        if source is not None:
            if state.runs_of(item.key):
                shares.append(_share(item, source))
            continue
        if stop is None:
            return shares, item
        recipe = stop[2]
        if (
            stop[0] is Conclusion.WIN
            and plan.rules.finish_variants
            and recipe is not None
            and item.settings & recipe.settings
        ):
            return shares, item
    return shares, None


def _why_next(plan: Plan, item: PlanItem) -> str:
    gain = plan.prior.gain(item.name)
    if not plan.prior.gains:
        return "next candidate in list order"
    return f"next candidate by expected gain: {gain.pct:+.2f} % ({gain.why})"


def _share(item: PlanItem, source: PlanItem) -> Share:
    return Share(item.name, source.name, f"same effective settings as {source.name}: its runs are this item's")


def _control_due(state: SweepState, now: float) -> Control | None:
    knobs = state.plan.rules
    since = _since_control(state)
    if not since:
        return None
    every = knobs.control_every
    if len(since) >= every:
        return Control(f"{len(since)} candidate runs since the last control (one every {every})")
    last = max((r for r in state.runs if r.role.is_control), key=lambda r: r.submitted_at)
    end = last.ended_at if last.ended_at is not None else now
    if now - end >= knobs.control_max_age_s:
        return Control(
            f"the last control ended {(now - end) / 60:.0f} min ago "
            f"(one at least every {knobs.control_max_age_s / 60:.0f} min)"
        )
    return None


def _closing_control(state: SweepState, board: Board, now: float) -> Control | None:
    """Bracket the last candidate runs when extrapolating past the last control is not safe:
    the controls moved beyond the noise, or the last one is older than control_max_age_s."""
    since = _since_control(state)
    if not since:
        return None
    last = max((r for r in state.runs if r.role.is_control), key=lambda r: r.submitted_at)
    age = now - (last.ended_at if last.ended_at is not None else now)
    if board.drift_report().significant:
        why = "the controls moved beyond the noise"
    elif age >= state.plan.rules.control_max_age_s:
        why = f"the last control ended {age / 60:.0f} min ago"
    else:
        return None
    return Control(f"closing control: brackets the {len(since)} candidate run(s) since the last one ({why})")


def _since_control(state: SweepState) -> list[Observation]:
    """Candidate runs that measured (or are running) since the last control was submitted."""
    controls = [r.submitted_at for r in state.runs if r.role.is_control]
    if not controls:
        return []
    last = max(controls)
    return [r for r in state.runs if r.role is Role.PROFILE and r.submitted_at > last and (r.steady or r.state.active)]


def _confirming(state: SweepState, board: Board, repeat: Repeat) -> Submit | Repeat:
    """A first win's second run: the recipe's evidence run (the candidate with the profiler, its
    steps after the profiler's window measured as a run of its settings: judge.build) while no
    evidence run has run, else the plain repeat."""
    plan = state.plan
    item = plan.item(repeat.item)
    est = board.get(item.key)
    evidence = next((i for i in plan.items if i.role is Role.WINNER_EVIDENCE), None)
    # A profiled run measures the steady steps after the profiler's window (5-8) only: a cell
    # too short for POOLED_MIN_STEPS of them gets the plain repeat.
    profiled_steps = plan.steady_steps - (PROFILER_LAST_STEP - 4)
    if (
        evidence is None
        or est is None
        or est.m != 1
        or profiled_steps < POOLED_MIN_STEPS
        or any(r.role is Role.WINNER_EVIDENCE for r in state.runs)
    ):
        return repeat
    return Submit(
        evidence.name,
        f"{repeat.reason}; its second run is the recipe's evidence run "
        "(measured over the steps after the profiler's window)",
        source=item.name,
    )


def _winner_evidence(state: SweepState, board: Board) -> Submit | None:
    """The recipe's evidence run (else the best key's), unless one of its settings ran: at most
    two, when the first, run as a win's confirming run, went to a key that is not the recipe."""
    item = next((i for i in state.plan.items if i.role is Role.WINNER_EVIDENCE), None)
    profiled = [r for r in state.runs if r.role is Role.WINNER_EVIDENCE]
    if item is None or len(profiled) >= 2:
        return None
    best = rules.recipe(board) or max(board.estimates, key=lambda e: e.log_delta, default=None)
    source = item_of(state.plan, best.key) if best is not None else None
    if source is None or any(r.key == source.key for r in profiled):
        return None
    return Submit(item.name, "the recipe's evidence run", source=source.name)


def _conclude(state: SweepState, why: Conclusion, reason: str) -> list[Action]:
    plan, actions = state.plan, list[Action]()
    for item in plan.items:
        source = plan.source_of(item)
        if source is not None and item.name not in state.shared and not _ran(state, item) and state.runs_of(item.key):
            actions.append(_share(item, source))
    shared = state.shared | {a.item for a in actions if isinstance(a, Share)}
    skipped = tuple(
        i.name
        for i in plan.items
        if i.role in (Role.PROFILE, Role.WINNER_EVIDENCE) and not _ran(state, i) and i.name not in shared
    )
    return [*actions, Conclude(why, reason, skipped)]
