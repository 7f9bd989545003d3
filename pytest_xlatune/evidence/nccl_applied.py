"""Did a requested NCCL/RCCL setting take effect? Read from the library's own debug lines (pure).

NCCL accepts ``NCCL_ALGO``/``NCCL_PROTO`` values it does not know without an error: an unknown
token is dropped and the library tunes as it likes. Its ``INFO`` lines (``NCCL_DEBUG=INFO``,
``NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING``) say what it did instead: the environment echo
(``NCCL_PROTO set by environment to Simple``), the tuning table (a bandwidth of 0 for every
algorithm/protocol pair it will not use), the per-size choice (``… Bytes -> Algo 1 proto 2``)
and the channel counts (``8 coll channels, …``, ``Channel 07/08 : …``). A run whose requested
setting left no such trace, or whose trace contradicts it, is *not applied*: its TGS says nothing
about the setting, so it is never reported as "within noise".
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "ALGORITHMS",
    "CHECKED",
    "PROTOCOLS",
    "Applied",
    "Finding",
    "Trace",
    "debug_env",
    "not_applied",
    "read_trace",
    "requests_checked",
    "took_effect",
]

# nccl_common.h order: the numbers in "Bytes -> Algo A proto P" index these tuples.
ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOCOLS = ("LL", "LL128", "Simple")
CHECKED = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_NCHANNELS_PER_NET_PEER")
DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING"}

_INFO = re.compile(r"\b[NR]CCL (?:INFO|TRACE)\b")
_ECHO = re.compile(r"\b[NR]CCL INFO (NCCL_[A-Z0-9_]+) set by environment to (\S+?)\.?\s*$")
_CHOICE = re.compile(r"\bBytes -> Algo (\d+) proto (\d+)\b")
_COLL_CHANNELS = re.compile(r"\b(\d+) coll channels\b")
# A ring line `Channel 05/16 :    0   7   6 …` names its communicator's channel count; a connection
# line `Channel 05/1 : 0[0] -> 1[1] via P2P/IPC` names a connection index, not a count.
_CHANNEL = re.compile(r"\bChannel \d+/(\d+) ?:(?!\s*\d+\[)")
_OLD_HEADER = re.compile(r"Latency/AlgBw \|(.*)$")  # "Tree/    LL |    Tree/ LL128 | …"
_ALGO_ROW = re.compile(r"\bAlgorithm +\|(.*)$")  # newer NCCL: algorithms on one row …
_PROTO_ROW = re.compile(r"\bProtocol +\|(.*)$")  # … and protocols on the next
_DATA_ROW = re.compile(r"[NR]CCL INFO +([A-Za-z]+) \|((?: *[\d.]+/ *[\d.]+ \|)+)")
_CELL = re.compile(r"([\d.]+)/ *([\d.]+)")
_TABLE_FUNCTIONS = frozenset({"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"})


class Applied(enum.Enum):
    """What the library's debug lines say about one requested setting."""

    APPLIED = "applied"
    NOT_APPLIED = "not applied"
    UNKNOWN = "unknown"  # the run printed no library INFO lines: its debug level was too low


@dataclass(frozen=True)
class Finding:
    """One requested setting and what its run's debug lines show."""

    name: str
    value: str
    applied: Applied
    reason: str


@dataclass(frozen=True)
class Trace:
    """What one run's library debug lines say (see ``read_trace``)."""

    info_lines: int
    echoed: Mapping[str, str]
    enabled: frozenset[tuple[str, str]] | None  # (algorithm, protocol) pairs with bandwidth > 0
    chosen: frozenset[tuple[str, str]]  # pairs picked for some size
    coll_channels: int | None  # the most channels any communicator uses
    # Each communicator's count (a job has one per replica group: an intra-node one may use 24,
    # an inter-node one 8): a maximum holds when the largest is within it, a minimum when the smallest.
    channel_counts: frozenset[int] = frozenset()


