"""Bench-only trainer: tests/fake_trainer.py plus timestamps and failure lines written mid-run.

    python -m bench_trainer key=value...      (PYTHONPATH holds bench/; run by the plugin with
                                               --xlatune-workload=bench_trainer)

Writes `bench_times.json` into `base_output_directory` (the job's directory; every launcher passes
it) with epoch seconds: `start` (main entered), `end` (last step printed), and for the failure modes
below `line_written` (the failure line was flushed to the log) and `sigterm` (the cancel arrived).

Extra XLA_FLAGS (the fake trainer ignores flags it does not know):
  --xla_bench_unknown_after=S   after S s of initialisation (before step 0) print XLA's `Unknown
                                flag in XLA_FLAGS` line and keep running (a job the plugin has to
                                cancel on sight)
  --xla_bench_oom_after=S       after S s of initialisation print XLA's RESOURCE_EXHAUSTED line and
                                exit 1
Everything else (--xla_fake_tgs, fake_step_sleep=…, steps=…) is the fake trainer's.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fake_trainer

UNKNOWN_LINE = (
    "E1130 00:00:00.000000 1 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: --xla_bench_unknown_after={value}"
)
OOM_LINE = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes."


class Times:
    """The job's timestamps, rewritten atomically at each mark (a cancel may come at any time)."""

    def __init__(self, job_dir: str | None) -> None:
        self.path = Path(job_dir) / "bench_times.json" if job_dir else None
        self.marks: dict[str, Any] = {"slurm_job_id": os.environ.get("SLURM_JOB_ID", ""), "pid": os.getpid()}

    def mark(self, name: str, at: float | None = None) -> None:
        self.marks[name] = time.time() if at is None else at
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.marks))
        os.replace(tmp, self.path)


def _init_then(line: str, after_s: float, tick_s: float) -> float:
    """Initialise for `after_s` seconds (no step yet: XLA reads its flags and compiles before
    step 0, and the plugin looks for the unknown-flag line only there), then print `line`;
    return when it was flushed."""
    print("Num_devices: 8\nMemstats: After params initialized:", flush=True)
    deadline = time.monotonic() + after_s
    while time.monotonic() < deadline:
        time.sleep(min(tick_s, max(0.0, deadline - time.monotonic())))
        print("W external/xla/xla/service/cpu/cpu_compiler.cc:1] still compiling", flush=True)
    print(line, flush=True)
    return time.time()


def main(argv: list[str]) -> int:
    started = time.time()
    args = dict(a.split("=", 1) for a in argv if "=" in a)
    times = Times(args.get("base_output_directory"))
    times.mark("start", started)
    flags = dict(f.split("=", 1) for f in os.environ.get("XLA_FLAGS", "").split() if "=" in f)
    step_s = float(args.get("fake_step_sleep", "0.1")) or 0.1

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        times.mark("sigterm")
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    if "--xla_bench_unknown_after" in flags:
        after = float(flags["--xla_bench_unknown_after"])
        times.mark("line_written", _init_then(UNKNOWN_LINE.format(value=after), after, step_s))
        while True:  # a job that does not die by itself: only the cancel ends it
            time.sleep(3600)
    if "--xla_bench_oom_after" in flags:
        times.mark("line_written", _init_then(OOM_LINE, float(flags["--xla_bench_oom_after"]), step_s))
        times.mark("end")
        return 1
    code = fake_trainer.main(argv)
    times.mark("end")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
