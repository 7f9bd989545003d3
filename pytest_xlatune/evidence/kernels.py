"""What a compiled module runs besides collectives: fusions by kind and library calls (pure).

Reads the same ``*after_optimizations.txt`` as evidence.hlo. On a GPU each fusion is one
kernel: ``kind=kLoop``/``kInput``/``kOutput`` fusions are kernels XLA emits itself, and a
``kind=kCustom`` fusion names its emitter in ``backend_config`` (``"kind":"__triton_gemm"``: a
Triton GEMM, ``__cudnn$fusion``: a cuDNN graph). Library calls are ``custom-call``s named by
their target (``__cublas$gemm``, ``__cublas$lt$matmul``, ``__cudnn$fmha...``) and ``fft`` ops
(cuFFT). On CPU the same module has fusions and no GPU libraries. Instructions inside a fusion's
body are not kernels of their own and are not counted.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

# One reading of the text's structure for both parsers: computation headers, instructions, ends.
from .hlo import _CLOSE_RE, _HEADER_RE, _INSTR_RE

__all__ = ["KernelInventory", "describe", "kernel_inventory", "library_of"]

# The shape (an array, or a tuple that may nest) then the opcode and its "(".
_OPCODE_RE = re.compile(r"^(?:\(.*?\)|\S+)\s+(?P<op>[a-z][a-z0-9-]*)\(")
_FUSION_KIND_RE = re.compile(r"\bkind=(k[A-Za-z]+)")
_CALLS_RE = re.compile(r"\b(?:calls|to_apply|body|condition)=%?([^\s,{}]+)")
_TARGET_RE = re.compile(r'\bcustom_call_target="([^"]+)"')
# A kCustom fusion's emitter: {"fusion_backend_config":{"kind":"__triton_gemm",...}} (newer) or
# {"kind":"__triton_gemm",...} (older XLA).
_BACKEND_KIND_RE = re.compile(r'"kind"\s*:\s*"([^"]+)"')
# Library by the prefix of a custom-call target or a kCustom fusion's kind.
_LIBRARIES = (
    ("__cublas$lt", "cuBLASLt"),
    ("__cublas", "cuBLAS"),
    ("__cudnn", "cuDNN"),
    ("__triton", "Triton"),
    ("__cufft", "cuFFT"),
    ("__nccl", "NCCL"),
)
_LIBRARY_OPCODES = {"fft": "cuFFT"}


@dataclass(frozen=True)
class KernelInventory:
    """Counts over the module's executed instructions (fusion bodies left out), largest first."""

    fusions: tuple[tuple[str, int], ...]  # fusion kind (kLoop, kInput, kOutput, kCustom) → count
    custom_fusions: tuple[tuple[str, int], ...]  # a kCustom fusion's emitter (__triton_gemm) → count
    custom_calls: tuple[tuple[str, int], ...]  # custom-call target (__cublas$gemm) → count
    library_ops: tuple[tuple[str, int], ...] = ()  # ops a library runs by opcode (fft) → count

    @property
    def fusion_count(self) -> int:
        return sum(n for _, n in self.fusions)

    def by_library(self) -> tuple[tuple[str, int], ...]:
        """Kernels per library (cuBLAS, cuBLASLt, cuDNN, Triton, cuFFT), largest first."""
        counts: Counter[str] = Counter()
        for name, n in (*self.custom_calls, *self.custom_fusions, *self.library_ops):
            library = library_of(name)
            if library:
                counts[library] += n
        return _ranked(counts)


def library_of(name: str) -> str | None:
    """The library behind a custom-call target, a kCustom fusion's kind or an opcode, else None."""
    if name in _LIBRARY_OPCODES:
        return _LIBRARY_OPCODES[name]
    return next((library for prefix, library in _LIBRARIES if name.startswith(prefix)), None)


@dataclass(frozen=True)
class _Instr:
    computation: str
    opcode: str
    text: str  # everything after the shape


def _instructions(hlo_text: str) -> Iterator[_Instr]:
    """Every instruction with its computation; a line that starts no instruction continues the last."""
    current: str | None = None
    pending: tuple[str, str] | None = None

    def flush() -> _Instr | None:
        if pending is None:
            return None
        match = _OPCODE_RE.match(pending[1])
        return _Instr(pending[0], match.group("op"), pending[1][match.end("op") :]) if match else None

    for raw in hlo_text.splitlines():
        line = raw.rstrip()
        if current is None:
            header = _HEADER_RE.match(line)
            if header and line.endswith("{") and not line.startswith("HloModule"):
                current = header.group("name")
            continue
        if match := _INSTR_RE.match(line):
            if instr := flush():
                yield instr
            pending = (current, match.group("rest"))
        elif _CLOSE_RE.match(line):
            if instr := flush():
                yield instr
            current, pending = None, None
        elif pending is not None and line.strip():
            pending = (pending[0], f"{pending[1]} {line.strip()}")
    if instr := flush():  # a truncated dump: keep what was read
        yield instr


def _fusion_bodies(instrs: list[_Instr]) -> set[str]:
    """Computations that run inside a fusion's kernel: its `calls=` and all they call in turn."""
    calls: dict[str, set[str]] = {}
    for instr in instrs:
        calls.setdefault(instr.computation, set()).update(_CALLS_RE.findall(instr.text))
    todo = [c for i in instrs if i.opcode == "fusion" for c in _CALLS_RE.findall(i.text)]
    bodies: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in bodies:
            bodies.add(name)
            todo.extend(calls.get(name, ()))
    return bodies


def _ranked(counts: Counter[str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def kernel_inventory(hlo_text: str) -> KernelInventory:
    """Fusions by kind, kCustom emitters, custom-call targets and library ops of a compiled module."""
    instrs = list(_instructions(hlo_text))
    bodies = _fusion_bodies(instrs)
    fusions: Counter[str] = Counter()
    custom: Counter[str] = Counter()
    targets: Counter[str] = Counter()
    library_ops: Counter[str] = Counter()
    for instr in (i for i in instrs if i.computation not in bodies):
        if instr.opcode == "fusion":
            kind = _FUSION_KIND_RE.search(instr.text)
            fusions[kind.group(1) if kind else "unknown"] += 1
            if kind and kind.group(1) == "kCustom":
                emitter = _BACKEND_KIND_RE.search(instr.text)
                custom[emitter.group(1) if emitter else "unknown"] += 1
        elif instr.opcode == "custom-call":
            target = _TARGET_RE.search(instr.text)
            targets[target.group(1) if target else "unknown"] += 1
        elif instr.opcode in _LIBRARY_OPCODES:
            library_ops[instr.opcode] += 1
    return KernelInventory(_ranked(fusions), _ranked(custom), _ranked(targets), _ranked(library_ops))


def _pairs(pairs: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{name} {n}" for name, n in pairs)


def describe(found: KernelInventory) -> str:
    """One line: fusions by kind, then the kernels each library runs, with their targets."""
    parts = [f"{found.fusion_count} fusions ({_pairs(found.fusions)})" if found.fusions else "no fusions"]
    libraries = found.by_library()
    if libraries:
        parts.append("library kernels: " + _pairs(libraries))
    named = (*found.custom_calls, *found.custom_fusions)
    if named:
        parts.append("by target: " + _pairs(named))
    return "; ".join(parts)
