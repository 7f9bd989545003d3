"""Step-time breakdown of profiled train steps from a JAX trace (Chrome/Perfetto JSON; pure).

JAX's profiler writes ``<host>.trace.json.gz`` next to ``<host>.xplane.pb`` (and
``perfetto_trace.json.gz`` with ``create_perfetto_trace=True``). Every XLA op that runs is a
complete event (``"ph": "X"``) whose args name the op (``hlo_op``), its module (``hlo_module``),
the device (``device_ordinal``; else the event's ``pid``) and the execution (``run_id``): one
run of the train-step module is one profiled step; a run caught only partly at an edge of the
profile window (fewer than half the ops of the largest run) is left out. Ops nest (a ``while``
holds its body's ops).

An op is a collective by its HLO opcode, which the trace does not carry: given `op_kinds`
(instruction name → collective kind, from the same run's compiled HLO; see evidence.hlo), an op
is a collective exactly when its name is there; without it, the kind is guessed from the name
JAX gives the instruction (``all-gather.13``, ``ppermute.4``, ``psum.2``).

Per device and step, the step's wall span (first op start to last op end over all devices) is
split three ways: **collectives** (some collective op is running: on the CPU backend that is
the rendezvous wait plus the copy), **compute** (ops run, none of them a collective) and
**idle** (no op of the device runs). The three add up to the span. Top ops rank op names by
self time (duration minus the ops nested directly inside), per device per step.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import XlatuneError

__all__ = ["OpTime", "ProfileError", "ProfileSummary", "collective_kind", "summarize", "summarize_events"]

_COLLECTIVE = re.compile(
    r"^(all-gather|all-reduce|reduce-scatter|collective-permute|ragged-all-to-all|all-to-all|"
    r"collective-broadcast|send|recv|ppermute|psum|pmax|pmin|all_gather|reduce_scatter|all_to_all)"
    r"(?:-start|-done|-update)?(?:[.\-_]\d+)*$"
)
# JAX primitive names of collectives → the HLO opcode they lower to.
_PRIMITIVES = {
    "ppermute": "collective-permute",
    "psum": "all-reduce",
    "pmax": "all-reduce",
    "pmin": "all-reduce",
    "all_gather": "all-gather",
    "reduce_scatter": "reduce-scatter",
    "all_to_all": "all-to-all",
}
# NCCL/RCCL kernels on GPU traces carry no HLO opcode in their name.
_COMM_KERNEL = re.compile(r"nccl|rccl", re.I)
TOP_OPS = 8


class ProfileError(XlatuneError, ValueError):
    """The bytes are not a trace this module can read; the message says why, on one line."""


@dataclass(frozen=True)
class OpTime:
    """One op name's self time and calls, per device per profiled step."""

    name: str
    kind: str  # the collective kind ("all-gather", ...) or "compute"
    ms: float
    calls: float


@dataclass(frozen=True)
class ProfileSummary:
    """What the profiled steps spent their time on, per device per step (milliseconds)."""

    module: str
    steps: int
    devices: int
    step_ms: float
    compute_ms: float
    collective_ms: float
    idle_ms: float
    step_ms_each: tuple[float, ...]
    collective_ms_by_kind: tuple[tuple[str, float], ...]  # largest first
    top_ops: tuple[OpTime, ...]

    def share(self, part: str) -> float:
        """Fraction of the step spent in `part` (compute, collective or idle)."""
        value = {"compute": self.compute_ms, "collective": self.collective_ms, "idle": self.idle_ms}[part]
        return value / self.step_ms if self.step_ms else 0.0


def collective_kind(op_name: str, op_kinds: Mapping[str, str] | None = None) -> str | None:
    """The collective kind an op runs (``all-gather.13`` → ``all-gather``), else None."""
    if op_kinds:
        return op_kinds.get(op_name)
    match = _COLLECTIVE.match(op_name)
    if match:
        return _PRIMITIVES.get(match.group(1), match.group(1))
    return "collective" if _COMM_KERNEL.search(op_name) else None


def summarize(data: bytes | str, top: int = TOP_OPS, op_kinds: Mapping[str, str] | None = None) -> ProfileSummary:
    """Read a trace (gzip or plain JSON) and summarize its train-step executions."""
    if isinstance(data, bytes) and data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise ProfileError(f"not a readable gzip file ({error})") from None
    try:
        trace = json.loads(data)
    except ValueError as error:
        raise ProfileError(f"not JSON ({error})") from None
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    if not isinstance(events, list):
        raise ProfileError("no traceEvents list")
    return summarize_events(events, top, op_kinds)


@dataclass(frozen=True)
class _Op:
    name: str
    tid: Any
    device: str
    run: str
    start: float  # microseconds, as the trace writes them
    end: float