def _header_pairs(line: str, header: re.Match[str], pending_algos: list[str] | None) -> list[tuple[str, str]] | None:
    if header.re is _OLD_HEADER:
        pairs = []
        for cell in header.group(1).split("|"):
            algo, _, proto = cell.strip().partition("/")
            if algo:
                pairs.append((algo.strip(), proto.strip()))
        return pairs
    if pending_algos is None:
        return None
    protos = [cell.strip() for cell in header.group(1).split("|") if cell.strip()]
    per_algo = len(protos) // max(1, len(pending_algos))
    return [(pending_algos[i // per_algo] if per_algo else "", proto) for i, proto in enumerate(protos)]


def read_trace(text: str | Iterable[str]) -> Trace:
    """Collect the environment echoes, tuning table, per-size choices and channel counts."""
    lines = text.splitlines() if isinstance(text, str) else text
    info = 0
    echoed: dict[str, str] = {}
    columns: list[tuple[str, str]] | None = None
    algos: list[str] | None = None
    enabled: set[tuple[str, str]] | None = None
    chosen: set[tuple[str, str]] = set()
    counts: set[int] = set()
    for line in lines:
        if not _INFO.search(line):
            continue
        info += 1
        if m := _ECHO.search(line):
            echoed[m.group(1)] = m.group(2)
        elif m := _CHOICE.search(line):
            a, p = int(m.group(1)), int(m.group(2))
            if a < len(ALGORITHMS) and p < len(PROTOCOLS):
                chosen.add((ALGORITHMS[a], PROTOCOLS[p]))
        elif m := (_COLL_CHANNELS.search(line) or _CHANNEL.search(line)):
            counts.add(int(m.group(1)))
        elif m := _ALGO_ROW.search(line):
            algos = [cell.strip() for cell in m.group(1).split("|") if cell.strip()]
        elif m := (_OLD_HEADER.search(line) or _PROTO_ROW.search(line)):
            columns = _header_pairs(line, m, algos)
        elif columns and (m := _DATA_ROW.search(line)) and m.group(1) in _TABLE_FUNCTIONS:
            enabled = enabled if enabled is not None else set()
            for pair, cell in zip(columns, _CELL.findall(m.group(2)), strict=False):
                if float(cell[1]) > 0:
                    enabled.add(pair)
    coll = max(counts, default=None)
    return Trace(
        info, echoed, None if enabled is None else frozenset(enabled), frozenset(chosen), coll, frozenset(counts)
    )


def _canonical(token: str, names: tuple[str, ...]) -> str | None:
    for name in names:
        if token.strip().lower() == name.lower():
            return name
    return None


def _allowed(value: str, names: tuple[str, ...]) -> tuple[frozenset[str], list[str]]:
    """NCCL's parseList: ``A,B`` enables those, ``^A,B`` all but those; ``func:list`` per collective."""
    spec = value.split(";", maxsplit=1)[0].rsplit(":", maxsplit=1)[-1]  # a per-collective list: judge its (first) list
    negate = spec.startswith("^")
    tokens = [t for t in spec.lstrip("^").split(",") if t.strip()]
    known = {c for t in tokens if (c := _canonical(t, names))}
    unknown = [t for t in tokens if _canonical(t, names) is None]
    return frozenset(set(names) - known if negate else known), unknown


def _list_finding(name: str, value: str, trace: Trace, index: int, names: tuple[str, ...]) -> Finding:
    what = "algorithm" if index == 0 else "protocol"
    allowed, unknown = _allowed(value, names)
    if unknown:
        return Finding(
            name,
            value,
            Applied.NOT_APPLIED,
            f"unknown {what} {', '.join(repr(u) for u in unknown)}: NCCL drops it without an error",
        )
    if trace.chosen:
        other = sorted({pair[index] for pair in trace.chosen} - allowed)
        if other:
            return Finding(name, value, Applied.NOT_APPLIED, f"the library chose {what} {', '.join(other)}")
        return Finding(name, value, Applied.APPLIED, f"every logged choice used {'/'.join(sorted(allowed))}")
    if trace.enabled is not None:
        other = sorted({pair[index] for pair in trace.enabled} - allowed)
        if other:
            return Finding(
                name, value, Applied.NOT_APPLIED, f"the tuning table still gives {what} {', '.join(other)} a bandwidth"
            )
        if not trace.enabled:
            return Finding(name, value, Applied.NOT_APPLIED, "the tuning table enables no pair at all")
        return Finding(name, value, Applied.APPLIED, f"the tuning table enables only {'/'.join(sorted(allowed))}")
    if name in trace.echoed:
        return Finding(
            name,
            value,
            Applied.UNKNOWN,
            "echoed by the library but no tuning trace: set NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING",
        )
    return Finding(name, value, Applied.NOT_APPLIED, "the library's debug lines never mention it")


def _channel_finding(name: str, value: str, trace: Trace) -> Finding:
    try:
        wanted = int(value)
    except ValueError:
        return Finding(name, value, Applied.NOT_APPLIED, f"{value!r} is not a whole number")
    if name == "NCCL_NCHANNELS_PER_NET_PEER" or trace.coll_channels is None:
        if trace.echoed.get(name) == value:
            return Finding(name, value, Applied.APPLIED, "echoed by the library with this value")
        return Finding(name, value, Applied.NOT_APPLIED, "the library's debug lines never mention it")
    counts = trace.channel_counts or frozenset({trace.coll_channels})
    have = min(counts) if name == "NCCL_MIN_NCHANNELS" else max(counts)
    ok = have >= wanted if name == "NCCL_MIN_NCHANNELS" else have <= wanted
    many = len(counts) > 1
    reason = f"{'a' if many else 'the'} communicator uses {have} channels" + (
        f" (its communicators use {', '.join(map(str, sorted(counts)))})" if many else ""
    )
    return Finding(name, value, Applied.APPLIED if ok else Applied.NOT_APPLIED, reason)


def took_effect(requested: Mapping[str, str], trace: Trace) -> list[Finding]:
    """One finding per checked setting in ``requested`` (other names are not judged here)."""
    findings = []
    for name, value in requested.items():
        if name not in CHECKED:
            continue
        if trace.info_lines == 0:
            findings.append(
                Finding(name, value, Applied.UNKNOWN, "no library INFO lines: the run needs NCCL_DEBUG=INFO")
            )
        elif name == "NCCL_ALGO":
            findings.append(_list_finding(name, value, trace, 0, ALGORITHMS))
        elif name == "NCCL_PROTO":
            findings.append(_list_finding(name, value, trace, 1, PROTOCOLS))
        else:
            findings.append(_channel_finding(name, value, trace))
    return findings


def requests_checked(env: Iterable[tuple[str, str]]) -> bool:
    """The run sets a library setting whose effect its debug lines can show."""
    return any(name in CHECKED for name, _ in env)


def debug_env(env: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """What a run that sets a checked setting adds to its environment so that its debug lines
    show the effect (nothing the run sets itself is overridden)."""
    pairs = tuple(env)
    if not requests_checked(pairs):
        return ()
    have = {name for name, _ in pairs}
    return tuple((name, value) for name, value in DEBUG_ENV.items() if name not in have)


def not_applied(env: Iterable[tuple[str, str]], lines: Iterable[str]) -> str:
    """Why a run's requested settings did not take effect ("" when they did, or when it set none,
    or its debug lines are too few to say: UNKNOWN is never a verdict)."""
    requested = {name: value for name, value in env if name in CHECKED}
    if not requested:
        return ""
    findings = took_effect(requested, read_trace(lines))
    return "; ".join(f"{f.name}={f.value}: {f.reason}" for f in findings if f.applied is Applied.NOT_APPLIED)
