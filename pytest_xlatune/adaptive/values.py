"""The values that cross the adaptive planner's seam: the plan, observed runs, the policy, the
budget, and the actions a policy returns (frozen; no IO, time is always passed in)."""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from enum import Enum

from ..cell.values import Thresholds
from .order import Prior, ranked

Key = Hashable  # an effective-settings key (keys.effective_key); equal keys = identical runs


class Role(Enum):
    """What a run is for; decides whether it may be stopped early and how it is judged."""

    BASELINE = "baseline"  # a planned baseline-deployed repeat (wave 1)
    CONTROL = "control"  # the baseline re-run later in the sweep, for the drift model
    EVIDENCE = "evidence"  # profiled baseline (wave 1.5): never judged, never stopped
    PROFILE = "profile"  # a candidate's run: its first run, a repeat or a shared duplicate's
    WINNER_EVIDENCE = "winner_evidence"  # the recipe re-run with the profiler

    @property
    def is_control(self) -> bool:
        """The baseline's own runs: the drift model's points."""
        return self in (Role.BASELINE, Role.CONTROL)

    @property
    def stoppable(self) -> bool:
        """Only candidates' runs are ever cancelled early; baselines, controls and evidence run out."""
        return self is Role.PROFILE


class RunState(Enum):
    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"  # ran to its last step
    STOPPED = "stopped"  # cancelled early by a StopEarly; its steady steps so far are its value
    FAILED = "failed"  # ended without a measurement (OOM, unknown flag, …)

    @property
    def active(self) -> bool:
        return self in (RunState.PENDING, RunState.RUNNING)


@dataclass(frozen=True)
class Observation:
    """One run as the engine last saw it: identity, times, the steady-step TGS so far, its state."""

    run: str  # the engine's id for the run (a job id, or a sequence number in the simulator)
    item: str  # the plan item it runs (controls: the baseline item's name)
    key: Key
    role: Role
    submitted_at: float
    started_at: float | None = None
    ended_at: float | None = None
    steady: tuple[float, ...] = ()  # TGS of the steady steps seen so far
    state: RunState = RunState.PENDING
    nodes: int = 1
    failure: str = ""  # the verdict of a FAILED run (e.g. "oom"), for reasons only

    @property
    def value(self) -> float | None:
        """The run's steady mean so far (None before its first steady step)."""
        return sum(self.steady) / len(self.steady) if self.steady else None

    @property
    def measured(self) -> bool:
        return self.state in (RunState.FINISHED, RunState.STOPPED) and bool(self.steady)

    def midpoint(self, now: float) -> float:
        """When the run measured, for the drift model: the middle of its run time so far."""
        start = self.started_at if self.started_at is not None else self.submitted_at
        end = self.ended_at if self.ended_at is not None else now
        return (start + max(start, end)) / 2

    def node_seconds(self, now: float) -> float:
        """Nodes × run time (queue waits cost no node time)."""
        if self.started_at is None:
            return 0.0
        end = self.ended_at if self.ended_at is not None else now
        return self.nodes * max(0.0, end - self.started_at)


@dataclass(frozen=True)
class PlanItem:
    """One planned item: its name, effective-settings key, role and what it sets (names only)."""

    name: str
    key: Key
    role: Role
    settings: frozenset[str] = frozenset()  # flag names, env:NAME, key:NAME (plan.RunSpec.settings)
    settings_count: int = 0  # flags + env vars + overrides: the recipe is the simplest of the tied


