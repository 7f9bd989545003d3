"""Time from an OOM line to its cancel when the line follows a 1 GB burst of log output.

    python bench/oom_burst.py [--mb 1024] [--repeat 3] [--interval 0.5]

A job (a local process, as the local backend runs one) prints a step, then writes `--mb` MB of
warning lines as fast as it can, then XLA's RESOURCE_EXHAUSTED line, stamping when that line
was written, and keeps running until it is cancelled. The real Watcher and Poller follow it at
`--interval` through LocalLauncher's log reads and cancel; the delay from the OOM line's write to
the cancel is reported in poll intervals (target <= 2). The arms, alternating in the same run:
the watcher as it is (one-pass search, and a look at the log's newest bytes while it is behind);
without the look ahead; and as it was before both (one memmem pass per needle, no look ahead).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_xlatune.engine.poller import Poller
from pytest_xlatune.engine.watch import Watcher
from pytest_xlatune.launch.base import SubmittedJob
from pytest_xlatune.launch.local import LocalLauncher
from pytest_xlatune.triage import logs
from pytest_xlatune.triage.hang import HangSettings

JOB = textwrap.dedent("""\
    import os, sys, time
    import log_ingest
    log, stamp, mb = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lines = log_ingest.WARNINGS
    block = b"".join(lines[i % len(lines)] % (i % 2, i) for i in range(8000))
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    os.write(fd, log_ingest.STEP % (0, 0))
    time.sleep(1.0)  # the watcher is following the log by now
    began = time.monotonic()
    for _ in range(max(1, (mb << 20) // len(block))):
        os.write(fd, block)
    burst_end = time.monotonic()
    os.write(fd, b"0: jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
                 b"trying to allocate 12.00GiB.\\n")
    written = time.monotonic()
    with open(stamp, "w") as f:
        f.write(f"{began} {burst_end} {written}")
    time.sleep(600)  # only the watcher's cancel ends it
""")


class Launcher(LocalLauncher):
    """The local backend, following one process started here; notes when it cancels."""

    def __init__(self, workdir: Path, process: subprocess.Popen[bytes]) -> None:
        super().__init__(workdir, 1)
        self._processes["1"] = process
        self.cancelled_at: float | None = None

    def cancel(self, job_id: str) -> None:
        self.cancelled_at = self.cancelled_at or time.monotonic()
        super().cancel(job_id)


def one_run(tmp: Path, mb: int, interval: float) -> dict[str, Any]:
    log, stamp = tmp / "job.log", tmp / "stamp"
    log.write_bytes(b"")
    stamp.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent)}
    process = subprocess.Popen(
        [sys.executable, "-c", JOB, str(log), str(stamp), str(mb)], env=env, start_new_session=True
    )
    launcher = Launcher(tmp, process)
    try:
        poller = Poller(launcher, interval)
        watcher = Watcher(launcher, poller, 10, interval, time.monotonic, time.sleep, lambda text: None, HangSettings())
        seen = watcher.watch("burst", SubmittedJob("1", str(log), str(tmp)))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    if launcher.cancelled_at is None or not stamp.exists():
        raise RuntimeError(f"no cancel after the OOM line (cancelled for {seen.cancelled_for!r})")
    began, burst_end, written = map(float, stamp.read_text().split())
    delay = launcher.cancelled_at - written
    size = log.stat().st_size
    log.unlink()
    return {
        "cancelled_for": seen.cancelled_for,
        "burst_gb_s": size / 1e9 / (burst_end - began),
        "delay_s": delay,
        "delay_intervals": delay / interval,
        "log_bytes": size,
    }


def _no_look_ahead(self: Watcher, job: SubmittedJob, offset: int, seen: Any, ahead: Any) -> Any:
    return ahead


def _fast_dir() -> Path | None:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and shutil.disk_usage(shm).free > 4 << 30 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="burst size in MB (default: 1024)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per arm (default: 3)")
    parser.add_argument("--interval", type=float, default=0.5, help="poll interval in s (default: 0.5)")
    parser.add_argument("--json", type=Path, help="write the runs here")
    parser.add_argument(
        "--dir",
        type=Path,
        default=_fast_dir(),
        help="where the job log goes (default: /dev/shm when it has room: a disk's "
        "writeback would slow the burst down to the watcher's pace)",
    )
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="xlatune-burst-", dir=args.dir))
    one_pass, look_ahead = logs._lines_with_once, Watcher._look_ahead
    arms = {
        "now": (one_pass, look_ahead),
        "no look ahead": (one_pass, _no_look_ahead),
        "before (neither)": (logs._lines_with, _no_look_ahead),
    }
    out: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    try:
        for _ in range(args.repeat):  # the arms alternate, so all see the same load
            for arm, (search, look) in arms.items():
                logs._lines_with_once = search  # what a new StepLog searches with
                Watcher._look_ahead = look  # type: ignore[method-assign]
                out[arm].append(one_run(tmp, args.mb, args.interval))
    finally:
        logs._lines_with_once, Watcher._look_ahead = one_pass, look_ahead  # type: ignore[method-assign]
        shutil.rmtree(tmp)
    print(
        f"burst {args.mb} MB, then an OOM line; poll interval {args.interval} s; {args.repeat} runs per arm; "
        f"log in {args.dir or tempfile.gettempdir()}"
    )
    for arm, runs in out.items():
        delays = [r["delay_intervals"] for r in runs]
        rate = sum(r["burst_gb_s"] for r in runs) / len(runs)
        seconds = ", ".join(f"{r['delay_s']:.2f}" for r in runs)
        print(
            f"{arm:20s} OOM line -> cancel: mean {sum(delays) / len(delays):.2f}, max {max(delays):.2f} "
            f"poll intervals ({seconds} s; burst written at "
            f"{rate:.2f} GB/s; cancelled for {runs[0]['cancelled_for']})"
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
