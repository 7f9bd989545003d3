"""Section 4: StepLog throughput vs `grep -c` of the step pattern and `grep -F -c -f` of every
needle StepLog looks for (bench/log_ingest.py), and the cost of one poll.

One poll reads the bytes after the stored offset and feeds them to the job's StepLog. Its cost
after 1 KB of new output is measured on the big log and on a 1 MB log, through
LocalLauncher.read_log and LocalTransport.read_from; the ratio must not grow with the file.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import log_ingest
from _common import Section, median

from pytest_xlatune.launch.base import SubmittedJob
from pytest_xlatune.launch.local import LocalLauncher
from pytest_xlatune.transport.base import LocalTransport
from pytest_xlatune.triage.logs import StepLog

SMALL_MB = 1


def new_output(step: int) -> bytes:
    """1 KB of fresh job output: warnings and one step line (a new step number each time)."""
    lines = b"".join(log_ingest.WARNINGS[i % len(log_ingest.WARNINGS)] % (i % 2, step) for i in range(4))
    block = lines + log_ingest.STEP % (0, step)
    pad = 1024 - len(block) - 1
    return block + b"#" * max(pad, 0) + b"\n" if pad >= 0 else block[:1023] + b"\n"


def ingest(path: Path) -> tuple[StepLog, int]:
    """A job's StepLog after the whole file, and the offset it stopped at (as a watch leaves it)."""
    log, offset = StepLog(), 0
    with path.open("rb", buffering=0) as f:
        while chunk := f.read(log_ingest.CHUNK):
            log.feed(chunk)
            offset += len(chunk)
    return log, offset


def poll_cost(path: Path, reps: int, workdir: Path) -> dict[str, Any]:
    """Median/min seconds of read-from-offset + feed after 1 KB appended, both read paths."""
    log, offset = ingest(path)
    size = offset
    launcher = LocalLauncher(workdir, 1)
    job = SubmittedJob("1", str(path), str(workdir))
    transport = LocalTransport()
    via_launcher, via_transport = [], []
    for i in range(reps):
        for read, sink in (
            (lambda o: launcher.read_log(job, o), via_launcher),
            (lambda o: transport.read_from(str(path), o), via_transport),
        ):
            with path.open("ab") as f:
                f.write(new_output(1_000_000 + 2 * i + len(sink) % 2))
            t0 = time.perf_counter()
            chunk = read(offset)
            log.feed(chunk)
            sink.append(time.perf_counter() - t0)
            if len(chunk) != 1024:
                raise RuntimeError(f"a poll read {len(chunk)} bytes, expected the 1024 appended")
            offset += len(chunk)
    return {
        "size_bytes": size,
        "reps": reps,
        "launcher_median_s": median(via_launcher),
        "launcher_min_s": min(via_launcher),
        "transport_median_s": median(via_transport),
        "transport_min_s": min(via_transport),
    }


def run(tmp: Path, quick: bool) -> Section:
    section = Section("log_ingest")
    mb = 100 if quick else 1024
    big = tmp / "big.log"
    lines = log_ingest.write_log(big, mb, noise=False)
    size = big.stat().st_size
    with big.open("rb") as f:  # warm the page cache for both contenders, as log_ingest does
        while f.read(log_ingest.CHUNK):
            pass
    repeat = 3
    needles = log_ingest.write_needles(tmp / "needles")
    grep, grep_f, feed = log_ingest.contest(big, needles, repeat, 1 if quick else repeat)
    if grep[1] != lines or feed[2] != 15:
        raise RuntimeError(f"counts disagree: grep {grep[1]} vs {lines} lines, StepLog {feed[2]} steps")
    fig = section.figures
    fig["log_mb"] = size / 1e6
    fig["grep_gb_s"] = size / 1e9 / grep[0]
    fig["steplog_gb_s"] = size / 1e9 / feed[0]
    fig["grep_f_gb_s"] = size / 1e9 / grep_f[0]
    fig["steplog_vs_grep"] = grep[0] / feed[0]
    fig["steplog_vs_grep_f"] = grep_f[0] / feed[0]
    fig["feed_alone_vs_grep"] = grep[0] / feed[1]
    section.targets["steplog_vs_grep"] = ">= 0.5"
    small = tmp / "small.log"
    with big.open("rb") as f:  # the first MB of the same log, cut at a line end
        head = f.read(SMALL_MB << 20)
    small.write_bytes(head[: head.rfind(b"\n") + 1])
    reps = 200 if quick else 1000
    big_cost = poll_cost(big, reps, tmp)
    small_cost = poll_cost(small, reps, tmp)
    fig["poll_1kb_big_us"] = big_cost["launcher_median_s"] * 1e6
    fig["poll_1kb_small_us"] = small_cost["launcher_median_s"] * 1e6
    fig["poll_big_vs_small"] = big_cost["launcher_median_s"] / small_cost["launcher_median_s"]
    fig["poll_big_vs_small_transport"] = big_cost["transport_median_s"] / small_cost["transport_median_s"]
    section.targets["poll_big_vs_small"] = "<= 1.5"
    section.targets["poll_big_vs_small_transport"] = "<= 1.5"
    section.details = {
        "big": big_cost,
        "small": small_cost,
        "grep_s": grep[0],
        "grep_f_s": grep_f[0],
        "needles": len(log_ingest.NEEDLES),
        "read_feed_s": feed[0],
        "feed_s": feed[1],
        "step_lines": lines,
        "size_ratio": big_cost["size_bytes"] / small_cost["size_bytes"],
    }
    section.notes.append(
        f"poll = read from the stored offset + StepLog.feed after 1 KB appended, median of {reps}; "
        f"1.0 = independent of size (the logs differ {section.details['size_ratio']:.0f}x in size)"
    )
    return section
