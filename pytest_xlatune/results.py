"""What one finished job produced (JobResult) and why it ended (FailureClass, Verdict: names defined once)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any


class FailureClass(Enum):
    """Why a job ended as it did: job-log-triage's classes, at the grain the playbook acts on."""

    SUCCESS = "success"
    SOFT_SUCCESS = "soft_success"  # FAILED / exit 143 with `completed step: T-1`: data intact
    OOM = "oom"
    DISK_FULL = "disk_full"  # no space, quota, I/O error: the next job fails the same way
    UNKNOWN_FLAG = "unknown_flag"
    RCCL_INIT_FLAKE = "rccl_init_flake"
    COORDINATION_TIMEOUT = "coordination_timeout"
    HEARTBEAT_TIMEOUT = "heartbeat_timeout"
    NCCL_TIMEOUT = "nccl_timeout"
    XLA_COMPILE_FAIL = "xla_compile_fail"
    PYTHON_EXCEPTION = "python_exception"
    NODE_FAIL = "node_fail"
    GPU_RUNTIME_ERROR = "gpu_runtime_error"
    NIC_FAULT = "nic_fault"
    HANG = "hang"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"
    # Seen by the poller or sinfo, never in a job's log; members so that the playbook is one table.
    NODE_DOWN = "node_down"
    CONTROLLER_UNREACHABLE = "controller_unreachable"


class RunKind(str, Enum):
    """What a run measures; decides how its result is judged (JobResult.kind).

    A str: the store and exports write its value ("baseline"), and it equals that string."""

    BASELINE = "baseline"
    RESTORE_DEFAULT = "restore_default"
    EVIDENCE = "evidence"
    PROFILE = "profile"
    PIPELINE_SHAPE = "pipeline_shape"
    CROSS_CONFIG = "cross_config"
    GATE_RECIPE = "gate_recipe"
    GATE_OLD_BASELINE = "gate_old_baseline"  # the gate's baseline control on the lock's image
    GATE_OLD_RECIPE = "gate_old_recipe"  # the gate's locked-recipe control on the lock's image
    STACK = "stack"  # the top-k winning profiles combined
    WINNER_EVIDENCE = "winner_evidence"  # the winner re-run with profiler and HLO dump

    def __str__(self) -> str:  # its value in f-strings and templates, on every Python version
        return str(self.value)


# The failure classes that are never a job's verdict: an UNKNOWN failure is FAILED or NO_STEPS
# (triage), and the incidents are not jobs.
_NOT_VERDICTS = (FailureClass.UNKNOWN, FailureClass.NODE_DOWN, FailureClass.CONTROLLER_UNREACHABLE)


class Verdict(Enum):
    """How a job ended, as far as the sweep is concerned: every failure class that a job can end
    with (same name, same stored value; tests/unit/ground/test_results_verdict.py keeps the two in step),
    and the sweep's own words."""

    SUCCESS = "success"
    SOFT_SUCCESS = "soft_success"
    OOM = "oom"
    DISK_FULL = "disk_full"
    UNKNOWN_FLAG = "unknown_flag"
    RCCL_INIT_FLAKE = "rccl_init_flake"
    COORDINATION_TIMEOUT = "coordination_timeout"
    HEARTBEAT_TIMEOUT = "heartbeat_timeout"
    NCCL_TIMEOUT = "nccl_timeout"
    XLA_COMPILE_FAIL = "xla_compile_fail"
    PYTHON_EXCEPTION = "python_exception"
    NODE_FAIL = "node_fail"
    GPU_RUNTIME_ERROR = "gpu_runtime_error"
    NIC_FAULT = "nic_fault"
    HANG = "hang"
    CANCELLED = "cancelled"
    # The sweep's words for how a job ended (no failure class).
    FAILED = "failed"  # a failure of no known class, after at least one step
    NO_STEPS = "no_steps"  # no known class, and no step (or no TGS in the steady window)
    INFRA_FLAKE = "infra_flake"  # dropped by the policy after repeated RCCL init flakes
    # Cancelled by the adaptive sweep once its steady steps so far decided it: a measured
    # partial steady state (its TGS is the mean of those steps), never a failure.
    STOPPED_EARLY = "stopped_early"

    @property
    def measured(self) -> bool:
        return self.name in ("SUCCESS", "SOFT_SUCCESS", "STOPPED_EARLY")


# The verdicts that are no failure class (the sweep's words for how a job ended).
SWEEP_VERDICTS = (Verdict.FAILED, Verdict.NO_STEPS, Verdict.INFRA_FLAKE, Verdict.STOPPED_EARLY)


