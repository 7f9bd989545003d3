"""Time StepLog.feed on a large MaxText-style log against `grep -c 'completed step'`.

    python bench/log_ingest.py [--mb 200] [--noise]

Writes a log of warning lines with 15 step lines (printed by 2 srun tasks each) spread through
it, then reports the throughputs and their ratio against `grep -c` of the one step pattern (the
target is >= 0.5) and against `grep -F -c -f` of every needle StepLog looks for (the same work
as StepLog's search, done by grep). `--noise` makes the warnings known-noise lines, the worst
case for the tail.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_xlatune.triage import logs
from pytest_xlatune.triage.logs import StepLog
from pytest_xlatune.triage.signatures import EVIDENCE_NEEDLES

CHUNK = 8 << 20
WARNINGS = (
    b"%d: 2025-11-30 12:00:01.123456: W external/xla/xla/service/gpu/gpu_hlo_schedule.cc:789] "
    b"The latency hiding scheduler found no cost for fusion.%d; using the default\n",
    b"%d: node-%d:1234:5678 [3] NCCL INFO Channel 02/0 : 3[3] -> 4[4] via P2P/IPC/read\n",
    b"%d: /usr/local/lib/python3.10/dist-packages/jax/_src/interpreters/mlir.py:%d: UserWarning: "
    b"Some donated buffers were not usable: ShapedArray(bfloat16[4096,14336]).\n",
    b"%d: W1130 12:00:00.000000 %d pjrt_client.cc:123] Ignoring unknown option foo bar baz\n",
)
NOISE = (
    b"%d: node-%d:1234:5678 [0] NCCL WARN MSCCL++: Feature not enabled. "
    b"ENABLE_MSCCLPP must be defined at compile-time\n",
    b"%d: E1130 12:00:00.000000 %d cuda_executor.cc:1228] failed call to cuInit: INTERNAL: "
    b"CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n",
)
STEP = (
    b"%d: completed step: %d, seconds: 6.051, TFLOP/s/device: 451.236, MFU: 34.71%%, "
    b"Tokens/s/device: 8123.462, total_weights: 393216, loss: 6.765\n"
)


def write_log(path: Path, mb: int, noise: bool) -> int:
    """Write about `mb` MB; return the number of step lines."""
    lines = NOISE if noise else WARNINGS
    block = b"".join(lines[i % len(lines)] % (i % 2, i) for i in range(20_000))
    blocks = max(1, (mb << 20) // len(block))
    every = max(1, blocks // 15)
    steps = 0
    with path.open("wb") as f:
        for i in range(blocks):
            f.write(block)
            if i % every == every - 1 and steps < 30:
                f.write(STEP % (0, steps // 2) + STEP % (1, steps // 2))
                steps += 2
    return steps


def time_feed(path: Path) -> tuple[float, float, int]:
    """Return (seconds for read+feed, seconds inside feed, steps found)."""
    log = StepLog()
    in_feed = 0.0
    t0 = time.perf_counter()
    with path.open("rb", buffering=0) as f:
        while chunk := f.read(CHUNK):
            t1 = time.perf_counter()
            log.feed(chunk)
            in_feed += time.perf_counter() - t1
    log.flush()
    return time.perf_counter() - t0, in_feed, len(log.steps)


# Every needle StepLog searches a log for: steps, OOM, failure evidence, and (before step 0 or in
# the trailer) an unknown flag, Memstats and the job summary.
NEEDLES = (
    *(mark.encode() for mark in logs.STEP_MARKS),
    *logs.OOM_NEEDLES,
    *EVIDENCE_NEEDLES,
    *logs._UNKNOWN_NEEDLES,
    logs._MEMSTATS_NEEDLE,
    logs._SUMMARY_NEEDLE,
)


def time_grep(path: Path, needles: Path | None = None) -> tuple[float, int]:
    """Seconds and count of `grep -c 'completed step'`, or with `needles`, `grep -F -c -f needles`."""
    t0 = time.perf_counter()
    pattern = ["-F", "-f", str(needles)] if needles is not None else ["completed step"]
    out = subprocess.run(["grep", "-c", *pattern, str(path)], capture_output=True, check=False)
    if out.returncode not in (0, 1):  # 1: no line matched
        raise RuntimeError(f"grep failed: {out.stderr.decode(errors='replace').strip()}")
    return time.perf_counter() - t0, int(out.stdout)


def contest(
    path: Path, needles: Path, repeat: int, grep_f_repeat: int
) -> tuple[tuple[float, int], tuple[float, int], tuple[float, float, int]]:
    """Best of `repeat` for `grep -c` and StepLog, each grep run right before a StepLog run (on a
    shared machine the load moves: this keeps each pair under the same); `grep -F` last."""
    grep, feed = [], []
    for _ in range(repeat):
        grep.append(time_grep(path))
        feed.append(time_feed(path))
    grep_f = min(time_grep(path, needles) for _ in range(grep_f_repeat))
    return min(grep), grep_f, min(feed)


def write_needles(path: Path) -> Path:
    path.write_bytes(b"".join(needle + b"\n" for needle in NEEDLES))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="log size in MB (default: 200)")
    parser.add_argument("--noise", action="store_true", help="known-noise warnings (default: off)")
    parser.add_argument("--repeat", type=int, default=3, help="best of N timings (default: 3)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="xlatune-bench-"))
    try:
        path = tmp / "job.log"
        lines = write_log(path, args.mb, args.noise)
        size = path.stat().st_size
        with path.open("rb") as f:  # warm the page cache for both contenders
            while f.read(CHUNK):
                pass
        needles = write_needles(tmp / "needles")
        grep, grep_f, feed = contest(path, needles, args.repeat, args.repeat)
        assert grep[1] == lines, (grep, lines)
        assert feed[2] == 15, feed
        gb = size / 1e9
        kind = "known-noise" if args.noise else "mixed"
        print(f"log: {size / 1e6:.0f} MB, {lines} step lines, {kind} warnings")
        print(f"grep -c (1 pattern):      {gb / grep[0]:6.2f} GB/s")
        print(f"grep -F -c ({len(NEEDLES)} needles): {gb / grep_f[0]:6.2f} GB/s   ({grep_f[1]} lines)")
        print(
            f"read + feed:              {gb / feed[0]:6.2f} GB/s   ratio {grep[0] / feed[0]:.2f} vs grep -c, "
            f"{grep_f[0] / feed[0]:.2f} vs grep -F"
        )
        print(f"feed alone:               {gb / feed[1]:6.2f} GB/s   ratio {grep[0] / feed[1]:.2f} vs grep -c")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
