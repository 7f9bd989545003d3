"""Hang detection from a job's own step history, with injected time (no sleeping)."""

from __future__ import annotations

import pytest

from pytest_xlatune.triage.hang import HangDetector, HangPhase, HangSettings
from pytest_xlatune.triage.lines import StepRecord
from pytest_xlatune.triage.logs import StepLog

T0 = 1_000_000.0  # an arbitrary epoch: nothing reads the real clock


def rec(step: int, seconds: float) -> StepRecord:
    return StepRecord(step=step, seconds=seconds, tflops=None, mfu_pct=None, tokens_per_s=800.0, loss=9.0)


def trained(
    steps: int, step_s: float = 10.0, compile_s: float = 300.0, settings: HangSettings | None = None
) -> tuple[HangDetector, float]:
    """A detector that saw RUNNING at T0, Memstats at +60 s, then `steps` steps; and the last arrival."""
    det = HangDetector(settings)
    assert det.check(T0, scheduler_running=True) is None
    det.memstats(T0 + 60)
    at = T0 + 60 + compile_s
    det.step(rec(0, compile_s), at)
    for n in range(1, steps):
        at += step_s
        det.step(rec(n, step_s), at)
    return det, at


def test_nothing_is_a_hang_while_the_job_is_not_running() -> None:
    det = HangDetector()
    assert det.check(T0, scheduler_running=False) is None
    assert det.check(T0 + 10 * 3600, scheduler_running=False) is None  # pending for 10 h
    assert det.started_at is None
    assert det.check(T0 + 10 * 3600, scheduler_running=True) is None  # the clock starts now
    assert det.check(T0 + 10 * 3600 + 901, scheduler_running=True) is HangPhase.BEFORE_MEMSTATS


def test_before_memstats_the_init_allowance_counts_from_running() -> None:
    det = HangDetector()
    det.check(T0, scheduler_running=True)
    assert det.check(T0 + 900, scheduler_running=True) is None
    assert det.check(T0 + 900.001, scheduler_running=True) is HangPhase.BEFORE_MEMSTATS


def test_between_memstats_and_step0_the_compile_allowance_counts_from_memstats() -> None:
    det = HangDetector()
    det.check(T0, scheduler_running=True)
    det.memstats(T0 + 600)
    assert det.check(T0 + 1400, scheduler_running=True) is None  # 800 s into compile
    assert det.check(T0 + 1501, scheduler_running=True) is HangPhase.BEFORE_STEP0


def test_after_step0_the_threshold_is_k_times_the_median_step() -> None:
    det, last = trained(steps=8, step_s=40.0)
    assert det.median_step_s() == 40.0  # step 0 (compile) left out
    assert det.threshold_s() == 200.0  # 5 × 40
    assert det.check(last + 200, scheduler_running=True) is None
    assert det.check(last + 200.5, scheduler_running=True) is HangPhase.AFTER_STEP0


def test_the_threshold_has_a_floor_for_fast_steps() -> None:
    det, last = trained(steps=8, step_s=0.5)
    assert det.threshold_s() == 120.0
    assert det.check(last + 119, scheduler_running=True) is None
    assert det.check(last + 121, scheduler_running=True) is HangPhase.AFTER_STEP0


def test_the_threshold_has_a_cap_for_slow_steps() -> None:
    det, last = trained(steps=4, step_s=600.0)
    assert det.threshold_s() == 1800.0
    assert det.check(last + 1801, scheduler_running=True) is HangPhase.AFTER_STEP0


def test_a_profiler_dump_outlier_does_not_move_the_median() -> None:
    det, last = trained(steps=8, step_s=10.0)
    det.step(rec(8, 400.0), last + 400)  # maxtext-slurm's profiler dumps at step 8
    assert det.median_step_s() == 10.0
    assert det.check(last + 400 + 51, scheduler_running=True) is None  # floor 120 s
    assert det.check(last + 400 + 121, scheduler_running=True) is HangPhase.AFTER_STEP0


def test_with_only_step0_its_own_time_sets_the_threshold() -> None:
    det, _last = trained(steps=1, compile_s=300.0)
    assert det.threshold_s() == 1500.0  # 5 × 300, under the cap


def test_repeated_step_lines_from_other_tasks_do_not_count_as_progress() -> None:
    det, last = trained(steps=3, step_s=10.0)
    det.step(rec(2, 10.0), last + 100)  # srun -l: task 1 prints step 2 much later
    assert det.silent_s(last + 130) == 130
    assert det.check(last + 130, scheduler_running=True) is HangPhase.AFTER_STEP0