def _ops(events: Iterable[Any]) -> dict[str, list[_Op]]:
    """Complete events that name an HLO op, by module."""
    by_module: dict[str, list[_Op]] = defaultdict(list)
    for event in events:
        if not isinstance(event, Mapping) or event.get("ph") != "X":
            continue
        args = event.get("args") or {}
        name = args.get("hlo_op")
        if not name:
            continue
        start, dur = float(event.get("ts", 0.0)), float(event.get("dur", 0.0))
        device = str(args.get("device_ordinal", event.get("pid", "")))
        by_module[str(args.get("hlo_module", ""))].append(
            _Op(str(name), event.get("tid"), device, str(args.get("run_id", "")), start, start + dur)
        )
    return by_module


def _train_module(by_module: Mapping[str, list[_Op]]) -> str:
    """The train step's module: named so by JAX (jit_train_step), else the busiest one."""
    named = [m for m in by_module if "train_step" in m]
    pool = named or list(by_module)
    return max(pool, key=lambda m: sum(op.end - op.start for op in by_module[m]))


def _union(intervals: Iterable[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _self_times(ops: list[_Op]) -> list[float]:
    """Duration minus the ops nested directly inside, per op (nesting is per thread)."""
    order = sorted(range(len(ops)), key=lambda i: (ops[i].tid is None, str(ops[i].tid), ops[i].start, -ops[i].end))
    self_time = [op.end - op.start for op in ops]
    stack: list[int] = []
    last_tid: object = object()
    for i in order:
        op = ops[i]
        if op.tid != last_tid:
            stack, last_tid = [], op.tid
        while stack and ops[stack[-1]].end <= op.start:
            stack.pop()
        if stack:
            self_time[stack[-1]] -= op.end - op.start
        stack.append(i)
    return [max(t, 0.0) for t in self_time]


def summarize_events(
    events: Iterable[Any], top: int = TOP_OPS, op_kinds: Mapping[str, str] | None = None
) -> ProfileSummary:
    """Summarize the train-step executions among trace events (see the module docstring)."""
    by_module = _ops(events)
    if not by_module:
        raise ProfileError("no XLA op events (args.hlo_op) in the trace")
    module = _train_module(by_module)
    runs: dict[str, list[_Op]] = defaultdict(list)
    for op in by_module[module]:
        runs[op.run].append(op)
    largest = max(len(r) for r in runs.values())
    runs = {run: r for run, r in runs.items() if 2 * len(r) >= largest}
    ops = [op for r in runs.values() for op in r]

    def kind_of(name: str) -> str | None:
        return collective_kind(name, op_kinds)

    devices = sorted({op.device for op in ops})
    spans, compute, collective, idle = [], 0.0, 0.0, 0.0
    by_kind: dict[str, float] = defaultdict(float)
    for run_ops in sorted(runs.values(), key=lambda r: min(op.start for op in r)):
        first, last = min(op.start for op in run_ops), max(op.end for op in run_ops)
        spans.append(last - first)
        per_device: dict[str, list[_Op]] = defaultdict(list)
        for op in run_ops:
            per_device[op.device].append(op)
        for device in devices:
            mine = per_device.get(device, [])
            busy = _union((op.start, op.end) for op in mine)
            comm = _union((op.start, op.end) for op in mine if kind_of(op.name))
            collective += comm
            compute += busy - comm
            idle += (last - first) - busy
            kinds: dict[str, list[tuple[float, float]]] = defaultdict(list)
            for op in mine:
                if kind := kind_of(op.name):
                    kinds[kind].append((op.start, op.end))
            for kind, intervals in kinds.items():
                by_kind[kind] += _union(intervals)
    samples = len(runs) * len(devices)
    names: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for op, self_time in zip(ops, _self_times(ops)):
        names[op.name][0] += self_time
        names[op.name][1] += 1
    ranked = sorted(names.items(), key=lambda item: (-item[1][0], item[0]))[:top]
    ms = 1e-3 / samples  # the trace counts microseconds
    return ProfileSummary(
        module=module,
        steps=len(runs),
        devices=len(devices),
        step_ms=sum(spans) / len(spans) * 1e-3,
        compute_ms=compute * ms,
        collective_ms=collective * ms,
        idle_ms=idle * ms,
        step_ms_each=tuple(span * 1e-3 for span in spans),
        collective_ms_by_kind=tuple(sorted(((k, v * ms) for k, v in by_kind.items()), key=lambda kv: -kv[1])),
        top_ops=tuple(
            OpTime(name, kind_of(name) or "compute", total * ms, calls / samples) for name, (total, calls) in ranked
        ),
    )
