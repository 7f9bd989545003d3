"""Shared pieces of the benchmark: paths, subprocess runs, and a recorder of Slurm's job times."""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
PYTHON = sys.executable
POLL_INTERVAL = 0.5  # the plugin's default --xlatune-poll-interval; passed explicitly everywhere
FINISHED = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
}


@dataclass
class Section:
    """One benchmark section: headline figures (numbers only), their targets, and the evidence."""

    name: str
    figures: dict[str, float] = field(default_factory=dict)
    targets: dict[str, str] = field(default_factory=dict)  # figure -> "<= 1.05" etc.
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    error: str = ""

    def met(self, figure: str) -> bool | None:
        """Whether a figure meets its target (None: no target)."""
        target = self.targets.get(figure)
        if target is None or figure not in self.figures:
            return None
        op, limit = target.split()
        value = self.figures[figure]
        return value <= float(limit) if op == "<=" else value >= float(limit)

    def to_dict(self) -> dict[str, Any]:
        return {
            "figures": self.figures,
            "targets": self.targets,
            "met": {k: self.met(k) for k in self.targets},
            "details": self.details,
            "notes": self.notes,
            "error": self.error,
        }


def bench_env(extra_paths: Sequence[Path] = ()) -> dict[str, str]:
    """This environment with bench/ (the bench trainer) first on PYTHONPATH."""
    env = dict(os.environ)
    paths = [str(BENCH), *map(str, extra_paths)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def emit(text: str, data: Mapping[str, Any], json_path: Path | None) -> int:
    """Print a bench script's table, write its figures as JSON when asked; its exit status."""
    print(text)
    if json_path:
        json_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return 0


@dataclass
class CpuUse:
    """CPU seconds of a run's process tree vs everything this machine did meanwhile."""

    ours_s: float = 0.0
    machine_busy_s: float = 0.0

    @property
    def others_s(self) -> float:
        return max(0.0, self.machine_busy_s - self.ours_s)


def _machine_busy_s() -> float:
    """Non-idle CPU seconds since boot, all CPUs (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def run_pytest(
    cwd: Path, args: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None, cpu: CpuUse | None = None
) -> tuple[float, subprocess.CompletedProcess[str]]:
    """`python -m pytest ARGS` in `cwd`: (wall seconds, the finished process); `cpu` gets the CPU
    time of pytest and its jobs (reaped children) and of the whole machine meanwhile."""
    argv = [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy = _machine_busy_s()
    t0 = time.perf_counter()
    proc = subprocess.run(
        argv, cwd=cwd, env=dict(env or bench_env()), capture_output=True, text=True, timeout=timeout, check=False
    )
    wall = time.perf_counter() - t0
    if cpu is not None:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.ours_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        cpu.machine_busy_s = _machine_busy_s() - busy
    return wall, proc


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def slurm_time(text: str) -> float | None:
    """Slurm's `2026-12-01T00:47:22` (local time, 1 s resolution) → epoch seconds."""
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None  # Unknown, None, N/A


_HOSTS: dict[str, frozenset[str]] = {}


def hostnames(nodelist: str) -> frozenset[str]:
    """`node[01-02]` → {node01, node02} (scontrol show hostnames, cached)."""
    if not nodelist or nodelist in ("(null)", "None"):
        return frozenset()
    if nodelist not in _HOSTS:
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=False
        ).stdout
        _HOSTS[nodelist] = frozenset(out.split())
    return _HOSTS[nodelist]


@dataclass(frozen=True)
class SlurmJob:
    """What slurmctld last said about a job (times at 1 s resolution, epoch seconds)."""

    job_id: str
    name: str
    state: str
    nodelist: str
    submit: float | None
    start: float | None
    end: float | None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


_FIELD = re.compile(r"(\w+)=(\S*)")


def parse_jobs(text: str) -> dict[str, SlurmJob]:
    """`scontrol -o show job` → {job id: SlurmJob}."""
    jobs = {}
    for line in text.splitlines():
        f = dict(_FIELD.findall(line))
        if "JobId" not in f:
            continue
        jobs[f["JobId"]] = SlurmJob(
            f["JobId"],
            f.get("JobName", ""),
            f.get("JobState", ""),
            f.get("NodeList", ""),
            slurm_time(f.get("SubmitTime", "")),
            slurm_time(f.get("StartTime", "")),
            slurm_time(f.get("EndTime", "")),
        )
    return jobs


