"""What a failure-relevant log line says (StepLog's signals): the kinds and the frozen record."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class SignalKind(Enum):
    """What a failure-relevant line says."""

    UNKNOWN_FLAG = "unknown-flag"
    OOM = "oom"
    MEMSTATS = "memstats"
    JOB_SUMMARY = "job-summary"
    EVIDENCE = "evidence"  # a line a failure signature matches (signatures.is_evidence)
    LIBRARY_INFO = "library-info"  # an NCCL/RCCL INFO line (evidence/nccl_applied.py reads them)


@dataclass(frozen=True)
class Signal:
    """A signal line (ANSI removed) and the highest step printed before it."""

    kind: SignalKind
    line: str
    after_step: int | None