@dataclass(frozen=True)
class JobResult:
    """One job attempt: identity, what ran, what it measured and how it ended."""

    key: str
    item: str
    wave: str
    profile: str
    config_tag: str
    kind: RunKind  # a stored value (a str) is turned into its RunKind
    job_id: str
    verdict: Verdict
    xla_flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    overrides: tuple[tuple[str, str], ...] = ()
    # Env-file variables this run unset (restore_default of an entry whose image default is
    # unset): part of what it ran, so no run with the variable set is its duplicate or inert twin.
    unset_env: tuple[str, ...] = ()
    nodelist: str = ""
    image: str = ""
    backend: str = ""
    tgs: float | None = None
    tgs_derived: bool = False  # tokens per device per step / step seconds: no Tokens/s/device printed
    step_seconds: float | None = None
    last_loss: float | None = None
    losses: tuple[tuple[int, float], ...] = ()  # (step, loss) of every step line the job printed
    extra_losses: tuple[tuple[str, tuple[tuple[int, float], ...]], ...] = ()  # e.g. mtp_loss
    tgs_values: tuple[float, ...] = ()
    steps_used: tuple[int, ...] = ()
    step_count: int = 0
    reason: str = ""
    log_path: str = ""
    log_tail: str = ""
    artifacts: tuple[tuple[str, str], ...] = ()
    resolved_from: str = ""
    exit_code: int | None = None
    submitted_at: float = 0.0
    finished_at: float = 0.0
    retries: tuple[str, ...] = field(default_factory=tuple)
    # Accounting: the nodes the job held and from when to when the scheduler ran it (as the
    # poller saw it: first RUNNING, then finished); None in records written before it was kept.
    nodes: int = 0
    started_at: float = 0.0
    ended_at: float = 0.0
    node_minutes: float | None = None
    # A duplicate never run: the item whose job (same effective settings) this record shares.
    shared_from: str = ""
    # Shared because its job compiled to shared_from's program (evidence/inert.py): cut after compile.
    inert: bool = False
    # The JAX compilation cache directory the job was given (adaptive.cache; "" = none).
    compile_cache: str = ""
    # A requested NCCL/RCCL setting left no trace in the library's debug lines (why; "" applied
    # or none set): the run's TGS says nothing about the setting (evidence/nccl_applied.py).
    not_applied: str = ""
    # A pooled result (adaptive repeats): (job id, steady TGS) of every run behind `tgs`; () = one run.
    runs: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", RunKind(self.kind))

    @property
    def own_tgs(self) -> float | None:
        """This job's own steady TGS: `tgs` unless the result is pooled (`runs`), whose `tgs` is
        the mean of its runs (the job's own value is then its entry in `runs`)."""
        return dict(self.runs).get(self.job_id, self.tgs) if self.runs else self.tgs

    @property
    def measured(self) -> bool:
        return self.verdict.measured and self.tgs is not None

    def loss_fields(self) -> dict[str, tuple[tuple[int, float], ...]]:
        """Every loss trajectory of the job by field name (`loss` first), for the numerics guard."""
        return {"loss": self.losses, **dict(self.extra_losses)} if self.losses else {}

    def artifact(self, name: str) -> str | None:
        return dict(self.artifacts).get(name)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdict"] = self.verdict.value
        data["kind"] = self.kind.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobResult:
        """Read a stored result; a field of the wrong type or out of range raises ValueError
        naming it (the store refuses the line: a traceback later is no place to find out)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if type(values.get("job_id")) is int:  # stores before job ids were strings
            values["job_id"] = str(values["job_id"])
        for name, value in values.items():
            if (expected := _misfit(name, value)) is not None:
                shown = repr(value)
                raise ValueError(
                    f"{name}: expected {expected}, found {shown if len(shown) <= 60 else shown[:57] + '...'}"
                )
        values["verdict"] = Verdict(values["verdict"])
        for name in ("xla_flags", "unset_env", "tgs_values", "steps_used", "retries"):
            values[name] = tuple(values.get(name) or ())
        for name in ("env", "overrides", "artifacts", "runs"):
            values[name] = tuple(tuple(pair) for pair in values.get(name) or ())
        values["losses"] = _trajectory(values.get("losses"))
        values["extra_losses"] = tuple(
            (str(name), _trajectory(steps)) for name, steps in values.get("extra_losses") or ()
        )
        return cls(**values)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(value: object) -> bool:
    return type(value) is int and value >= 0


def _amount(value: object) -> bool:
    """A measured amount: a finite number >= 0 (TGS, seconds, node-minutes)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _time(value: object) -> bool:
    """Seconds since 1970, up to the year 2286 (dates render it)."""
    return _amount(value) and float(value) <= 1e10  # type: ignore[arg-type]


def _text(value: object) -> bool:
    return isinstance(value, str)


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(map(_text, value))


def _pairs(value: object, first: Callable[[object], bool], second: Callable[[object], bool]) -> bool:
    return isinstance(value, list) and all(
        isinstance(p, list) and len(p) == 2 and first(p[0]) and second(p[1]) for p in value
    )


def _trajectory_ok(value: object) -> bool:
    return _pairs(value, _count, _number)