@dataclass(frozen=True)
class AdaptiveRules:
    """The adaptive rules' knobs (a Plan holds them as `plan.rules`); the defaults are what the replay
    simulator was calibrated with."""

    confidence: float = 0.95  # the verdict interval (as stats.compare): "better" = its low end > 0
    interest_pct: float = 3.0  # the smallest effect the sweep is designed to find
    interest_confidence: float = 0.8  # a run is repeated while this bound still reaches interest_pct
    repeat_cap: int = 3  # runs of one key at most
    race_cap: int = 2  # runs each of the leader and the runner-up when their order is undecided
    tie_pct: float = 0.5  # a runner-up within this of the leader is as good a recipe
    control_every: int = 8  # a control after this many candidate runs …
    control_max_age_s: float = 100 * 60.0  # … or when the last control is older than this
    min_steady: int = 2  # steady steps before a running job can be judged
    futility_from: int = 1  # … as futile: from this steady step, once a full run gave the step scatter
    stop_confidence: float = 0.95  # the remaining steps must not change a decision at this level
    futility_alpha: float = 0.05  # odds a candidate at exactly +win_pct is stopped as futile, over all looks
    finish_variants: bool = True  # a win stops the search only after the recipe's variants ran
    prior_drift_pct_per_sqrt_h: float = 0.25  # drift assumed unless the controls show more
    max_in_flight: int = 1  # the sweep runs serially (one pinned nodelist)

    def __post_init__(self) -> None:
        for name in ("confidence", "interest_confidence", "stop_confidence", "futility_alpha"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise ValueError(f"AdaptiveRules.{name}: expected a probability in (0, 1), found {value!r}")
        if (
            self.repeat_cap < 1
            or self.control_every < 1
            or self.min_steady < 2
            or not 1 <= self.futility_from <= self.min_steady
            or self.max_in_flight < 1
        ):
            raise ValueError(
                "AdaptiveRules: expected repeat_cap, control_every, max_in_flight >= 1, min_steady >= 2 and "
                "futility_from from 1 to min_steady, "
                f"found {self!r}"
            )


@dataclass(frozen=True)
class Budget:
    """When the sweep concludes whatever it has: queue hours (wall time since its start, the
    skill's 8 h) and/or node-hours (nodes × run time of every run); None = no limit."""

    queue_hours: float | None = 8.0
    node_hours: float | None = None
    reserve_s: float = 25 * 60.0  # queue time kept for the closing control and the winner's evidence

    def __post_init__(self) -> None:
        for name in ("queue_hours", "node_hours"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"Budget.{name}: expected hours > 0 or None, found {value!r}")

    def left(self, state: SweepState, now: float) -> float:
        """Seconds of queue time left (inf without limits); with a node-hour limit, the node-hours
        left divided by the nodes a run takes, when that is sooner."""
        left = math.inf
        if self.queue_hours is not None:
            left = self.queue_hours * 3600 - (now - state.started_at)
        if self.node_hours is not None:
            spent = sum(r.node_seconds(now) for r in state.runs)
            nodes = max((r.nodes for r in state.runs), default=1)
            left = min(left, (self.node_hours * 3600 - spent) / nodes)
        return left


@dataclass(frozen=True)
class Plan:
    """What the sweep may run, in list order, and the rules it runs by."""

    items: tuple[PlanItem, ...]
    thresholds: Thresholds = field(default_factory=Thresholds)
    rules: AdaptiveRules = field(default_factory=AdaptiveRules)
    budget: Budget = field(default_factory=Budget)
    steady_steps: int = 10  # steady steps of a full run (steps 5-14)
    # The other config tags a recipe must not regress (the skill's stop condition: a confirmed win
    # ends the search only once it is checked on each of them; the cell's wave 6).
    other_tags: tuple[str, ...] = ()
    prior: Prior = field(default_factory=Prior)  # expected gains: likely winners first (adaptive.order)

    def __post_init__(self) -> None:
        names = [i.name for i in self.items]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"Plan: item names must be unique, found {', '.join(dupes)} twice")
        if not any(i.role is Role.BASELINE for i in self.items):
            raise ValueError("Plan: expected at least one baseline item, found none")

    @property
    def baseline(self) -> PlanItem:
        return next(i for i in self.items if i.role is Role.BASELINE)

    @property
    def candidate_order(self) -> tuple[PlanItem, ...]:
        """The candidates in the order the sweep tries them: by expected gain, ties in list order."""
        profiles = {i.name: i for i in self.items if i.role is Role.PROFILE}
        return tuple(profiles[g.name] for g in ranked(list(profiles), self.prior))

    def item(self, name: str) -> PlanItem:
        for i in self.items:
            if i.name == name:
                return i
        raise KeyError(f"Plan: no item {name!r}")

    def source_of(self, item: PlanItem) -> PlanItem | None:
        """The earlier item a candidate duplicates (same effective settings), or None."""
        if item.role is not Role.PROFILE:
            return None
        for other in self.items:
            if other is item:
                return None
            if other.key == item.key and other.role in (Role.BASELINE, Role.PROFILE):
                return other
        return None


