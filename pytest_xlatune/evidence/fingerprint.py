"""A fingerprint of the compiled train step: equal fingerprints mean the same program ran.

XLA writes, with ``--xla_dump_to=DIR --xla_dump_hlo_as_text --xla_dump_hlo_module_re=train_step``,
the optimized HLO module (``*after_optimizations.txt``) and the backend's generated code: the
optimized LLVM IR of every kernel (``*.ir-with-opt.ll``, CPU and GPU) and, on GPU, the PTX.

The optimized HLO alone is not the program: code-generation flags act below it. Measured on the
embedded workload (XLA:CPU, jax 0.10): ``--xla_backend_optimization_level=1`` leaves the
optimized HLO byte-identical to the baseline's and changes the IR of 155 of 164 kernels. So a
fingerprint with no generated code in it never makes a flag "inert" (``Fingerprint.complete``).

Canonical forms drop what changes between two compiles of the same program: HLO metadata
(source lines, op names), the source-location tables XLA writes after the ``HloModule`` line
(``FileNames``, ``FunctionNames``, ``FileLocations``, ``StackFrames``: the paths of the Python files
that traced the step, which name a per-job directory under maxtext-slurm, whose artifact copy of
``utils/`` is stamped with the second it started) and instruction names (renumbered by first
use); LLVM metadata (XLA:CPU
numbers it differently from one compile to the next) and the order in which a kernel loads its
arguments (the ``call.N_computation`` kernels list them in a different order each compile).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .hlo import TRAIN_STEP_DUMP_RE

__all__ = ["Fingerprint", "canonical_hlo", "canonical_ir", "fingerprint", "program_file", "read_dump"]

_HLO_METADATA = re.compile(r',\s*metadata=\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\}')
_HLO_NAME = re.compile(r"%[A-Za-z_][\w.\-]*")
_HLO_MODULE = re.compile(r"^HloModule [^\s,]+")
# Debug tables of the HLO text: a title line, then `<id> "…"` or `<id> {…}` rows up to a blank line.
_HLO_DEBUG_TABLES = frozenset({"FileNames", "FunctionNames", "FileLocations", "StackFrames"})
_IR_ATTACHMENT = re.compile(r", ![A-Za-z_.][\w.]* ![0-9]+")
_IR_ARG_LOAD = re.compile(r"^\s*%arg\d+(?:_gep)? = (?:getelementptr i8, ptr %args|load ptr, ptr %arg\d+_gep)\b")
_IR_ARG = re.compile(r"%arg\d+\b")
_MODULE_ID = re.compile(r"^module_\d+\.")
_CODE_FILE = re.compile(r"(?:\.ir-with-opt\.ll|\.ptx)$")


def canonical_hlo(text: str) -> str:
    """The optimized HLO without metadata and source tables, with instruction names renumbered
    by first use."""
    names: dict[str, str] = {}

    def rename(m: re.Match[str]) -> str:
        return names.setdefault(m.group(0), f"%v{len(names)}")

    lines = []
    in_table = False
    for raw in text.splitlines():
        line = _HLO_MODULE.sub("HloModule m", _HLO_METADATA.sub("", raw)).rstrip()
        if line in _HLO_DEBUG_TABLES:
            in_table = True
        elif not line:
            in_table = False
        elif not in_table:
            lines.append(_HLO_NAME.sub(rename, line))
    return "\n".join(lines)


def canonical_ir(text: str) -> str:
    """A kernel's LLVM IR without metadata, module ids and its argument-loading preamble."""
    lines = []
    for line in text.splitlines():
        if line.startswith(("!", "; ModuleID", "source_filename")) or _IR_ARG_LOAD.match(line):
            continue
        lines.append(_IR_ARG.sub("%arg", _IR_ATTACHMENT.sub("", line)).rstrip())
    return "\n".join(lines)


@dataclass(frozen=True)
class Fingerprint:
    """Digests of one compile's optimized HLO and generated code."""

    digest: str  # HLO and code together: what ``same_program`` compares
    hlo_digest: str
    code_files: int  # kernels (IR or PTX files) behind the digest

    @property
    def complete(self) -> bool:
        """The generated code is in it: without it, equal HLO proves nothing (see module doc)."""
        return self.code_files > 0 and self.hlo_digest != ""

    def same_program(self, other: Fingerprint) -> bool:
        """Both compiles produced the same program, generated code included."""
        return self.complete and other.complete and self.digest == other.digest


def _key(name: str) -> str:
    return _MODULE_ID.sub("", os.path.basename(name))


def fingerprint(files: Mapping[str, str]) -> Fingerprint:
    """Fingerprint a dump given as file name → text (names as XLA writes them)."""
    hlo = hashlib.sha256()
    code = hashlib.sha256()
    hlo_files = code_files = 0
    for name in sorted(files, key=_key):
        key = _key(name)
        if TRAIN_STEP_DUMP_RE.search(key):
            hlo.update(canonical_hlo(files[name]).encode())
            hlo_files += 1
        elif _CODE_FILE.search(key):
            code.update(key.encode() + b"\0" + canonical_ir(files[name]).encode())
            code_files += 1
    hlo_digest = hlo.hexdigest() if hlo_files else ""
    both = hashlib.sha256(f"{hlo_digest}:{code.hexdigest() if code_files else ''}".encode())
    return Fingerprint(both.hexdigest(), hlo_digest, code_files)


def program_file(name: str, module: str = "train_step") -> bool:
    """Whether a dump file is one a fingerprint reads: ``module``'s optimized HLO or generated code."""
    return module in name and bool(TRAIN_STEP_DUMP_RE.search(name) or _CODE_FILE.search(name))


def read_dump(directory: str, module: str = "train_step") -> dict[str, str]:
    """The text files of ``module`` in an XLA dump directory (object files and others left out)."""
    found = {}
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if program_file(entry.name, module) and entry.is_file(follow_symlinks=False):
            with open(entry.path, encoding="utf-8", errors="replace") as handle:
                found[entry.name] = handle.read()
    return found