# A scheduler's job id as the lock holds it too (verdict/lock.JOB_ID): no space, quote or control.
JOB_ID_RE = re.compile(r"[A-Za-z0-9_.:+-]{1,64}")
JOB_ID_EXPECTED = "a job id ([A-Za-z0-9_.:+-], at most 64 characters)"
_TEXT_FIELDS = (
    "key", "item", "wave", "profile", "config_tag", "nodelist", "image", "backend", "reason",
    "log_path", "log_tail", "resolved_from", "shared_from", "compile_cache", "not_applied",
)  # fmt: skip
# What each stored field must hold (lists where the record holds tuples), and its words.
_FIELD_CHECKS: dict[str, tuple[Callable[[object], bool], str]] = {
    **dict.fromkeys(_TEXT_FIELDS, (_text, "a string")),
    "job_id": (lambda v: isinstance(v, str) and JOB_ID_RE.fullmatch(v) is not None, JOB_ID_EXPECTED),
    "kind": (lambda v: v in {k.value for k in RunKind}, "a run kind"),
    "verdict": (lambda v: v in {k.value for k in Verdict}, "a verdict"),
    **dict.fromkeys(("xla_flags", "unset_env", "retries"), (_texts, "a list of strings")),
    **dict.fromkeys(("env", "overrides", "artifacts"), (lambda v: _pairs(v, _text, _text), "a list of string pairs")),
    "runs": (lambda v: _pairs(v, _text, _amount), "a list of [job id, TGS] pairs"),
    **dict.fromkeys(
        ("tgs", "step_seconds", "node_minutes"), (lambda v: v is None or _amount(v), "a finite number >= 0 or null")
    ),
    "last_loss": (lambda v: v is None or _number(v), "a number or null"),
    "losses": (_trajectory_ok, "a list of [step, loss] pairs"),
    "extra_losses": (lambda v: _pairs(v, _text, _trajectory_ok), "a list of [name, [[step, loss], ...]] pairs"),
    "tgs_values": (lambda v: isinstance(v, list) and all(map(_amount, v)), "a list of finite numbers >= 0"),
    "steps_used": (lambda v: isinstance(v, list) and all(map(_count, v)), "a list of step numbers"),
    **dict.fromkeys(("step_count", "nodes"), (_count, "an integer >= 0")),
    "exit_code": (lambda v: v is None or type(v) is int, "an integer or null"),
    **dict.fromkeys(("submitted_at", "finished_at", "started_at", "ended_at"), (_time, "a time in seconds since 1970")),
    **dict.fromkeys(("tgs_derived", "inert"), (lambda v: type(v) is bool, "true or false")),
}


def _misfit(name: str, value: object) -> str | None:
    """What a stored field should have held, or None when it fits (a tuple counts as its list)."""
    check = _FIELD_CHECKS.get(name)
    return None if check is None or check[0](_as_lists(value)) else check[1]


def _as_lists(value: object) -> object:
    return [_as_lists(v) for v in value] if isinstance(value, (list, tuple)) else value


def _trajectory(pairs: Any) -> tuple[tuple[int, float], ...]:
    return tuple((int(step), float(loss)) for step, loss in pairs or ())


@dataclass(frozen=True)
class Spent:
    """What a sweep's jobs cost: node-minutes summed over the jobs that recorded them."""

    node_minutes: float
    jobs: int  # jobs with a recorded cost
    unknown: int = 0  # jobs stored before their cost was kept

    @property
    def node_hours(self) -> float:
        return self.node_minutes / 60.0

    def text(self) -> str:
        """One line: `1.25 node-hours (75.0 node-minutes) over 6 jobs` (and the jobs it leaves out)."""
        line = (
            f"{self.node_hours:.2f} node-hours ({self.node_minutes:.1f} node-minutes) over "
            f"{self.jobs} job{'s' if self.jobs != 1 else ''}"
        )
        # Stored before costs were kept, or cut by a session killed before it saw the job end.
        return line + (f" ({self.unknown} job(s) without a recorded cost)" if self.unknown else "")

    @classmethod
    def of(cls, jobs: Iterable[JobResult]) -> Spent:
        """The cost of these jobs (every attempt counts once: by job id, the last record wins)."""
        by_job = {(r.backend, r.job_id): r for r in jobs}
        known = [r.node_minutes for r in by_job.values() if r.node_minutes is not None]
        return cls(sum(known), len(known), len(by_job) - len(known))


def node_minutes(nodes: int, started_at: float, ended_at: float) -> float:
    """Nodes × the time the job ran, in minutes (never negative: clocks of two polls)."""
    return nodes * max(0.0, ended_at - started_at) / 60.0


def delta_pct(value: float | None, reference: float | None) -> float | None:
    """Relative change in percent; None when either side is missing."""
    if value is None or not reference:
        return None
    return (value / reference - 1.0) * 100.0
