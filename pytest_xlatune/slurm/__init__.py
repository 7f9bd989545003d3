"""Slurm: argv builders (`commands`) and output parsers (`parsers`); both pure, no I/O here."""

from __future__ import annotations

from . import commands, parsers
from .parsers import (
    INVALID_JOB_ID,
    SACCT_FIELDS,
    SINFO_NODES_FORMAT,
    SQUEUE_FORMAT,
    JobState,
    JobStatus,
    NodeState,
    NodeStatus,
    SlurmParseError,
)

__all__ = [
    "INVALID_JOB_ID",
    "SACCT_FIELDS",
    "SINFO_NODES_FORMAT",
    "SQUEUE_FORMAT",
    "JobState",
    "JobStatus",
    "NodeState",
    "NodeStatus",
    "SlurmParseError",
    "commands",
    "parsers",
]