class SlurmRecorder:
    """Snapshots every job slurmctld knows, each `every` s, in a thread.

    slurmctld forgets a finished job MinJobAge (30 s here) after it ends, so a batch longer than
    that must be recorded while it runs, not read back at the end.
    """

    def __init__(self, every: float = 1.0) -> None:
        self.every = every
        self.jobs: dict[str, SlurmJob] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._lock = threading.Lock()

    def __enter__(self) -> SlurmRecorder:
        self.snapshot()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.snapshot()

    def snapshot(self) -> None:
        out = subprocess.run(
            ["scontrol", "--oneliner", "show", "job"], capture_output=True, text=True, check=False
        ).stdout
        with self._lock:
            self.jobs.update(parse_jobs(out))

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.snapshot()

    def get(self, job_id: str) -> SlurmJob | None:
        with self._lock:
            return self.jobs.get(job_id)

    def wait_finished(self, job_ids: Iterable[str], timeout: float) -> bool:
        """Block until slurmctld reports every job finished (from the snapshots, no extra calls)."""
        ids = list(job_ids)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if all(j in self.jobs and self.jobs[j].finished for j in ids):
                    return True
            time.sleep(0.25)
        return False

    def foreign_busy(
        self, ours: set[str], nodes: frozenset[str], since: float, until: float
    ) -> list[tuple[str, float, float]]:
        """Other users' jobs that held any of `nodes` between `since` and `until`, clipped."""
        found = []
        with self._lock:
            jobs = list(self.jobs.values())
        for job in jobs:
            # A pending job's StartTime is the scheduler's estimate, not a start.
            if job.job_id in ours or job.start is None or job.state == "PENDING" or not hostnames(job.nodelist) & nodes:
                continue
            end = job.end if job.finished and job.end is not None else until
            lo, hi = max(job.start, since), min(end, until)
            if hi > lo:
                found.append((job.job_id, lo, hi))
        return found


_CTLD_LINE = re.compile(r"^\[([0-9T:.-]+)\] (?:sched: Allocate JobId=(\d+) |_job_complete: JobId=(\d+) done)")


def ctld_times(job_ids: Iterable[str], tail_bytes: int = 32 << 20) -> dict[str, tuple[float, float]]:
    """{job id: (allocated, done)} at millisecond resolution from slurmctld's own log, for the
    ids found there (empty when the log is not readable here)."""
    ids = set(job_ids)
    conf = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"^SlurmctldLogFile\s*=\s*(\S+)", conf, re.M)
    if not m or not os.access(m.group(1), os.R_OK):
        return {}
    with open(m.group(1), "rb") as f:
        f.seek(max(0, os.path.getsize(m.group(1)) - tail_bytes))
        text = f.read().decode("utf-8", "replace")
    alloc: dict[str, float] = {}
    done: dict[str, float] = {}
    for line in text.splitlines():
        hit = _CTLD_LINE.match(line)
        if hit and (hit.group(2) in ids or hit.group(3) in ids):
            at = datetime.fromisoformat(hit.group(1)).timestamp()
            if hit.group(2):
                alloc[hit.group(2)] = at
            else:
                done[hit.group(3)] = at
    return {j: (alloc[j], done[j]) for j in ids if j in alloc and j in done}


def merged_length(spans: Iterable[tuple[float, float]]) -> float:
    """Total length of the union of [lo, hi] spans."""
    total, cur_lo, cur_hi = 0.0, None, None
    for lo, hi in sorted(spans):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None and cur_lo is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None and cur_lo is not None:
        total += cur_hi - cur_lo
    return total


def slurm_answers() -> bool:
    return subprocess.run(["sinfo", "--noheader"], capture_output=True, check=False).returncode == 0


def wait_for_slurm(timeout: float = 300.0) -> bool:
    """Block until the controller answers `sinfo` (another user's test may restart it)."""
    deadline = time.monotonic() + timeout
    while not slurm_answers():
        if time.monotonic() > deadline:
            return False
        time.sleep(5)
    return True


def cancel(job_ids: Iterable[str]) -> None:
    """scancel exactly these ids (ours), one call."""
    ids = [j for j in job_ids if j]
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, check=False)


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")
