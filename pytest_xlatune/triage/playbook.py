"""The failure-recovery playbook as one table: class → action, retry budget, stop trigger (pure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from ..results import Verdict
from .diagnosis import Diagnosis, FailureClass

__all__ = [
    "DEFAULT_PLAYBOOK",
    "DEFAULT_RULES",
    "Decision",
    "Playbook",
    "Remedy",
    "Rule",
    "StopOn",
    "SweepCounters",
    "decide",
    "incident",
]


class Remedy(Enum):
    """What the sweep does about one diagnosed job."""

    RETRY_SAME_NODELIST = "retry_same_nodelist"  # scancel, wait until it leaves COMPLETING, resubmit
    FAIL_ITEM = "fail_item"
    XFAIL_ITEM = "xfail_item"
    DROP_INFRA_FLAKE = "drop_infra_flake"  # give up on the item as `infra-flake`, go on
    RESUME_NODE_THEN_RETRY = "resume_node_then_retry"  # scontrol RESUME, never a different node
    STOP = "stop"  # halt the sweep and send the STOP message; resubmit nothing
    BACKOFF_RETRY = "backoff_retry"  # wait, then ask again (controller restarts)
    COUNT_AS_SUCCESS = "count_as_success"


class StopOn(Enum):
    """What `stop_after` counts."""

    NEVER = "never"
    IN_A_ROW = "in_a_row"  # failures of this class in a row on the item
    FAILED_RESUMES = "failed_resumes"  # RESUMEs of the node that did not take
    DOWN_MINUTES = "down_minutes"  # minutes the controller has been unreachable


_RETRYING = frozenset({Remedy.RETRY_SAME_NODELIST, Remedy.RESUME_NODE_THEN_RETRY, Remedy.BACKOFF_RETRY})


@dataclass(frozen=True)
class Rule:
    """One row of the playbook."""

    action: Remedy
    retries: int | None = 0  # retries in a row on one item; None: not a job attempt, no budget
    exhausted: Remedy = Remedy.FAIL_ITEM  # once the retries are spent
    stop_on: StopOn = StopOn.NEVER
    stop_after: float | None = None
    cancel_on_sight: bool = False  # cancel a running job as soon as the line appears
    wait_s: float = 0.0  # before the retry
    recovery: str = ""  # what the caller does before retrying; when it does not take: STOP


F, A = FailureClass, Remedy
_RESUME = "scontrol update NodeName=<n> State=RESUME Reason=manual, then sinfo"
DEFAULT_RULES: Mapping[FailureClass, Rule] = MappingProxyType(
    {
        F.SUCCESS: Rule(A.COUNT_AS_SUCCESS),
        F.SOFT_SUCCESS: Rule(A.COUNT_AS_SUCCESS),
        F.OOM: Rule(A.XFAIL_ITEM, cancel_on_sight=True),  # nodes freed at once; the figures still read
        F.UNKNOWN_FLAG: Rule(A.FAIL_ITEM, cancel_on_sight=True),
        # A full or failing disk fails every later job too: stop and say where (the log line).
        F.DISK_FULL: Rule(
            A.STOP, cancel_on_sight=True, recovery="free space (or fix the disk) where the log line says, then rerun"
        ),
        F.RCCL_INIT_FLAKE: Rule(A.RETRY_SAME_NODELIST, retries=2, exhausted=A.DROP_INFRA_FLAKE),
        F.COORDINATION_TIMEOUT: Rule(
            A.RETRY_SAME_NODELIST, retries=1, stop_on=StopOn.IN_A_ROW, stop_after=2, cancel_on_sight=True
        ),
        F.HEARTBEAT_TIMEOUT: Rule(A.RETRY_SAME_NODELIST, retries=1),
        F.NCCL_TIMEOUT: Rule(A.RETRY_SAME_NODELIST, retries=1),
        F.XLA_COMPILE_FAIL: Rule(A.FAIL_ITEM),
        F.PYTHON_EXCEPTION: Rule(A.FAIL_ITEM),
        F.NODE_FAIL: Rule(
            A.RESUME_NODE_THEN_RETRY, retries=2, stop_on=StopOn.FAILED_RESUMES, stop_after=2, recovery=_RESUME
        ),
        F.GPU_RUNTIME_ERROR: Rule(
            A.RETRY_SAME_NODELIST,
            retries=1,
            cancel_on_sight=True,
            wait_s=90,
            recovery="rocm-smi --showtemp and dmesg show no hardware fault",
        ),
        F.NIC_FAULT: Rule(
            A.RETRY_SAME_NODELIST,
            retries=1,
            cancel_on_sight=True,
            recovery="reset the NIC on the node the log names (ionic: reload ionic_rdma "
            "and ionic; other NICs: the site's own reset); ibstat shows every "
            "port Active",
        ),
        F.HANG: Rule(A.RETRY_SAME_NODELIST, retries=1),  # a hang before step 0 comes as OOM
        F.CANCELLED: Rule(A.FAIL_ITEM),
        F.UNKNOWN: Rule(A.RETRY_SAME_NODELIST, retries=1),
        # wait_s: how long a RESUME may take to show in sinfo (a node whose job just ended can
        # read `idle*` for a moment); only then does it count as failed.
        F.NODE_DOWN: Rule(
            A.RESUME_NODE_THEN_RETRY,
            retries=None,
            stop_on=StopOn.FAILED_RESUMES,
            stop_after=2,
            wait_s=5,
            recovery=_RESUME,
        ),
        F.CONTROLLER_UNREACHABLE: Rule(
            A.BACKOFF_RETRY, retries=None, stop_on=StopOn.DOWN_MINUTES, stop_after=15, wait_s=300
        ),
    }
)


@dataclass(frozen=True)
class Playbook:
    """The playbook table and the sweep-wide limits."""

    rules: Mapping[FailureClass, Rule] = field(default_factory=lambda: DEFAULT_RULES)
    max_retries_per_job: int = 2  # across classes; a class's own `retries` may go higher
    resume_permitted: bool = True  # may this session run `scontrol update ... State=RESUME`?
    max_failed_nodes_per_wave: int = 1  # more NodeFails in one wave: the cluster is sick

    def rule(self, failure: FailureClass) -> Rule:
        """The class's row; a class without one (a new class, no row yet) acts as UNKNOWN."""
        return self.rules.get(failure) or DEFAULT_RULES.get(failure) or DEFAULT_RULES[FailureClass.UNKNOWN]

    def cancel_on_sight(self, failure: FailureClass) -> bool:
        """Say whether a running job showing this class should be cancelled at once."""
        return self.rule(failure).cancel_on_sight

    def markdown(self) -> str:
        """The table, for the report."""
        rows = [
            "| class | action | retries | when spent | stop trigger | cancel on sight | before retry |",
            "|---|---|---|---|---|---|---|",
        ]
        for failure in FailureClass:
            r = self.rule(failure)
            sign = ">" if r.stop_on is StopOn.DOWN_MINUTES else "≥"
            stop = "—" if r.stop_on is StopOn.NEVER else f"{r.stop_on.value} {sign} {r.stop_after:g}"
            retries = "—" if r.retries is None or r.action not in _RETRYING else str(r.retries)
            spent = r.exhausted.value if r.action in _RETRYING and r.retries is not None else "—"
            before = "; ".join(x for x in (r.recovery, f"wait {r.wait_s:g} s" if r.wait_s else "") if x)
            rows.append(
                f"| {failure.value} | {r.action.value} | {retries} | {spent} | {stop} | "
                f"{'yes' if r.cancel_on_sight else ''} | {before} |"
            )
        return "\n".join(rows)