def test_steps_without_their_seconds_use_the_arrival_gaps() -> None:
    det = HangDetector()
    det.check(T0, scheduler_running=True)
    for n in range(5):
        det.step(n, T0 + 300 + 30 * n)
    assert det.median_step_s() == 30.0
    assert det.threshold_s() == 150.0


def test_settings_are_configurable() -> None:
    settings = HangSettings(k=2.0, floor_s=10.0, cap_s=60.0, compile_allowance_s=30.0, init_allowance_s=20.0)
    det, _last = trained(steps=5, step_s=8.0, settings=settings)
    assert det.threshold_s() == 16.0
    fresh = HangDetector(settings)
    fresh.check(T0, scheduler_running=True)
    assert fresh.check(T0 + 21, scheduler_running=True) is HangPhase.BEFORE_MEMSTATS
    fresh.memstats(T0 + 21)
    assert fresh.check(T0 + 50, scheduler_running=True) is None
    assert fresh.check(T0 + 52, scheduler_running=True) is HangPhase.BEFORE_STEP0


@pytest.mark.parametrize(
    "bad",
    [
        {"k": 0},
        {"floor_s": -1},
        {"cap_s": 0},
        {"floor_s": 300, "cap_s": 200},
        {"compile_allowance_s": 0},
        {"k": float("inf")},  # --xlatune-hang=k=1e400: a hung job would never be seen
        {"init_allowance_s": float("nan")},
    ],
)
def test_impossible_settings_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="hang setting"):
        HangSettings(**bad)


def test_update_takes_what_a_steplog_feed_returns() -> None:
    log, det = StepLog(), HangDetector()
    det.check(T0, scheduler_running=True)
    chunks = [
        b"0: Memstats: After params initialized:\n",
        b"0: completed step: 0, seconds: 200.0, Tokens/s/device: 40.0, loss: 10.8\n"
        b"1: completed step: 0, seconds: 200.0, Tokens/s/device: 40.0, loss: 10.8\n",
        b"0: completed step: 1, seconds: 20.0, Tokens/s/device: 800.0, loss: 10.7\n"
        b"0: completed step: 2, seconds: 20.0, Tokens/s/device: 800.0, loss: 10.6\n",
    ]
    for n, chunk in enumerate(chunks):
        det.update(log.feed(chunk), at=T0 + 100 * (n + 1), saw_memstats=log.saw_memstats)
    assert det.phase is HangPhase.AFTER_STEP0
    assert (det.memstats_at, det.median_step_s(), det.threshold_s()) == (T0 + 100, 20.0, 120.0)
    assert det.check(T0 + 300 + 121, scheduler_running=True) is HangPhase.AFTER_STEP0


STUCK = (
    b"E0213 12:41:17.931882   59040 rendezvous.cc:98] This thread has been waiting for "
    b"`rendezvous of collective-permute; run_id=15; op id:1` for 20 seconds and may be stuck.\n"
)


def test_a_rendezvous_stuck_warning_cuts_the_allowance_to_the_floor() -> None:
    """Before step 0 the compile allowance is 900 s; once XLA says a rendezvous is stuck and
    nothing progresses, the floor (120 s) is enough to call the hang."""
    det = HangDetector()
    assert det.check(T0, scheduler_running=True) is None
    log = StepLog()
    log.feed(b"Memstats: After params initialized:\n")
    det.update([], T0 + 60, saw_memstats=log.saw_memstats, stuck_warnings=log.stuck_warnings)
    assert det.threshold_s() == 900
    log.feed(STUCK)
    assert log.stuck_warnings == 1
    det.update([], T0 + 100, saw_memstats=True, stuck_warnings=log.stuck_warnings)
    assert det.threshold_s() == 120
    assert det.check(T0 + 60 + 119, scheduler_running=True) is None
    assert det.check(T0 + 60 + 121, scheduler_running=True) is HangPhase.BEFORE_STEP0


def test_progress_after_a_rendezvous_warning_restores_the_normal_threshold() -> None:
    det, at = trained(5)
    det.update([], at + 5, stuck_warnings=1)
    assert det.threshold_s() == 120
    det.step(rec(5, 10.0), at + 10)  # the collective went through after all
    assert det.stuck_at is None and det.threshold_s() == HangSettings().step_threshold(10.0)
    det.update([], at + 20, stuck_warnings=1)  # the same count: no new warning
    assert det.stuck_at is None
