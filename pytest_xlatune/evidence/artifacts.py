"""Read an evidence run's artifacts from disk into RunEvidence and EvidenceFacts (the evidence package's only IO).

An evidence run's JobResult names its HLO dump directory (``hlo_dump``) and its profile
directory (``profile``). Paths are read on this machine: for a remote cluster they must be on a
shared file system, else the evidence says plainly that the artifact is not readable here.
Parsed results are cached by (path, size, mtime): collection, run time and the report all ask.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from ..results import JobResult
from . import hlo
from .collective_table import InventoryRow, inventory
from .kernels import KernelInventory, describe, kernel_inventory
from .profile import ProfileError, ProfileSummary, summarize

__all__ = [
    "EvidenceFacts",
    "RunEvidence",
    "evidence_facts",
    "find_trace",
    "load",
    "load_collectives",
    "op_kinds",
    "pick_trace",
]

# Preference order: xprof's per-host trace (what profile-drill reads), then the Perfetto one.
_TRACE_SUFFIXES = (".trace.json.gz", ".trace.json", "perfetto_trace.json.gz", "perfetto_trace.json")


@dataclass(frozen=True)
class EvidenceFacts:
    """What ordering needs from an evidence run: collective bytes by kind, and time split."""

    job_id: str
    bytes_by_kind: tuple[tuple[str, int], ...]  # kinds present in the train-step HLO
    compute_ms: float | None = None
    collective_ms: float | None = None

    @property
    def kinds_by_bytes(self) -> list[str]:
        return [k for k, _ in sorted(self.bytes_by_kind, key=lambda kv: -kv[1])]


@dataclass(frozen=True)
class RunEvidence:
    """What an evidence run's artifacts show; `problems` say what could not be read and why."""

    job_id: str
    item: str
    profile_name: str  # the run's profile ("evidence", or the winner it re-ran)
    tgs: float | None
    step_seconds: float | None
    hlo_path: str | None = None
    inventory: tuple[InventoryRow, ...] | None = None
    trace_path: str | None = None
    profile: ProfileSummary | None = None
    problems: tuple[str, ...] = ()
    kernels: KernelInventory | None = None  # fusions and library kernels of the same module

    @property
    def gpu_kernels(self) -> str:
        """One line on the GPU libraries the module calls (cuBLAS, Triton...); "" on CPU."""
        return describe(self.kernels) if self.kernels and self.kernels.by_library() else ""


def _files(directory: str) -> list[str]:
    found = []
    for root, _, names in os.walk(directory):
        found += [os.path.join(root, name) for name in names]
    return sorted(found)


def _stamp(path: str) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=32)
def _collectives(path: str, stamp: tuple[int, int]) -> tuple[hlo.Collective, ...]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return tuple(hlo.collectives(handle.read()))


@functools.lru_cache(maxsize=32)
def _kernels(path: str, stamp: tuple[int, int]) -> KernelInventory:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return kernel_inventory(handle.read())


def op_kinds(found: tuple[hlo.Collective, ...]) -> tuple[tuple[str, str], ...]:
    """HLO instruction name → collective kind, for the -start and the -done of each op."""
    return tuple((name, c.kind.value) for c in found for name in (c.name, c.done) if name)


@functools.lru_cache(maxsize=8)
def _profile(path: str, stamp: tuple[int, int], kinds: tuple[tuple[str, str], ...]) -> ProfileSummary:
    with open(path, "rb") as handle:
        return summarize(handle.read(), op_kinds=dict(kinds) if kinds else None)


def find_trace(profile_dir: str) -> str | None:
    """The trace JSON of a profile directory (searched below it), in preference order."""
    return pick_trace(_files(profile_dir))


def pick_trace(files: list[str]) -> str | None:
    """The trace JSON among a profile directory's files, in preference order."""
    for suffix in _TRACE_SUFFIXES:
        hits = [f for f in files if os.path.basename(f).endswith(suffix)]
        if hits:
            return hits[0]
    return None


def load_collectives(result: JobResult) -> tuple[str | None, tuple[hlo.Collective, ...] | None, str]:
    """(train-step dump path, its collective ops, problem) of a run's HLO dump."""
    directory = result.artifact("hlo_dump")
    if not directory:
        return None, None, "no HLO dump recorded for the job"
    if not os.path.isdir(directory):
        return None, None, f"HLO dump {directory} is not readable here"
    path = hlo.find_train_step_dump(_files(directory))
    if path is None:
        return None, None, f"no *jit_train_step*after_optimizations.txt under {directory}"
    try:
        return path, _collectives(path, _stamp(path)), ""
    except OSError as error:
        return path, None, f"cannot read {path}: {error.strerror or error}"


def load(result: JobResult) -> RunEvidence:
    """Everything an evidence run's artifacts show, with a reason for each part that is missing."""
    problems = []
    hlo_path, found, problem = load_collectives(result)
    rows = tuple(inventory(found)) if found is not None else None
    if problem:
        problems.append(problem)
    trace_path, summary = None, None
    directory = result.artifact("profile")
    if not directory:
        problems.append("no profile recorded for the job")
    elif not os.path.isdir(directory):
        problems.append(f"profile {directory} is not readable here")
    elif (trace_path := find_trace(directory)) is None:
        problems.append(f"no *.trace.json.gz or perfetto_trace.json.gz under {directory}")
    else:
        try:
            summary = _profile(trace_path, _stamp(trace_path), op_kinds(found or ()))
        except (OSError, ProfileError) as error:
            problems.append(f"cannot read {trace_path}: {error}")
    kernels = None
    if hlo_path and found is not None:  # read once already: the file is there
        try:
            kernels = _kernels(hlo_path, _stamp(hlo_path))
        except OSError:
            kernels = None
    return RunEvidence(
        job_id=result.job_id,
        item=result.item,
        profile_name=result.resolved_from or result.profile,
        tgs=result.tgs,
        step_seconds=result.step_seconds,
        hlo_path=hlo_path,
        inventory=rows,
        trace_path=trace_path,
        profile=summary,
        problems=tuple(problems),
        kernels=kernels,
    )


def evidence_facts(result: JobResult) -> EvidenceFacts | None:
    """What catalog ordering needs from an evidence run; None when its HLO dump is not readable."""
    evidence = load(result)
    if evidence.inventory is None:
        return None
    profile = evidence.profile
    return EvidenceFacts(
        job_id=result.job_id,
        bytes_by_kind=tuple((row.kind.value, row.total_bytes) for row in evidence.inventory),
        compute_ms=profile.compute_ms if profile else None,
        collective_ms=profile.collective_ms if profile else None,
    )
