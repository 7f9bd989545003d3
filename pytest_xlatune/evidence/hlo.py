"""Collective ops in compiled HLO text: what runs, how big, sync or async, inside a loop or not.

Reads the ``*after_optimizations.txt`` module XLA writes with
``--xla_dump_to=DIR --xla_dump_hlo_as_text``. The module is scheduled (``is_scheduled=true``),
so the order of a computation's instructions is the order they run in.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum

__all__ = ["TRAIN_STEP_DUMP_RE", "Collective", "Kind", "collectives", "find_train_step_dump"]


class Kind(Enum):
    """A collective op, named by its HLO opcode."""

    ALL_GATHER = "all-gather"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_REDUCE = "all-reduce"
    COLLECTIVE_PERMUTE = "collective-permute"
    ALL_TO_ALL = "all-to-all"
    RAGGED_ALL_TO_ALL = "ragged-all-to-all"
    COLLECTIVE_BROADCAST = "collective-broadcast"
    # The collective-permute decomposer (PP on GPU) turns collective-permute into these.
    SEND = "send"
    RECV = "recv"


@dataclass(frozen=True)
class Collective:
    """One collective op as it runs: a sync instruction, or one ``-start`` of an async pair."""

    name: str
    kind: Kind
    computation: str
    line: int  # 1-based line of the instruction (the -start for async ops)
    bytes: int  # result size; for async ops the -done's result
    shape: str
    async_form: bool  # written as -start/-done (or async-start/async-done)
    marked_sync: bool = False  # backend_config says is_sync=true: start/done, but run blocking
    done: str | None = None  # the -done in the same computation, if any
    scheduled_between: int | None = None  # instructions between -start and -done
    crosses_iteration: bool = False  # -start and -done in different computations (loop carry)
    in_loop: bool = False  # the computation is a while body/condition or called from one
    while_body: str | None = None  # the innermost while body that reaches the computation
    frontend_attributes: dict[str, str] = field(default_factory=dict, hash=False)
    replica_groups: str | None = None
    source_target_pairs: str | None = None
    channel_id: int | None = None

    @property
    def is_async(self) -> bool:
        """Launched and awaited separately, so other work can overlap it."""
        return self.async_form and not self.marked_sync


# --- parsing ----------------------------------------------------------------------------------

# The train step's optimized module (not its -buffer-assignment, -live-range … side files).
TRAIN_STEP_DUMP_RE = re.compile(r"(?:^|\.)p?jit_train_step\.(?:.*[._-])?after_optimizations\.txt$")
# The shape after "=" tells an instruction from a continued attribute line ("  calls=%f").
_INSTR_RE = re.compile(r"^\s+(?:ROOT\s+)?%?(?P<name>[^\s=]+)\s*=\s*(?P<rest>(?:\(|[a-z][a-z0-9]*\[).*)$")
_HEADER_RE = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[^\s(]+)")
_CLOSE_RE = re.compile(r"^\s*\}\s*(?:,.*)?$")
_INDEX_COMMENT_RE = re.compile(r"/\*[^*]*\*/")
_OPCODE_RE = re.compile(r"([a-z][\w-]*)\(")
_ARRAY_RE = re.compile(r"\b([a-z]+\d*[a-z0-9]*)\[([^\]]*)\]")
# Computations an instruction runs, read off the raw text so only collectives need a full parse.
_CALLS_RE = re.compile(
    r"\b(calls|to_apply|body|condition|true_computation|false_computation)=%?([^\s,{}]+)"
    r"|\b(branch_computations)=\{([^}]*)\}"
)
_IS_SYNC_RE = re.compile(r'"is_sync"\s*:\s*true')
_BITS = {
    "pred": 8,
    "s1": 1,
    "u1": 1,
    "s2": 2,
    "u2": 2,
    "s4": 4,
    "u4": 4,
    "s8": 8,
    "u8": 8,
    "s16": 16,
    "u16": 16,
    "f16": 16,
    "bf16": 16,
    "s32": 32,
    "u32": 32,
    "f32": 32,
    "s64": 64,
    "u64": 64,
    "f64": 64,
    "c64": 64,
    "c128": 128,
    "token": 0,
    "opaque": 0,
}
_KINDS = {k.value: k for k in Kind}
_OPEN, _CLOSE = "([{", ")]}"


@dataclass(frozen=True)
class _Instr:
    name: str
    shape: str
    opcode: str
    operands: tuple[str, ...]
    attrs: dict[str, str]  # parsed only for collectives, their -start/-done and while
    line: int
    calls: tuple[tuple[str, str], ...] = ()  # (attribute, computation), e.g. ("body", "region_0")


@dataclass
class _Computation:
    name: str
    instrs: list[_Instr] = field(default_factory=list)


def _depths(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """Yield (index, char, bracket depth after it) for each char outside double quotes."""
    depth, quoted, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if quoted:
            escaped, quoted = (False, True) if escaped else (ch == "\\", ch != '"')
            continue
        if ch == '"':
            quoted = True
            continue
        depth += (ch in _OPEN) - (ch in _CLOSE)
        yield i, ch, depth


def _bracket_end(text: str, start: int) -> int:
    """Index just past the bracket group opening at ``start``."""
    return next((i + 1 for i, ch, d in _depths(text, start) if d == 0 and ch in _CLOSE), len(text))


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and quotes; drop empty parts."""
    parts, last = [], 0
    for i, ch, depth in _depths(text):
        if ch == sep and depth == 0:
            parts.append(text[last:i].strip())
            last = i + 1
    parts.append(text[last:].strip())
    return [p for p in parts if p]


