"""An interrupt's cancels wait (bounded) for each job's final state, and a job that ended on its
own while the cancel was on its way (COMPLETED, or a log that shows its last step) is left to the
rerun, which re-attaches and stores its result: it never runs twice."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_xlatune.engine.owned_jobs import SETTLE_S
from pytest_xlatune.launch.base import JobPhase, JobProgress, JobState, SubmittedJob
from pytest_xlatune.launch.local import LocalLauncher
from pytest_xlatune.plan.expand import expand, run_key
from pytest_xlatune.store import ResultStore
from tests.unit.engine.test_poller import Clock, FirstJobOnly, ScriptedLauncher, cell, fixed_sweep

STEPS = "".join(
    f"completed step: {s}, seconds: 1.000, TFLOP/s/device: 1.0, Tokens/s/device: 1000.0, total_weights: 1, loss: 1.0\n"
    for s in range(15)
)


class SettlesLate(FirstJobOnly):
    """After the cancel, the scheduler reads each job COMPLETING for `late` polls, then gives it
    its final state from `final` (none: COMPLETING for ever). Logs: those named `trained` hold all
    15 steps, the others stop at step 10."""

    def __init__(self, final: dict[str, JobProgress], late: int = 2, trained: tuple[str, ...] = ("101",)) -> None:
        super().__init__(polls_to_finish=3)
        self.final, self.late, self.trained = final, late, trained
        self.after_cancel: dict[str, int] = {}

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
        answer = super().poll(job_ids)
        for job_id in job_ids:
            if job_id in self.cancelled:
                self.after_cancel[job_id] = self.after_cancel.get(job_id, 0) + 1
                settled = self.after_cancel[job_id] > self.late and job_id in self.final
                answer[job_id] = self.final[job_id] if settled else JobProgress(JobPhase.RUNNING, JobState.COMPLETING)
        return answer

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        text = STEPS if job.job_id in self.trained else "".join(STEPS.splitlines(keepends=True)[:10])
        return text.encode()[offset:]


def interrupted(tmp_path: Path, launcher: SettlesLate) -> tuple[ResultStore, Clock]:
    """The first item ran (jobs 102 and 103 queued behind it), then Ctrl-C's cancel."""
    clock = Clock()
    store = ResultStore(tmp_path / "s.jsonl")
    sweep = fixed_sweep(store, launcher, clock)
    sweep.run(sweep.specs[0])
    clock.now = 1000.0  # the cancel's start
    sweep.cancel_all()
    return store, clock


def cancelled(store: ResultStore) -> list[str]:
    return [str(e["job_id"]) for e in store.events() if e["event"] == "cancelled"]


def pending(store: ResultStore) -> set[str]:
    return {str(r["job_id"]) for r in store.pending_submissions().values()}


def test_a_job_that_completes_while_the_cancel_is_on_its_way_is_left_to_the_rerun(tmp_path: Path) -> None:
    """Right after the cancel both jobs read COMPLETING; a moment later job 102 is COMPLETED
    (exit 0: it ended on its own) and job 103 CANCELLED. One poll at once took both for cancels,
    and job 102, its run complete, ran again in the next session."""
    launcher = SettlesLate(
        {
            "102": JobProgress(JobPhase.FINISHED, JobState.COMPLETED, 0),
            "103": JobProgress(JobPhase.FINISHED, JobState.CANCELLED, 143),
        }
    )
    store, clock = interrupted(tmp_path, launcher)
    assert launcher.cancelled == ["102", "103"]
    assert cancelled(store) == ["103"]
    assert pending(store) == {"102"}  # the rerun re-attaches to it and judges its log
    assert clock.now - 1000.0 < SETTLE_S  # done as soon as both had their final state


def test_a_job_cancelled_after_its_last_step_is_left_to_the_rerun(tmp_path: Path) -> None:
    """The cancel reached job 102 in its teardown: Slurm says CANCELLED (143), its log holds all
    15 steps (the whole measurement); job 103 was cancelled mid-run."""
    launcher = SettlesLate(
        {
            "102": JobProgress(JobPhase.FINISHED, JobState.CANCELLED, 143),
            "103": JobProgress(JobPhase.FINISHED, JobState.CANCELLED, 143),
        },
        trained=("101", "102"),
    )
    store, _ = interrupted(tmp_path, launcher)
    assert cancelled(store) == ["103"] and pending(store) == {"102"}


def test_the_wait_for_final_states_is_bounded_and_then_counts_the_job_cancelled(tmp_path: Path) -> None:
    """Jobs that stay COMPLETING: asked again until SETTLE_S in all (not per job), then recorded
    cancelled as before (their logs stop short of the last step)."""
    launcher = SettlesLate({})
    store, clock = interrupted(tmp_path, launcher)
    assert cancelled(store) == ["102", "103"] and pending(store) == set()
    assert clock.now - 1000.0 == SETTLE_S
    assert launcher.after_cancel["102"] > 2  # asked again, not once


def test_the_rerun_stores_the_result_of_the_job_left_to_it_and_submits_nothing_again(tmp_path: Path) -> None:
    launcher = SettlesLate(
        {
            "102": JobProgress(JobPhase.FINISHED, JobState.COMPLETED, 0),
            "103": JobProgress(JobPhase.FINISHED, JobState.CANCELLED, 143),
        },
        trained=("101", "102"),
    )
    _, clock = interrupted(tmp_path, launcher)
    rerun = ScriptedLauncher(polls_to_finish=1)  # job 102 is COMPLETED, its log whole
    rerun.submitted = list(launcher.submitted)  # the scheduler's next job id is 104
    sweep = fixed_sweep(ResultStore(tmp_path / "s.jsonl"), rerun, clock, queue_depth=0)
    sweep.adopt_orphans()
    outcome = sweep.run(sweep.specs[1])  # job 102's item
    assert outcome.result.job_id == "102" and outcome.result.verdict.measured
    assert len(rerun.submitted) == len(launcher.submitted)  # nothing submitted again


def test_a_local_orphan_that_trained_is_not_recorded_cancelled(tmp_path: Path) -> None:
    """The local backend knows no re-attached job's exit (UNKNOWN): the log decides. Orphan 51
    logged its last step, orphan 52 did not; both have ended."""
    specs = expand(cell())
    store = ResultStore(tmp_path / "s.jsonl")
    for number, spec, text in ((51, specs[1], STEPS), (52, specs[2], STEPS[:200])):
        log = tmp_path / f"{number}.log"
        log.write_text(text)
        store.append(
            "submitted",
            key=run_key(cell(), spec, "local", ""),
            item=spec.name,
            job_id=str(number),
            log_path=str(log),
            job_dir=str(tmp_path),
            handle="",  # its process is gone
        )
    sweep = fixed_sweep(store, LocalLauncher(tmp_path / "jobs", 1), Clock(), nodelist="local")
    sweep.adopt_orphans()
    sweep.cancel_all()
    assert cancelled(store) == ["52"] and pending(store) == {"51"}
