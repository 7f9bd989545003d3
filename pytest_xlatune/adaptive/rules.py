"""The decision rules (pure): which runs a verdict still needs, when a running job may stop, when
the search ends, and which measured settings are the recipe.

Error rates the rules are built for (bench/replay.py measures them; docs/performance.md): a
profile with no effect is called better with at most 2.5 % odds per look (the low end of the 95 %
interval above 0, as `stats.compare`), over at most `repeat_cap` looks, and a no-op gets a second
look only when its first leaves it undecided (1 in 180 in the simulator); a profile of
+`interest_pct` % (3 %) that one run leaves undecided — not better, but its one-sided
`interest_confidence` (80 %) bound still reaches +3 % — is run again, so it is called better more
often than one run would (≈ 60 % at 0.8 % noise; 74 % measured). A running job is stopped only
when its remaining steps cannot change a decision at `stop_confidence` (95 %; 0.46 % of stops
did in the simulator), or as futile (`futile`): a candidate whose true effect is exactly
+win_pct is stopped so with odds at most `futility_alpha` (5 %) over all its looks. One partial
run is never "better" below win_pct (judge.Estimate.partial).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from ..verdict import stats
from .judge import Board, Estimate, item_of, quantile, step_variance
from .values import Observation, Plan, RunState, StopEarly, StopKind

Signature = tuple[int, int, int, int, int]


def _versus(a: Estimate, b: Estimate) -> tuple[float, float]:
    """a − b in log units and the half-width of its interval (independent errors: conservative,
    the two share control points)."""
    half = quantile((1 + a.confidence) / 2, min(a.df, b.df)) * math.hypot(a.se, b.se)
    return a.log_delta - b.log_delta, half


def _beats(a: Estimate, b: Estimate) -> bool:
    d, half = _versus(a, b)
    return d - half > 0


def signature(est: Estimate, board: Board) -> Signature:
    """Every decision one key's value feeds, as entries each monotone in its Δ (so two values
    with the same signature agree on everything in between): its standing vs the baseline
    (worse / within the noise / undecided, a repeat is due / better), vs the leader if better
    (clearly below / undecided / clearly ahead), a confirming run is due, a confirmed win,
    above bounded_pct."""
    standing = 0 if est.worse else 3 if est.better else 2 if undecided(est, board) is not None else 1
    versus = 0
    if est.better:
        versus = 2
        leader = board.leader(excluding=est.key)
        if leader is not None:
            d, half = _versus(est, leader)
            versus = 1 if d + half < 0 else 3 if d - half > 0 else 2
    return (
        standing,
        versus,
        int(confirmation(est, board) is not None),
        int(confirmed_win(est, board)),
        int(above_bounded(est, board)),
    )


def _settled_by_leader(est: Estimate, board: Board) -> bool:
    """Clearly below a confirmed leader: no run of it can change the recipe."""
    leader = board.leader(excluding=est.key)
    return leader is not None and leader.m >= 2 and _beats(leader, est)


def confirmation(est: Estimate, board: Board) -> str | None:
    """Why a first win at or above win_pct needs its confirming run (None: it does not)."""
    if (
        est.better
        and est.delta_pct >= board.plan.thresholds.win_pct
        and est.m < 2
        and not _settled_by_leader(est, board)
    ):
        return f"confirming a win at or above +{board.plan.thresholds.win_pct:g} %: {est.text()}"
    return None


def undecided(est: Estimate, board: Board) -> str | None:
    """Why a key needs another run: not better beyond the noise, but its one-sided
    interest_confidence bound still reaches interest_pct (None: decided, capped, or clearly
    below a confirmed leader)."""
    knobs = board.plan.rules
    if (
        est.m >= knobs.repeat_cap
        or est.better
        or _settled_by_leader(est, board)
        or est.upper(knobs.interest_confidence) <= math.log1p(knobs.interest_pct / 100)
    ):
        return None
    return (
        f"undecided: {est.text()}, not better beyond the noise but could still be "
        f"≥ +{knobs.interest_pct:g} % ({knobs.interest_confidence:.0%} bound)"
    )


def promising(est: Estimate, board: Board) -> str | None:
    """Why a key asks for its next run before the next candidate (None: it does not): its mean
    at or above +win_pct but not yet better beyond the noise (a first run, or a win whose
    replication the few degrees of freedom of the noise left short), under the repeat cap —
    its repeat may end the search (the workflow's stop rule), so it runs now rather than after
    every other candidate. The repeats are those `undecided` asks for at the end anyway (when the
    search gets there): only their place moves."""
    win = board.plan.thresholds.win_pct
    if est.better or est.delta_pct < win or undecided(est, board) is None:
        return None
    # A later run only when the pooled interval already clears 0 (the replication alone is short),
    # its runs agree and the noise is as the prior expects: under a 15 %-noise or unstable
    # cluster, running it now rather than after the others only adds false wins (bench/replay.py).
    if est.m >= 2 and (est.unstable or est.log_delta - est.half <= 0 or board.noise.prior_rejected):
        return None
    return f"a possible win at or above +{win:g} %, repeated now (it may end the search): {est.text()}"


def _bracketed(est: Estimate, board: Board) -> bool:
    """A control ran after the key's first run: its reference there is measured, not carried
    forward from older controls (a co-tenant's burst then shows in the controls, not as a win)."""
    first = min((t for _, _, t, _ in dict(board.samples).get(est.key, ())), default=None)
    return first is not None and any(p.time > first for p in board.points)


def awaiting_control(est: Estimate, board: Board) -> str | None:
    """Why a win otherwise confirmed needs a control first (None: it does not)."""
    if est.better and est.m >= 2 and est.delta_pct >= board.plan.thresholds.win_pct and not _bracketed(est, board):
        return f"a control after the win's first run, before it counts: {est.text()}"
    return None


def confirmed_win(est: Estimate, board: Board) -> bool:
    """Better beyond the noise, at or above win_pct, on at least two runs, with a control
    measured after its first run."""
    return est.better and est.m >= 2 and est.delta_pct >= board.plan.thresholds.win_pct and _bracketed(est, board)


def above_bounded(est: Estimate, board: Board) -> bool:
    """Beats the baseline beyond the noise by more than bounded_pct (ends a "bounded" search)."""
    return est.better and est.delta_pct > board.plan.thresholds.bounded_pct


def race(board: Board) -> tuple[Estimate, str] | None:
    """The leader or runner-up to run again: while the runner-up could still be more than
    tie_pct faster than the leader, the one with fewer runs, up to race_cap runs each."""
    ranked = board.ranked()
    if len(ranked) < 2:
        return None
    leader, runner = ranked[0], ranked[1]
    knobs = board.plan.rules
    d, half = _versus(runner, leader)
    if d + half <= math.log1p(knobs.tie_pct / 100):
        return None
    pick = runner if runner.m < leader.m else leader
    if pick.m >= knobs.race_cap:
        return None
    return pick, (
        f"leader vs runner-up undecided: {leader.delta_pct:+.2f} % ({leader.m} run(s)) vs "
        f"{runner.delta_pct:+.2f} % ({runner.m}), the runner-up could be up to "
        f"{math.expm1(d + half) * 100:+.2f} % faster"
    )


def recipe(board: Board) -> Estimate | None:
    """The simplest of the tied winners (verdict.choice.choose's rule on this board): among the keys
    better than the baseline that the fastest does not beat beyond the noise, the fewest
    settings, then the fastest."""
    ranked = board.ranked()
    if not ranked:
        return None
    top = ranked[0]
    tied = [e for e in ranked if not _beats(top, e)]

    def rank(e: Estimate) -> tuple[int, float]:
        item = item_of(board.plan, e.key)
        return (item.settings_count if item else 0, -e.log_delta)

    return min(tied, key=rank)


def stop_early(run: Observation, board: Board, now: float) -> StopEarly | None:
    """Stop a running candidate when its remaining steps cannot change any decision: its key's
    signature is the same at both ends of where its final mean can still land (the in-job
    scatter of the steps left, at stop_confidence), and it is not an undecided run whose repeat
    will need its best value; else when a win at win_pct is implausible (`futile`). Baselines,
    controls and evidence runs are never stopped. Before min_steady steps only the futility test
    looks (from `first_look`: its step scatter is the sweep's full runs', not its own)."""
    knobs, total = board.plan.rules, board.plan.steady_steps
    n = len(run.steady)
    if not run.role.stoppable or run.state is not RunState.RUNNING or not first_look(board) <= n < total:
        return None
    mean = sum(run.steady) / n
    now_stopped = board.with_value(run, mean, now, steps=n)
    if n < knobs.min_steady:
        why = futile(now_stopped, board, n) if now_stopped is not None else None
        return StopEarly(run.run, StopKind.FUTILE, why) if why is not None else None
    step_var = board.step_var or step_variance(run.steady)
    spread = NormalDist().inv_cdf((1 + knobs.stop_confidence) / 2) * math.sqrt(step_var * (1 / n - 1 / total))
    low, high = (board.with_value(run, mean * math.exp(s * spread), now) for s in (-1, 1))
    if low is None or high is None or now_stopped is None:
        return None
    sig = signature(low, board)
    if sig != signature(high, board) or sig != signature(now_stopped, board) or sig[0] == 2:
        why = futile(now_stopped, board, n)
        return StopEarly(run.run, StopKind.FUTILE, why) if why is not None else None
    mid = now_stopped
    kind = StopKind.LOSER if sig[0] == 0 else StopKind.WINNER if sig[0] == 3 else StopKind.SETTLED
    return StopEarly(
        run.run,
        kind,
        f"{kind.value} after {n} of {total} steady steps: {mid.text()}; "
        f"the remaining steps cannot change a decision "
        f"({knobs.stop_confidence:.0%})",
    )


def first_look(board: Board) -> int:
    """The first steady step a running candidate is judged at: futility_from once a full run of
    the sweep gave the per-step scatter (board.step_var), else min_steady (a run's own scatter
    needs two steps)."""
    knobs = board.plan.rules
    return knobs.futility_from if board.step_var > 0 else knobs.min_steady


def looks(plan: Plan) -> int:
    """The looks a running job gets: one per steady step from futility_from to the last but one
    (the futility test's Bonferroni count: the most looks any run can get)."""
    return max(1, plan.steady_steps - plan.rules.futility_from)


def futility_bound(stopped: Estimate, board: Board, level: float) -> float:
    """The futility test's one-sided upper bound on a first run's Δ at `level` (log units).

    Its run-to-run noise pools the noise prior (prior_cv_pct over prior_df pseudo-degrees of
    freedom) with the sweep's own repeats, while the runs do not reject the prior: at the start
    of a sweep the wave-1 pair alone is one degree of freedom (a Student-t factor of 51 at
    99.4 %: no candidate was ever futile before the third control). The prior only narrows a
    bound that can stop a run, never one that calls it better (the verdicts keep the runs'
    own noise), and when the data reject it the bound is the verdicts' as before."""
    noise = board.noise
    if noise.prior_rejected or noise.assumed or stopped.df != noise.df:
        return stopped.upper(level)  # the prior rejected, already the prior, or the run's own spread (m ≥ 2)
    own, prior = (noise.cv_pct / 100) ** 2, (noise.prior_cv_pct / 100) ** 2
    df = noise.df + stats.DEFAULT_PRIOR_DF
    pooled = (noise.df * own + stats.DEFAULT_PRIOR_DF * prior) / df
    se = math.sqrt(max(0.0, stopped.se**2 - own / stopped.m) + pooled / stopped.m)
    return stopped.log_delta + quantile(level, df) * se


def futile(stopped: Estimate, board: Board, n: int) -> str | None:
    """Why a running candidate cannot be a win at thresholds.win_pct (None: it still can).

    A sequential test on its steady steps so far: its one-sided upper bound at 1 − α/L (α =
    knobs.futility_alpha, L = `looks`, Bonferroni over the looks) is below +win_pct, the
    bound's variance the run-to-run noise (pooled with its prior: `futility_bound`), the steps
    not yet run and the references' error (as `Board.with_value` with the steps so far). A
    candidate whose true effect is exactly win_pct is stopped at some look with odds at most α
    (while the noise is as its prior or the runs' own). Only a key's first run is tested, and only
    when stopping now leaves it worse or within the noise and of no interest (not better, not
    undecided), so a futile stop never makes a verdict a full run would not support."""
    knobs, win = board.plan.rules, math.log1p(board.plan.thresholds.win_pct / 100)
    if stopped.m != 1 or stopped.better or undecided(stopped, board) is not None:
        return None
    level = 1 - knobs.futility_alpha / looks(board.plan)
    bound = futility_bound(stopped, board, level)
    if bound >= win:
        return None
    return (
        f"futile after {n} of {board.plan.steady_steps} steady steps: {stopped.text()}, its "
        f"{level:.2%} upper bound {math.expm1(bound) * 100:+.2f} % is below the win threshold "
        f"+{board.plan.thresholds.win_pct:g} % (sequential test, false-stop odds ≤ "
        f"{knobs.futility_alpha:.0%})"
    )