def _parse_instr(name: str, rest: str, line: int) -> _Instr | None:
    """Split ``SHAPE opcode(operands), key=value, ...`` into its parts."""
    rest = _INDEX_COMMENT_RE.sub("", rest)
    # An array shape never holds a space: f32[8,128]{1,0:T(8,128)}.
    end = _bracket_end(rest, 0) if rest.startswith("(") else len(rest.split(None, 1)[0])
    shape, tail = rest[:end], rest[end:].lstrip()
    match = _OPCODE_RE.match(tail)
    if match is None:
        return None
    opcode = match.group(1)
    calls = tuple((m[0] or m[2], c) for m in _CALLS_RE.findall(tail) for c in _names(m[1] or m[3]))
    if not _interesting(opcode):
        return _Instr(name, shape, opcode, (), {}, line, calls)
    close = _bracket_end(tail, match.end() - 1)
    operands = tuple(op.split()[-1].lstrip("%") for op in _split_top(tail[match.end() : close - 1]))
    attrs: dict[str, str] = {}
    for part in _split_top(tail[close:].lstrip(", ")):
        key, _, value = part.partition("=")
        attrs[key.strip()] = value.strip()
    return _Instr(name, shape, opcode, operands, attrs, line, calls)


def _names(text: str) -> list[str]:
    return [n.strip().lstrip("%") for n in text.split(",") if n.strip()]


def _interesting(opcode: str) -> bool:
    return opcode in _KINDS or opcode == "while" or opcode.endswith(("-start", "-update", "-done"))


def _computations(hlo_text: str) -> list[_Computation]:
    """Computations in text order; a line that starts no instruction continues the last one."""
    comps: list[_Computation] = []
    current: _Computation | None = None
    pending: tuple[str, str, int] | None = None

    def flush() -> None:
        nonlocal pending
        if pending is not None and current is not None:
            instr = _parse_instr(*pending)
            if instr is not None:
                current.instrs.append(instr)
        pending = None

    for number, raw in enumerate(hlo_text.splitlines(), 1):
        line = raw.rstrip()
        if current is None:
            header = _HEADER_RE.match(line)
            if header and line.endswith("{") and not line.startswith("HloModule"):
                current = _Computation(header.group("name"))
            continue
        instr = _INSTR_RE.match(line)
        if instr:
            flush()
            pending = (instr.group("name"), instr.group("rest"), number)
        elif _CLOSE_RE.match(line):
            flush()
            comps.append(current)
            current = None
        elif pending is not None and line.strip():
            pending = (pending[0], f"{pending[1]} {line.strip()}", pending[2])
    if current is not None:  # a truncated dump: keep what was read
        flush()
        comps.append(current)
    return comps


def _callees(instr: _Instr, key: str | None = None) -> list[str]:
    return [name for attr, name in instr.calls if key in (None, attr)]


def _loops(comps: list[_Computation]) -> dict[str, str]:
    """Map each computation run inside a while loop to the innermost while body that reaches it."""
    calls = {c.name: {callee for i in c.instrs for callee in _callees(i)} for c in comps}
    bodies: list[tuple[str, set[str]]] = []
    for instr in (i for c in comps for i in c.instrs if i.opcode == "while"):
        heads = _callees(instr, "body")[:1]
        seen: set[str] = set()
        todo = heads + _callees(instr, "condition")[:1]
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(calls.get(name, ()))
        if heads:
            bodies.append((heads[0], seen))
    inner: dict[str, str] = {}
    for body, reach in sorted(bodies, key=lambda b: -len(b[1])):  # smaller reach = more inner
        inner.update(dict.fromkeys(reach, body))
    return inner


def _bytes(shape: str) -> int:
    """Bytes of every array in a (possibly nested tuple) shape."""
    bits = 0
    for dtype, dims in _ARRAY_RE.findall(shape):
        width = _BITS.get(dtype, 8 if dtype.startswith("f8") else 4 if dtype.startswith("f4") else 0)
        sizes = (d.strip().removeprefix("<=") for d in dims.split(","))  # <=N: a dynamic dim's bound
        bits += width * math.prod(int(d) for d in sizes if d.isdigit())
    return (bits + 7) // 8