@dataclass(frozen=True)
class ReportView:
    """What the report's verdicts say of a sweep now (the engine reads them from the store): the
    candidate they name the recipe of ("" none) and whether the lock would hold it
    (verdict.lock.build_lock: confirmed by the runs after its first, on their own)."""

    recipe: str = ""
    locked: bool = False
    unbracketed: bool = False  # all the lock lacks is a control (the baseline again) after its first run
    # The candidates the report may name the recipe of (profiles and pipeline shapes; not
    # restore_default, which it reports apart); None: every candidate. A win of another candidate
    # ends the search as the board says.
    named: frozenset[str] | None = None

    def decides(self, item: str) -> bool:
        """Whether the lock's word on `item` holds back the search (the report may name it)."""
        return self.named is None or item in self.named


@dataclass(frozen=True)
class SweepState:
    """Everything a policy decides from: the plan, every run so far, the shares it acknowledged."""

    plan: Plan
    runs: tuple[Observation, ...] = ()
    started_at: float = 0.0
    shared: frozenset[str] = frozenset()  # items the engine recorded a Share for
    # Cross-tag checks of a win (plan.other_tags): the (item, tag) pairs that ended, and the items
    # that regressed a tag beyond thresholds.regression_pct there (or failed on it).
    checked: frozenset[tuple[str, str]] = frozenset()
    regressing: frozenset[str] = frozenset()
    # What the report's verdicts say now (None: the caller does not say): a win the board confirms
    # ends the search only once the lock would hold a recipe (planner._report_unconfirmed).
    report: ReportView | None = None

    def with_run(self, run: Observation) -> SweepState:
        """A new run, or a newer view of one already known (same run id)."""
        others = tuple(r for r in self.runs if r.run != run.run)
        if len(others) == len(self.runs):
            return replace(self, runs=(*self.runs, run))
        return replace(self, runs=tuple(run if r.run == run.run else r for r in self.runs))

    def with_share(self, item: str) -> SweepState:
        return replace(self, shared=self.shared | {item})

    def runs_of(self, key: Key) -> tuple[Observation, ...]:
        return tuple(r for r in self.runs if r.key == key)

    @property
    def active(self) -> tuple[Observation, ...]:
        return tuple(r for r in self.runs if r.state.active)


# ---- actions ---------------------------------------------------------------------------------


class StopKind(Enum):
    LOSER = "loser"  # clearly worse than the baseline, beyond the run-to-run noise
    SETTLED = "settled"  # within the noise and of no interest, whatever its remaining steps say
    WINNER = "winner"  # clearly better; its remaining steps change no decision
    FUTILE = "futile"  # a win at thresholds.win_pct implausible (a sequential test, rules.futile)


class Conclusion(Enum):
    WIN = "win"  # a confirmed recipe at or above thresholds.win_pct
    BOUNDED = "bounded"  # thresholds.bounded_profiles tested, none above thresholds.bounded_pct
    BUDGET = "budget"  # the queue-hour or node-hour budget is spent
    EXHAUSTED = "exhausted"  # every item ran


@dataclass(frozen=True)
class Submit:
    """Run a planned item for the first time (`source`: the recipe a winner-evidence run takes)."""

    item: str
    reason: str
    source: str = ""


@dataclass(frozen=True)
class Repeat:
    """Run an item's settings again: its verdict is undecided at a threshold that matters."""

    item: str
    reason: str


@dataclass(frozen=True)
class Control:
    """Run the baseline again, for the drift model."""

    reason: str


@dataclass(frozen=True)
class StopEarly:
    """Cancel a running job; its steady steps so far are its measurement."""

    run: str
    kind: StopKind
    reason: str


@dataclass(frozen=True)
class CrossCheck:
    """Run a confirmed win's settings on another config tag: the win ends the search only if it
    does not regress that tag."""

    item: str
    config_tag: str
    reason: str


@dataclass(frozen=True)
class Share:
    """Do not run `item`: it has the effective settings of `source`, whose runs it shares."""

    item: str
    source: str
    reason: str


@dataclass(frozen=True)
class Conclude:
    """End the sweep; `skipped` are the planned items that will not run."""

    why: Conclusion
    reason: str
    skipped: tuple[str, ...] = ()


Action = Submit | Repeat | Control | StopEarly | CrossCheck | Share | Conclude