DEFAULT_PLAYBOOK = Playbook()


@dataclass(frozen=True)
class SweepCounters:
    """What the sweep has seen beyond one item; the caller keeps it (copies via the methods)."""

    failed_resumes: Mapping[str, int] = field(default_factory=dict)  # node → RESUMEs that did not take
    failed_nodes_in_wave: frozenset[str] = frozenset()  # NodeFail nodes of this wave so far
    controller_down_s: float = 0.0  # how long squeue/sbatch have been failing
    recovery_failed: str = ""  # a recovery step (NIC reset, GPU check) did not take: what it saw

    def resume_failed(self, node: str) -> SweepCounters:
        counts = dict(self.failed_resumes)
        counts[node] = counts.get(node, 0) + 1
        return dataclasses.replace(self, failed_resumes=counts)

    def resume_took(self, node: str) -> SweepCounters:
        """The node is back: its failed RESUMEs stop counting (the limit is per outage)."""
        counts = {n: c for n, c in self.failed_resumes.items() if n != node}
        return dataclasses.replace(self, failed_resumes=counts)

    def node_failed(self, node: str) -> SweepCounters:
        return dataclasses.replace(self, failed_nodes_in_wave=self.failed_nodes_in_wave | {node})

    def new_wave(self) -> SweepCounters:
        return dataclasses.replace(self, failed_nodes_in_wave=frozenset())


@dataclass(frozen=True)
class Decision:
    """What to do, why, and (for STOP) the sentence for the STOP message's `Reason:` line."""

    action: Remedy
    reason: str
    stop_reason: str = ""
    wait_s: float = 0.0
    retry: int = 0  # which retry of the item this is, when the action retries
    failing_nodes: tuple[str, ...] = ()
    recovery: str = ""  # to run before the retry; for STOP, what was tried


def incident(failure: FailureClass, reason: str, node: str | None = None) -> Diagnosis:
    """A Diagnosis for what no log shows: a drained node, an unreachable controller."""
    return Diagnosis(failure, Verdict.FAILED, reason, node=node)


