"""The adaptive sweep's decisions (pure; no IO, no pytest, time passed in): what to run next,
when a running job may stop, which runs are shared, and when the sweep concludes.

The engine feeds a `SweepState` (the `Plan` and an `Observation` per run) to `planner.decide`
(or `fixed.decide` for the fixed protocol) and carries out the actions it returns; the replay
simulator (`bench/replay.py`) drives the same functions against simulated clusters.
"""

from .values import (
    Action,
    AdaptiveRules,
    Budget,
    Conclude,
    Conclusion,
    Control,
    CrossCheck,
    Observation,
    Plan,
    PlanItem,
    Repeat,
    ReportView,
    Role,
    RunState,
    Share,
    StopEarly,
    StopKind,
    Submit,
    SweepState,
)

__all__ = [
    "Action",
    "AdaptiveRules",
    "Budget",
    "Conclude",
    "Conclusion",
    "Control",
    "CrossCheck",
    "Observation",
    "Plan",
    "PlanItem",
    "Repeat",
    "ReportView",
    "Role",
    "RunState",
    "Share",
    "StopEarly",
    "StopKind",
    "Submit",
    "SweepState",
]
