"""The pinned nodes before each job: every one usable, else scontrol RESUME it (never swap nodes)."""

from __future__ import annotations

from collections.abc import Callable

from .. import records
from ..launch.base import Launcher
from ..store import ResultStore
from ..triage.playbook import Playbook, Remedy, SweepCounters, decide, incident
from ..triage.signatures import FailureClass
from .watch import SweepStopped


def check_nodes(
    launcher: Launcher,
    store: ResultStore,
    counters: SweepCounters,
    playbook: Playbook,
    warn: Callable[[str], None],
    sleep: Callable[[float], None],
) -> SweepCounters:
    """Before each job: every pinned node usable, else RESUME it; the updated counters."""
    for node, state in launcher.unusable_nodes():
        decision = decide([], incident(FailureClass.NODE_DOWN, f"{node} is {state}", node), counters, playbook)
        if decision.action is Remedy.STOP:
            raise SweepStopped(decision.stop_reason or decision.reason, (node,), decision.recovery)
        counters = resume(launcher, store, (node,), counters, playbook, warn, sleep)
    return counters


def resume(
    launcher: Launcher,
    store: ResultStore,
    nodes: tuple[str, ...],
    counters: SweepCounters,
    playbook: Playbook,
    warn: Callable[[str], None],
    sleep: Callable[[float], None],
) -> SweepCounters:
    """scontrol RESUME the given pinned nodes (none named: every unusable one) and look
    again, until each is usable or its failed RESUMEs reach the playbook's limit (STOP)."""
    while True:
        unusable = dict(launcher.unusable_nodes())
        todo = [node for node in (nodes or tuple(unusable)) if node in unusable]
        if not todo:
            return counters
        for node in todo:
            warn(f"resuming node {node} ({unusable[node]})")
            launcher.resume_node(node)
        still = dict(launcher.unusable_nodes())
        if any(node in still for node in todo):  # give slurmctld a moment to show it
            sleep(playbook.rule(FailureClass.NODE_DOWN).wait_s)
            still = dict(launcher.unusable_nodes())
        for node in todo:
            store.write(records.NodeResume(node=node, was=unusable[node], now=still.get(node, "usable")))
            if node not in still:
                counters = counters.resume_took(node)
                continue
            counters = counters.resume_failed(node)
            decision = decide(
                [], incident(FailureClass.NODE_DOWN, f"{node} is {still[node]} after RESUME", node), counters, playbook
            )
            if decision.action is Remedy.STOP:
                raise SweepStopped(
                    decision.stop_reason or decision.reason, (node,), f"scontrol update NodeName={node} State=RESUME"
                )