def _frontend_attributes(text: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in _split_top((text or "").strip().removeprefix("{").removesuffix("}")):
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip().strip('"')
    return out


def _kind(instr: _Instr, wrapped: dict[str, _Instr]) -> tuple[Kind, _Instr, bool] | None:
    """Kind, attribute-carrying instruction and async form of a collective-launching instruction."""
    if instr.opcode == "async-start":
        inner = next((wrapped[c] for c in _callees(instr) if c in wrapped), None)
        return (_KINDS[inner.opcode], inner, True) if inner else None
    if instr.opcode in _KINDS:  # send and recv are always paired with a -done
        kind = _KINDS[instr.opcode]
        return kind, instr, kind in (Kind.SEND, Kind.RECV)
    base = instr.opcode.removesuffix("-start")
    return (_KINDS[base], instr, True) if instr.opcode.endswith("-start") and base in _KINDS else None


def _wrapped(comps: list[_Computation]) -> dict[str, _Instr]:
    """Map each computation an async-start runs to the collective inside it."""
    by_name = {c.name: c for c in comps}
    out: dict[str, _Instr] = {}
    for instr in (i for c in comps for i in c.instrs if i.opcode == "async-start"):
        for callee in _callees(instr):
            inner = [i for i in (by_name[callee].instrs if callee in by_name else ()) if i.opcode in _KINDS]
            if inner:
                out[callee] = inner[-1]
    return out


def collectives(hlo_text: str) -> list[Collective]:
    """Every collective op in an HLO module, in text order; an async pair is one op."""
    comps = _computations(hlo_text)
    loops, wrapped = _loops(comps), _wrapped(comps)
    found: list[Collective] = []
    for comp in comps:
        if comp.name in wrapped:
            continue  # counted at its async-start
        position = {i.name: n for n, i in enumerate(comp.instrs)}
        follower = {  # start -> update -> done, each naming the one before as its operand
            i.operands[0]: i for i in comp.instrs if i.opcode.endswith(("-update", "-done")) and i.operands
        }
        for instr in comp.instrs:
            launched = _kind(instr, wrapped)
            if launched is None:
                continue
            kind, carrier, async_form = launched
            done = follower.get(instr.name) if async_form else None
            while done is not None and not done.opcode.endswith("-done"):
                done = follower.get(done.name)
            out = _output_shape(instr, kind, done) if async_form else instr.shape
            attrs = {
                **_frontend_attributes(carrier.attrs.get("frontend_attributes")),
                **_frontend_attributes(instr.attrs.get("frontend_attributes")),
            }
            found.append(
                Collective(
                    name=instr.name,
                    kind=kind,
                    computation=comp.name,
                    line=instr.line,
                    bytes=_bytes(out),
                    shape=out,
                    async_form=async_form,
                    marked_sync=async_form and bool(_IS_SYNC_RE.search(instr.attrs.get("backend_config", ""))),
                    done=done.name if done else None,
                    scheduled_between=position[done.name] - position[instr.name] - 1 if done else None,
                    crosses_iteration=async_form and done is None,
                    in_loop=comp.name in loops,
                    while_body=loops.get(comp.name),
                    frontend_attributes=attrs,
                    replica_groups=carrier.attrs.get("replica_groups"),
                    source_target_pairs=carrier.attrs.get("source_target_pairs"),
                    channel_id=_int(carrier.attrs.get("channel_id") or instr.attrs.get("channel_id")),
                )
            )
    return found


def _output_shape(start: _Instr, kind: Kind, done: _Instr | None) -> str:
    """What an async op delivers: the -done's result, else read off the -start's tuple."""
    if kind in (Kind.SEND, Kind.RECV):  # (data, context, token): data is what moves
        return _split_top(start.shape[1:-1])[0] if start.shape.startswith("(") else start.shape
    if done is not None:
        return done.shape
    if not start.shape.startswith("(") or (kind is Kind.ALL_REDUCE and start.opcode != "async-start"):
        return start.shape  # all-reduce-start's result is its output
    parts = _split_top(start.shape[1:-1])  # (operands, outputs[, context...])
    return parts[1] if len(parts) > 1 else start.shape


def _int(text: str | None) -> int | None:
    return int(text) if text and text.strip().isdigit() else None


def find_train_step_dump(paths: Iterable[str], size: Callable[[str], int] | None = None) -> str | None:
    """Pick the train-step module's after-optimizations text: the largest, if several
    (`size` of a path; default: its size on this machine)."""

    def local_size(path: str) -> int:
        try:
            return os.path.getsize(path)
        except OSError:
            return -1

    hits = [p for p in paths if TRAIN_STEP_DUMP_RE.search(os.path.basename(p))]
    return max(sorted(hits), key=size or local_size, default=None)