def decide(
    history: Sequence[FailureClass | Diagnosis],
    diagnosis: Diagnosis,
    counters: SweepCounters | None = None,
    playbook: Playbook = DEFAULT_PLAYBOOK,
) -> Decision:
    """The playbook's answer to one diagnosed attempt, given the item's earlier attempts."""
    counters = counters or SweepCounters()
    failure, rule, node = diagnosis.failure, playbook.rule(diagnosis.failure), diagnosis.node
    past = [a.failure if isinstance(a, Diagnosis) else a for a in history]
    past = [c for c in past if playbook.rule(c).retries is not None]  # sweep incidents are no attempts
    since = past[len(past) - next((i for i, c in enumerate(reversed(past)) if _success(c)), len(past)) :]
    streak = 1 + next((i for i, c in enumerate(reversed(since)) if c is not failure), len(since))
    nodes = (node,) if node else ()
    stop = _stop(playbook, rule, diagnosis, counters, streak)
    if stop:
        return Decision(
            Remedy.STOP,
            f"{stop} ({diagnosis.reason})" if diagnosis.reason else stop,
            stop_reason=stop,
            failing_nodes=_failing(counters, diagnosis),
            recovery=rule.recovery,
        )
    if rule.action is Remedy.STOP:  # e.g. a full disk: every later job would fail the same way
        why = f"{failure.value}: {diagnosis.reason}" if diagnosis.reason else failure.value
        return Decision(Remedy.STOP, why, stop_reason=why, failing_nodes=nodes, recovery=rule.recovery)
    if rule.action not in _RETRYING:
        return Decision(rule.action, _final_reason(rule.action, diagnosis), failing_nodes=nodes)
    if rule.retries is not None:
        if streak > rule.retries:
            why = f"{streak} × {failure.value} in a row on this item, {rule.retries} retries spent"
            return _give_up(rule.exhausted, f"{why}: {diagnosis.reason}", why, nodes)
        if len(since) >= max(playbook.max_retries_per_job, rule.retries):
            seen = ", ".join(c.value for c in [*since, failure])
            why = f"retry budget spent: {len(since)} retries of this job already ({seen})"
            return _give_up(Remedy.FAIL_ITEM, why, why, nodes)
    verb = {
        Remedy.RETRY_SAME_NODELIST: "retry on the same nodelist",
        Remedy.RESUME_NODE_THEN_RETRY: f"RESUME {node or 'the node'}, then retry",
        Remedy.BACKOFF_RETRY: f"wait {rule.wait_s:g} s, then ask again",
    }[rule.action]
    return Decision(
        rule.action,
        f"{verb}: {diagnosis.reason}",
        wait_s=rule.wait_s,
        retry=len(since) + 1 if rule.retries is not None else 0,
        failing_nodes=nodes,
        recovery=rule.recovery,
    )


def _success(failure: FailureClass) -> bool:
    return failure in (FailureClass.SUCCESS, FailureClass.SOFT_SUCCESS)


def _stop(playbook: Playbook, rule: Rule, d: Diagnosis, counters: SweepCounters, streak: int) -> str:
    """The one-sentence reason to stop the sweep, or ""."""
    name, node = d.failure.value, d.node or "a pinned node"
    if rule.action is Remedy.RESUME_NODE_THEN_RETRY and not playbook.resume_permitted:
        return f"{node} needs a RESUME this session may not run, and the nodelist is never changed"
    if rule.recovery and counters.recovery_failed and rule.action is not Remedy.RESUME_NODE_THEN_RETRY:
        return f"{name} on {node}: recovery did not take ({counters.recovery_failed})"
    limit = rule.stop_after
    if rule.stop_on is StopOn.IN_A_ROW and limit is not None and streak >= limit:
        return f"{streak} × {name} in a row on the same profile: the cluster service may be sick"
    if rule.stop_on is StopOn.FAILED_RESUMES and limit is not None:
        resumes = counters.failed_resumes.get(d.node, 0) if d.node else max(counters.failed_resumes.values(), default=0)
        if resumes >= limit:
            return f"{node} stays drained/down after {resumes} RESUME attempts"
    if rule.stop_on is StopOn.DOWN_MINUTES and limit is not None and counters.controller_down_s > limit * 60:
        return (
            f"the Slurm controller has been unreachable for {counters.controller_down_s / 60:.0f} "
            f"min (limit {limit:g} min)"
        )
    if d.failure is FailureClass.NODE_FAIL:
        failed = counters.failed_nodes_in_wave | ({d.node} if d.node else set())
        if len(failed) > playbook.max_failed_nodes_per_wave:
            return f"{len(failed)} nodes failed in this wave ({', '.join(sorted(failed))}): a wider cluster problem"
    return ""


def _failing(counters: SweepCounters, d: Diagnosis) -> tuple[str, ...]:
    nodes = set(counters.failed_nodes_in_wave) if d.failure is FailureClass.NODE_FAIL else set()
    return tuple(sorted(nodes | ({d.node} if d.node else set())))


def _give_up(action: Remedy, reason: str, why: str, nodes: tuple[str, ...]) -> Decision:
    return Decision(action, reason, stop_reason=why if action is Remedy.STOP else "", failing_nodes=nodes)


def _final_reason(action: Remedy, d: Diagnosis) -> str:
    if action is Remedy.XFAIL_ITEM and d.failure is FailureClass.OOM:
        return f"{d.reason}; OOM is never retried (same flags, same OOM)"
    if action is Remedy.FAIL_ITEM and d.flag:
        return f"XLA does not know {d.flag}: drop it from the profile ({d.reason})"
    return d.reason or d.failure.value
