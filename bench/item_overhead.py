"""Per-item overhead against the store's size: the engine's own time between one job's end and the
next submission, in a cell of 10 and of 300 profiles, in the same run.

    python bench/item_overhead.py [--small 10] [--large 300] [--adaptive]

A scripted in-process launcher ends every job at its first poll (its log: 15 MaxText step lines)
and an injected clock makes the poll waits free, so what is timed is the engine alone: judging the
log, writing the record, reading the store, the noise estimate and choosing the next run. The
figure is the mean over the last 10 items of each cell (where the large cell's store is largest),
and the ratio large/small is the target (<= 1.5).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_xlatune.cell.values import Cell, ClusterSlot, Parallelism, Profile
from pytest_xlatune.engine.sweep import Sweep
from pytest_xlatune.launch.base import JobPhase, JobProgress, JobRequest, JobState, SubmittedJob
from pytest_xlatune.plan.expand import expand
from pytest_xlatune.store import ResultStore
from tests.clock import Clock

TAIL = 10


class InstantLauncher:
    """Every job ends COMPLETED at its first poll; records when each submission came."""

    name = "bench"
    queue_depth = 0

    def __init__(self) -> None:
        self.gaps: list[float] = []  # a job's end (the poll that saw it) -> the next submission
        self.ended_at: float | None = None
        self.jobs = 0

    def submit(self, request: JobRequest) -> SubmittedJob:
        if self.ended_at is not None:
            self.gaps.append(time.perf_counter() - self.ended_at)
            self.ended_at = None
        self.jobs += 1
        job_id = str(100 + self.jobs)
        return SubmittedJob(job_id, f"/logs/{job_id}.log", f"/jobs/{job_id}")

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
        self.ended_at = time.perf_counter()
        return {j: JobProgress(JobPhase.FINISHED, JobState.COMPLETED, 0) for j in job_ids}

    def cancel(self, job_id: str) -> None:
        pass

    def reattach(self, job: SubmittedJob) -> bool:
        return True

    def find_submission(self, mark: str, job_name: str, since: float) -> SubmittedJob | None:
        return None

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        tgs = 1000 + int(job.job_id) % 97
        text = "".join(
            f"completed step: {s}, seconds: 1.000, TFLOP/s/device: 1.0, "
            f"Tokens/s/device: {tgs + (s % 3) * 0.5}, total_weights: 1, loss: 1.0\n"
            for s in range(15)
        ).encode()
        return text[offset:]

    def artifacts(self, job: SubmittedJob) -> dict[str, str]:
        return {}

    def check_requests(self, requests: Iterable[JobRequest]) -> None:
        pass

    def log_source(self, job: SubmittedJob) -> str:
        return job.log_path

    def unusable_nodes(self) -> list[tuple[str, str]]:
        return []

    def resume_node(self, node: str) -> None:
        pass

    def close(self) -> None:
        pass


def cell(n: int) -> Cell:
    return Cell(
        path=Path("bench.yml"),
        model_tag="bench",
        slot=ClusterSlot(nodes=1),
        parallelism=Parallelism((("FSDP", 8),)),
        baseline_repeats=1,
        profiles=tuple(Profile(f"p{i}", 2, (f"--xla_bench_{i}=true",)) for i in range(n)),
    )


def per_item(n: int, adaptive: bool) -> tuple[float, int]:
    """Mean seconds from a job's end to the next submission over the last TAIL jobs of an
    n-profile cell; jobs run."""
    with tempfile.TemporaryDirectory(prefix="xlatune-bench-") as tmp:
        the_cell = cell(n)
        specs = [s for s in expand(the_cell) if not s.needs_resolution]
        launcher, clock = InstantLauncher(), Clock()
        sweep = Sweep(
            cell=the_cell,
            specs=specs,
            store=ResultStore(Path(tmp) / "s.jsonl"),
            launcher=launcher,
            nodelist="n1",
            poll_interval=5,
            queue_depth=0,
            fixed_protocol=not adaptive,
            sleep=clock.sleep,
            clock=clock,
        )
        sweep.set_upcoming(specs)
        for spec in specs:
            sweep.run(spec)
        gaps = launcher.gaps[-TAIL:]
        return sum(gaps) / len(gaps), launcher.jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10, help="profiles of the small cell (default: 10)")
    parser.add_argument("--large", type=int, default=300, help="profiles of the large cell (default: 300)")
    parser.add_argument("--adaptive", action="store_true", help="the adaptive sweep (default: fixed protocol)")
    args = parser.parse_args()
    small, n_small = per_item(args.small, args.adaptive)
    large, n_large = per_item(args.large, args.adaptive)
    print(f"{n_small:4d} jobs: {small * 1000:8.2f} ms from a job's end to the next submission (last {TAIL})")
    print(f"{n_large:4d} jobs: {large * 1000:8.2f} ms from a job's end to the next submission (last {TAIL})")
    print(f"ratio {n_large} vs {n_small} jobs: {large / small:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
