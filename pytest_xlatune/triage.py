"""Decide how a finished job ended from what its log showed and how it exited (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from .results import Verdict

EXIT_SIGTERM = 143


@dataclass(frozen=True)
class Evidence:
    """What the log tail and the scheduler told us about a finished job."""

    last_step: int | None
    expected_steps: int
    exit_code: int | None
    unknown_flag_line: str | None = None
    oom_line: str | None = None
    cancelled_by_us: bool = False


def judge(evidence: Evidence) -> tuple[Verdict, str]:
    """The verdict and a one-line reason; the unknown-flag line is quoted as XLA printed it."""
    complete = evidence.last_step is not None and evidence.last_step >= evidence.expected_steps - 1
    if evidence.unknown_flag_line:
        return Verdict.UNKNOWN_FLAG, f"XLA rejected a flag: {evidence.unknown_flag_line.strip()}"
    if evidence.oom_line:
        return Verdict.OOM, f"out of memory: {evidence.oom_line.strip()}"
    if complete and evidence.exit_code in (0, None):
        return Verdict.SUCCESS, ""
    if complete and evidence.exit_code == EXIT_SIGTERM:
        return Verdict.SOFT_SUCCESS, "exit 143 after the last step (cleanup race); steps are intact"
    if evidence.cancelled_by_us:
        return Verdict.CANCELLED, "cancelled by this session"
    if evidence.last_step is None:
        return Verdict.NO_STEPS, f"exited with code {evidence.exit_code} before any completed step"
    return Verdict.FAILED, (
        f"exited with code {evidence.exit_code} after step {evidence.last_step} "
        f"of {evidence.expected_steps}"
    )
