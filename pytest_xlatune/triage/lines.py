"""MaxText step lines, known-noise lines and ANSI escapes: one line of a training log at a time (pure)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf(?:inity)?))"
STEP_MARK = "completed step:"
# Newer MaxText prints a profiler boundary step without its (distorted) timings as
# `completed profiler activation/deactivation step: N`: still a completed step.
PROFILER_STEP_MARK = "deactivation step:"
STEP_MARKS = (STEP_MARK, PROFILER_STEP_MARK)
STEP_RE = re.compile(r"\bcompleted (?:profiler activation/deactivation )?step:\s*(\d+)")
STEP_MARK_RE = re.compile(r"completed (?:profiler activation/deactivation )?step:")  # glued lines too
# Each `, name: value` after the step number. Fields are taken by exact name, so `mtp_loss` and
# `main_model_loss` are never read as `loss` (the skill's greedy `.*loss:` reads mtp_loss).
_FIELD_RE = re.compile(rf",\s*([A-Za-z_][\w/]*)\s*:\s*({_NUM})\s*%?")
# CSI sequences, charset selects and SI/SO: `tput sgr0` emits "\x1b(B\x1b[m" on xterm.
# ANSI colour escapes, shift-in/out, and NUL bytes (a log file's hole after a node crash, or a
# preallocated file written later, puts them before the next line's text).
_ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[()][0-9A-Za-z])|[\x00\x0e\x0f]")

# Known false positives: the xla-tuning skill's "grep -v these first" list and job-log-triage's
# "Known-harmless" list. Regexes searched anywhere in a line; each starts with a literal so the
# combined pattern stays fast.
KNOWN_NOISE: tuple[str, ...] = (
    r"cuInit: UNKNOWN ERROR \(303\)",
    # The cuInit probe, not a CUDA error in training; a node whose GPUs are not ready yet (NVSwitch
    # systems before the fabric manager runs) fails it with CUDA_ERROR_SYSTEM_NOT_READY: no noise.
    r"INTERNAL: CUDA error: Failed call to cuInit(?!: CUDA_ERROR_SYSTEM_NOT_READY)",
    r"NCCL WARN MSCCL\+\+: Feature not enabled",
    r"NCCL WARN LL cutoff points not detected",
    r"AMD GPU device\(s\) is/are in a low-power state",
    r"Token indices sequence length is longer",
    r"OCI runtime exec failed",
    r"error executing setns process",
    r"\[cgroup\] Sent SIGKILL to 0/0 processes",
    r"Cannot read CPU core \d+",
    r"No hardware is found\. Using default TPU version: jellyfish",
    r"No device identifiers found",
    r"Enabling PjRt/TPU event dependency logging",
    r"Fiber init: default domain = futex",
    r"could not kill container",
    # Harmless after scancel, which the job state (not the log) tells.
    r"srun: error: \S+: tasks? [\d,-]+: Exited with exit code 143",
    r"NODE_EXIT host=\S+ exit=143\b",
)
NOISE_RE = re.compile("|".join(KNOWN_NOISE))
NOISE_BYTES_RE = re.compile("|".join(KNOWN_NOISE).encode())


@dataclass(frozen=True)
class StepRecord:
    """One `completed step:` line."""

    step: int
    seconds: float | None  # None: a MaxText era that prints no step time (still progress)
    tflops: float | None
    mfu_pct: float | None
    tokens_per_s: float | None
    loss: float | None
    extra: tuple[tuple[str, float], ...] = ()  # other numeric fields, in line order


def parse_step_line(line: str) -> StepRecord | None:
    """Parse a MaxText step line, whatever prefix (srun -l, absl, Ray actor) comes before it.

    Every field after the step number is optional: old MaxText prints `TFLOP/s` and no
    Tokens/s/device, some eras print no `seconds`, newer ones add extra losses.
    """
    if "\x1b" in line:
        line = strip_ansi(line)
    m = STEP_RE.search(line)
    if m is None:
        return None
    nxt = STEP_MARK_RE.search(line, m.end())  # a second step line glued on (interleaved output)
    stop = -1 if nxt is None else nxt.start()
    fields: dict[str, float] = {}
    for name, value in _FIELD_RE.findall(line, m.end(), len(line) if stop < 0 else stop):
        fields.setdefault(name, float(value))
    seconds = fields.pop("seconds", None)
    tflops = fields.pop("TFLOP/s/device", None)
    return StepRecord(
        step=int(m.group(1)),
        seconds=seconds,
        tflops=fields.pop("TFLOP/s", None) if tflops is None else tflops,  # oldest MaxText
        mfu_pct=fields.pop("MFU", None),
        tokens_per_s=fields.pop("Tokens/s/device", None),
        loss=fields.pop("loss", None),
        extra=tuple(fields.items()),
    )


def has_step(line: str) -> bool:
    """Whether a line holds a MaxText step line (either form)."""
    return any(mark in line for mark in STEP_MARKS)


def is_noise(line: str) -> bool:
    """Say whether a line is a known false-positive signature."""
    return NOISE_RE.search(line) is not None


def strip_known_noise(lines: Iterable[str]) -> list[str]:
    """Drop the known false-positive lines."""
    return [line for line in lines if NOISE_RE.search(line) is None]


def strip_ansi(text: str) -> str:
    """Remove ANSI colour escapes (and NUL bytes)."""
    return _ANSI_RE.sub("", text)
