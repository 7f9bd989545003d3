"""Failure classes over log text in the real formats, harmless lines, cascades, and judge()."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_xlatune.results import Verdict
from pytest_xlatune.triage.diagnosis import Diagnosis, Evidence, FailureClass, MemoryFigures, diagnose, judge
from pytest_xlatune.triage.hang import HangPhase
from pytest_xlatune.triage.logs import StepLog
from pytest_xlatune.triage.signatures import match_line

DATA = Path(__file__).resolve().parents[2] / "data"
F = FailureClass


@dataclass(frozen=True)
class Case:
    log: str  # relative to tests/data
    failure: FailureClass
    verdict: Verdict
    steps: int = 15
    evidence: dict[str, Any] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)  # Diagnosis attributes
    reason: tuple[str, ...] = ()  # substrings of the one-line reason

    @property
    def id(self) -> str:
        return Path(self.log).stem


def evidence_from(path: Path, steps: int, **extra: Any) -> Evidence:
    """Evidence as a watcher builds it: StepLog over the bytes, the whole text, the scheduler."""
    data = path.read_bytes()
    log = StepLog()
    log.feed(data)
    log.flush()
    return Evidence(
        last_step=log.last_step,
        expected_steps=steps,
        log_text=data.decode(),
        saw_memstats=log.saw_memstats,
        summary_status=log.summary_status,
        **extra,
    )


CASES = [
    Case("triage/success_2nodes.log", F.SUCCESS, Verdict.SUCCESS, evidence={"exit_code": 0}),
    Case("maxtext/job_success_1node.log", F.SUCCESS, Verdict.SUCCESS, steps=12, evidence={"exit_code": 0}),
    Case(
        "triage/soft_success_exit143.log",
        F.SOFT_SUCCESS,
        Verdict.SOFT_SUCCESS,
        evidence={"exit_code": 143},
        reason=("exit 143", "intact"),
    ),
    Case(
        "triage/soft_success_exit143.log", F.SOFT_SUCCESS, Verdict.SOFT_SUCCESS, evidence={"exit_code": None}
    ),  # the JOB SUMMARY alone says FAILED (exit 143)
    Case(
        "triage/cancelled_scancel.log",
        F.CANCELLED,
        Verdict.CANCELLED,
        evidence={"exit_code": 143, "scheduler_state": "CANCELLED by 0"},
    ),
    Case(
        "triage/oom_cascade.log",
        F.OOM,
        Verdict.OOM,
        evidence={"exit_code": 1},
        expect={"memory": MemoryFigures("8.00GiB", "287.98GiB", "241.50GiB"), "node": "gpu-a07"},
        reason=("8.00GiB", "Total memory 287.98GiB", "Temp 241.50GiB"),
    ),
    Case(
        "logs/oom.log",
        F.OOM,
        Verdict.OOM,
        evidence={"exit_code": 1},
        expect={"memory": MemoryFigures("24.00GiB", None, "251.08GiB")},
        reason=("allocating 24.00GiB",),
    ),
    Case(
        "maxtext/job_fault_oom_2nodes.log",
        F.OOM,
        Verdict.OOM,
        steps=6,
        evidence={"exit_code": 1},
        expect={"memory": MemoryFigures("8589934592 bytes", "64.00GiB", None), "label": "oom-gpu"},
    ),
    Case(
        "logs/unknown-flag.log",
        F.UNKNOWN_FLAG,
        Verdict.UNKNOWN_FLAG,
        evidence={"exit_code": 1},
        expect={"flag": "--xla_gpu_enable_obsolete_thing"},
        reason=("Unknown flag in XLA_FLAGS: --xla_gpu_enable_obsolete_thing=true",),
    ),
    Case(
        "triage/rccl_init_flake_hung.log",
        F.RCCL_INIT_FLAKE,
        Verdict.RCCL_INIT_FLAKE,
        evidence={"exit_code": 143, "cancelled_by_us": True, "hang_phase": HangPhase.BEFORE_MEMSTATS},
        expect={"phase": HangPhase.BEFORE_MEMSTATS, "node": "gpu-a08", "rank": 1},
        reason=("before Memstats", "init.cc"),
    ),
    Case(
        "triage/rccl_init_error.log",
        F.RCCL_INIT_FLAKE,
        Verdict.RCCL_INIT_FLAKE,
        evidence={"exit_code": 1},
        expect={"node": "gpu-a08"},
        reason=("bootstrap.cc",),
    ),
    Case(
        "triage/coordination_timeout.log",
        F.COORDINATION_TIMEOUT,
        Verdict.COORDINATION_TIMEOUT,
        evidence={"exit_code": 1},
        reason=("GetKeyValue() timed out",),
    ),
    Case(
        "triage/heartbeat_timeout.log",
        F.HEARTBEAT_TIMEOUT,
        Verdict.HEARTBEAT_TIMEOUT,
        evidence={"exit_code": 134},
        expect={"node": "gpu-b03"},
    ),
    Case(
        "triage/nccl_timeout.log",
        F.NCCL_TIMEOUT,
        Verdict.NCCL_TIMEOUT,
        evidence={"exit_code": 1},
        reason=("Timeout waiting for peer rank 14",),
    ),
    Case(
        "triage/xla_compile_fail.log",
        F.XLA_COMPILE_FAIL,
        Verdict.XLA_COMPILE_FAIL,
        evidence={"exit_code": 1},
        reason=("Failed to compile module jit_train_step",),
    ),
    Case(
        "triage/python_exception.log",
        F.PYTHON_EXCEPTION,
        Verdict.PYTHON_EXCEPTION,
        evidence={"exit_code": 1},
        reason=("ValueError: num_pipeline_microbatches 6 must be a multiple of pipeline stages 4",),
    ),
    Case(
        "triage/gpu_runtime_error.log",
        F.GPU_RUNTIME_ERROR,
        Verdict.GPU_RUNTIME_ERROR,
        evidence={"exit_code": 134},
        expect={"node": "gpu-a10", "rank": 3},
        reason=("HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION",),
    ),
    Case(
        "triage/nic_fault_hung.log",
        F.NIC_FAULT,
        Verdict.NIC_FAULT,
        evidence={"exit_code": 143, "cancelled_by_us": True, "hang_phase": HangPhase.BEFORE_STEP0},
        expect={"node": "gpu-a09", "rank": 2},
        reason=("cqe with error",),
    ),
    Case(
        "triage/node_fail_slurm.log",
        F.NODE_FAIL,
        Verdict.NODE_FAIL,
        evidence={"exit_code": None, "scheduler_state": "NODE_FAIL"},
        expect={"node": "gpu-a08"},
    ),
    Case(
        "triage/node_fail_slurm.log", F.NODE_FAIL, Verdict.NODE_FAIL, evidence={"exit_code": None}
    ),  # sacct unavailable: srun's `Node failure on` line says it
    Case(
        "triage/node_exit_137.log",
        F.NODE_FAIL,
        Verdict.NODE_FAIL,
        evidence={"exit_code": 137},
        expect={"node": "gpu-a08"},
        reason=("137",),
    ),
    Case(
        "triage/hang_after_step0.log",
        F.HANG,
        Verdict.HANG,
        evidence={"exit_code": 143, "cancelled_by_us": True, "hang_phase": HangPhase.AFTER_STEP0},
        expect={"phase": HangPhase.AFTER_STEP0},
        reason=("after step 3",),
    ),
    Case(
        "triage/silent_oom_before_step0.log",
        F.OOM,
        Verdict.OOM,
        evidence={"exit_code": 143, "cancelled_by_us": True, "hang_phase": HangPhase.BEFORE_STEP0},
        expect={"phase": HangPhase.BEFORE_STEP0, "label": "silent-oom"},
        reason=("silent OOM",),
    ),
    Case(
        "triage/train_timeout.log",
        F.HANG,
        Verdict.HANG,
        evidence={"exit_code": 124},
        expect={"phase": HangPhase.AFTER_STEP0},
        reason=("time limit",),
    ),
    # A full disk says RESOURCE_EXHAUSTED too: it is no OOM (never xfailed, the session stops).
    Case(
        "triage/disk_full_hlo_dump.log",
        F.DISK_FULL,
        Verdict.DISK_FULL,
        evidence={
            "exit_code": 143,
            "cancelled_by_us": True,
            "oom_line": "0: E1201 20:28:36.542262   26098 dump.cc:266] Could not write XLA debug "
            "data to /scratch/xla_dump/module_0004.jit__lambda.debug_options: "
            "RESOURCE_EXHAUSTED: /scratch/xla_dump/module_0004.jit__lambda."
            "debug_options; No space left on device",
        },
        expect={"label": "disk-full"},
        reason=("not an OOM", "/scratch/xla_dump/", "No space left"),
    ),
]


def named(stem: str) -> Case:
    return next(c for c in CASES if c.id == stem)


def run(case: Case, text_edit: Any = None) -> Diagnosis:
    path = DATA / case.log
    ev = evidence_from(path, case.steps, **case.evidence)
    if text_edit is not None:
        ev = Evidence(**{**ev.__dict__, "log_text": text_edit(ev.log_text)})
    return diagnose(ev)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.id}-{i}" for i, c in enumerate(CASES)])
def test_each_recorded_log_gets_its_class_verdict_and_details(case: Case) -> None:
    d = run(case)
    assert (d.failure, d.verdict) == (case.failure, case.verdict), d.reason
    for name, value in case.expect.items():
        assert getattr(d, name) == value, name
    for text in case.reason:
        assert text in d.reason
    assert "\n" not in d.reason
    assert d.verdict.measured == (case.failure in (F.SUCCESS, F.SOFT_SUCCESS))


HARMLESS = [
    "0: E0514 09:12:03.118207   20981 cuda_executor.cc:1228] failed call to cuInit: INTERNAL: CUDA "
    "error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "1: gpu-a08:20977:21530 [0] init.cc:2044 NCCL WARN MSCCL++: Feature not enabled. "
    "ENABLE_MSCCLPP must be defined at compile-time",
    "0: gpu-a07:20981:21544 [0] rccl_wrap.cc:281 NCCL WARN LL cutoff points not detected for a supported arch gfx950",
    # a task no recorded log has, so that the rank → host map of each log stays as recorded
    "srun: error: gpu-a14: task 7: Exited with exit code 143",
    "7: NODE_EXIT host=gpu-a14 exit=143",
    "WARNING: AMD GPU device(s) is/are in a low-power state",
    "0: W0514 20:09:41.220117   20981 bfc_allocator.cc:296] Allocator (GPU_0_bfc) ran out of memory "
    "trying to allocate 12.00GiB with freed_by_count=0. The caller indicates that this is not a "
    "failure, but this may mean that there could be performance gains if more memory were available.",
    "0: I0514 17:05:00.004122   5510 topology.cc:214] Cannot read CPU core 191",
]


def sprinkle(text: str) -> str:
    """Put every harmless line after the header, in the middle and before the trailer."""
    lines = text.splitlines()
    for at in (len(lines) - 3, len(lines) // 2, 8):
        lines[at:at] = HARMLESS
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("case", CASES, ids=[f"{c.id}-{i}" for i, c in enumerate(CASES)])
def test_harmless_but_alarming_lines_never_change_the_diagnosis(case: Case) -> None:
    plain, noisy = run(case), run(case, sprinkle)
    assert (noisy.failure, noisy.verdict, noisy.reason) == (plain.failure, plain.verdict, plain.reason)


def test_harmless_lines_alone_leave_a_complete_run_a_success() -> None:
    text = "\n".join(HARMLESS * 50)
    d = diagnose(Evidence(last_step=14, expected_steps=15, exit_code=0, log_text=text))
    assert d.failure is F.SUCCESS and d.also == ()


def test_harmless_lines_alone_give_no_failure_class_to_a_job_without_steps() -> None:
    d = diagnose(Evidence(last_step=None, expected_steps=15, exit_code=1, log_text="\n".join(HARMLESS)))
    assert (d.failure, d.verdict) == (F.UNKNOWN, Verdict.NO_STEPS)


def test_oom_cascade_reports_the_consequences_but_blames_the_oom() -> None:
    d = run(named("oom_cascade"))
    assert d.failure is F.OOM
    assert F.HEARTBEAT_TIMEOUT in d.also and F.PYTHON_EXCEPTION in d.also


def test_a_traceback_before_a_heartbeat_timeout_is_the_root_cause() -> None:
    text = (
        "0: completed step: 3, seconds: 9.8, Tokens/s/device: 800.0, loss: 9.1\n"
        "1: Traceback (most recent call last):\n"
        '1:   File "/deps/src/MaxText/train.py", line 466, in train_loop\n'
        "1: RuntimeError: Unexpected NaN in the gradients of decoder/layers_3\n"
        "0: jax.errors.JaxRuntimeError: UNAVAILABLE: The following tasks are unhealthy "
        "(stopped sending heartbeats):\n"
    )
    d = diagnose(Evidence(last_step=3, expected_steps=15, exit_code=1, log_text=text))
    assert d.failure is F.PYTHON_EXCEPTION
    assert "RuntimeError: Unexpected NaN" in d.reason
    assert d.also == (F.HEARTBEAT_TIMEOUT,)


def test_a_traceback_that_ends_in_the_coordination_timeout_is_that_timeout() -> None:
    assert run(named("coordination_timeout")).also == (F.PYTHON_EXCEPTION, F.NODE_FAIL)


@pytest.mark.parametrize(
    "line",
    [
        # JAX's own wording (docs/…/fault-tolerance.rst) and the older one of the maxtext-slurm postmortem.
        "E0929 17:42:48.594192 1044529 coordination_service_agent.cc:332] Polled an error from coordination"
        " service (this can be an error from this or another task).",
        "E0212 19:58:10 coordination_service_agent.cc:310] Polled error from coordination service",
    ],
)
def test_a_task_that_polled_the_coordination_error_hints_at_a_heartbeat_death(line: str) -> None:
    d = diagnose(Evidence(last_step=3, expected_steps=15, exit_code=1, log_text=line))
    assert (d.failure, d.label) == (F.HEARTBEAT_TIMEOUT, "coordination-death")


def test_nccl_timeout_outranked_by_scheduler_node_fail() -> None:
    plain = diagnose(
        Evidence(
            last_step=2,
            expected_steps=15,
            exit_code=1,
            log_text=("0: gpu-a07:4736:5098 [3] enqueue.cc:1622 NCCL WARN Timeout waiting for peer rank 9\n"),
        )
    )
    assert plain.failure is F.NCCL_TIMEOUT
    lost = diagnose(
        Evidence(last_step=2, expected_steps=15, exit_code=None, scheduler_state="NODE_FAIL", log_text=plain.line)
    )
    assert lost.failure is F.NODE_FAIL and "consequences" in lost.reason


def test_rccl_warnings_a_job_trained_past_are_ignored() -> None:
    text = (
        "1: gpu-a08:6117:6690 [4] init.cc:1611 NCCL WARN Bootstrap: no response from rank 0 "
        "after 300 seconds, still waiting\n"
        "0: completed step: 0, seconds: 180.0, Tokens/s/device: 45.0, loss: 10.8\n"
        "0: completed step: 1, seconds: 9.8, Tokens/s/device: 831.0, loss: 10.8\n"
    )
    d = diagnose(Evidence(last_step=1, expected_steps=15, exit_code=1, log_text=text))
    assert (d.failure, d.verdict) == (F.UNKNOWN, Verdict.FAILED) and d.also == ()


def test_a_tail_without_step_lines_counts_as_after_the_steps_the_job_made() -> None:
    line = "0: gpu-a07:4736:5098 [3] init.cc:1622 NCCL WARN Timeout waiting for peer rank 9"
    during = diagnose(Evidence(last_step=7, expected_steps=15, exit_code=1, log_text=line))
    before = diagnose(Evidence(last_step=None, expected_steps=15, exit_code=1, log_text=line))
    assert (during.failure, before.failure) == (F.NCCL_TIMEOUT, F.RCCL_INIT_FLAKE)


@pytest.mark.parametrize(
    ("state", "saw_memstats", "last_step", "failure", "phase"),
    [
        ("TIMEOUT", False, None, F.HANG, HangPhase.BEFORE_MEMSTATS),
        ("TIMEOUT", True, None, F.OOM, HangPhase.BEFORE_STEP0),
        ("TIMEOUT", True, 4, F.HANG, HangPhase.AFTER_STEP0),
    ],
)
def test_a_slurm_time_limit_is_a_hang_in_the_phase_the_log_reached(
    state: str, saw_memstats: bool, last_step: int | None, failure: FailureClass, phase: HangPhase
) -> None:
    d = diagnose(
        Evidence(
            last_step=last_step, expected_steps=15, exit_code=None, scheduler_state=state, saw_memstats=saw_memstats
        )
    )
    assert (d.failure, d.phase) == (failure, phase)


def test_host_oom_from_the_kernel_line_and_from_the_scheduler() -> None:
    text = "[Wed May 14 21:00:00 2025] Memory cgroup out of memory: Killed process 4736 (python3)"
    assert diagnose(Evidence(None, 15, 137, log_text=text)).label == "oom-host"
    d = diagnose(Evidence(None, 15, None, scheduler_state="OUT_OF_MEMORY"))
    assert (d.failure, d.label) == (F.OOM, "oom-host")


def test_infrastructure_lines_without_a_class_name_their_label() -> None:
    d = diagnose(Evidence(None, 15, 1, log_text="[ERROR] Pull failed for rocm/jax-training:maxtext-v26.2"))
    assert (d.failure, d.verdict, d.label) == (F.UNKNOWN, Verdict.NO_STEPS, "container-pull-fail")
    assert d.reason.startswith("container-pull-fail: [ERROR] Pull failed")


def test_a_complete_run_counts_whatever_failed_in_teardown() -> None:
    text = (
        "0: completed step: 14, seconds: 9.8, Tokens/s/device: 831.0, loss: 7.7\n"
        "1: Traceback (most recent call last):\n1: ray.exceptions.RayActorError: The actor died\n"
        "  Status: FAILED (exit 1)\n"
    )
    d = diagnose(Evidence(last_step=14, expected_steps=15, exit_code=1, log_text=text))
    assert (d.failure, d.verdict) == (F.SOFT_SUCCESS, Verdict.SOFT_SUCCESS)


def test_memory_figures_convert_the_requested_size() -> None:
    figures = MemoryFigures("25769803776 bytes", "287.98GiB", "251.08GiB")
    assert figures.requested_bytes == 24 << 30
    assert str(figures) == "allocating 24.00GiB, Total memory 287.98GiB, Temp 251.08GiB"
    assert MemoryFigures("8.00GiB").requested_bytes == 8 << 30
    assert MemoryFigures("15.65G").requested_bytes == int(15.65 * (1 << 30))  # the TPU runtime's size


# ---- judge(): what session.py passes today (no text, no scheduler state) --------------------

UNKNOWN = (
    "F1130 23:52:50.797934    4736 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: "
    "--xla_gpu_enable_obsolete_thing=true"
)


@pytest.mark.parametrize(
    ("evidence", "verdict", "reason"),
    [
        (
            Evidence(None, 15, 1, unknown_flag_line=UNKNOWN),
            Verdict.UNKNOWN_FLAG,
            "Unknown flag in XLA_FLAGS: --xla_gpu_enable_obsolete_thing=true",
        ),
        (
            Evidence(None, 15, 1, unknown_flag_line=UNKNOWN, oom_line="RESOURCE_EXHAUSTED: x"),
            Verdict.UNKNOWN_FLAG,
            "--xla_gpu_enable_obsolete_thing",
        ),
        (
            Evidence(
                None, 15, 1, oom_line="RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes."
            ),
            Verdict.OOM,
            "out of memory (allocating 8.00GiB)",
        ),
        (Evidence(14, 15, 0), Verdict.SUCCESS, ""),
        (Evidence(14, 15, None), Verdict.SUCCESS, ""),
        (Evidence(14, 15, 143), Verdict.SOFT_SUCCESS, "exit 143 after the last step"),
        (Evidence(3, 15, 143, cancelled_by_us=True), Verdict.CANCELLED, "cancelled by this session"),
        (Evidence(None, 15, 1), Verdict.NO_STEPS, "exited with code 1 before any completed step"),
        (Evidence(3, 15, 1), Verdict.FAILED, "exited with code 1 after step 3 of 15"),
    ],
)
def test_judge_keeps_working_for_session_evidence(evidence: Evidence, verdict: Verdict, reason: str) -> None:
    got, why = judge(evidence)
    assert got is verdict
    assert reason in why


def test_judge_on_what_session_passes_for_the_recorded_oom_log() -> None:
    log = StepLog()
    log.feed((DATA / "logs" / "oom.log").read_bytes())
    first = next(s.line for s in log.signals if s.kind.value == "oom")
    assert "bfc_allocator" in first  # StepLog's first OOM signal is the allocator's line
    verdict, reason = judge(Evidence(log.last_step, 15, 1, oom_line=first))
    assert verdict is Verdict.OOM and "allocating 24.00GiB" in reason


def test_a_benign_allocator_warning_passed_as_the_oom_line_is_not_an_oom() -> None:
    line = HARMLESS[6].split(": ", 1)[1]
    assert judge(Evidence(3, 15, 1, oom_line=line))[0] is Verdict.FAILED


def test_only_success_verdicts_are_measured() -> None:
    # and an adaptive early stop: its partial steady state is a measurement, never a failure
    assert {v for v in Verdict if v.measured} == {Verdict.SUCCESS, Verdict.SOFT_SUCCESS, Verdict.STOPPED_EARLY}
    assert {v.value for v in Verdict} >= {
        "success",
        "soft_success",
        "unknown_flag",
        "oom",
        "failed",
        "cancelled",
        "no_steps",
    }


def test_a_rendezvous_stuck_warning_after_memstats_is_a_hang_not_a_silent_oom() -> None:
    log = StepLog()
    log.feed(
        b"0: Memstats: After params initialized:\n"
        b"0: E0927 01:19:23.978061 2521 rendezvous.cc:55] This thread has been waiting for "
        b"`first call to collective operation 0; run_id=0` for 20 seconds and may be stuck.\n"
    )
    d = diagnose(Evidence.from_log(log, 15, scheduler_state="TIMEOUT", exit_code=0))
    assert d.failure is F.HANG and d.phase is HangPhase.BEFORE_STEP0 and d.label == "rendezvous-stuck"
    assert "first call to collective operation 0" in d.reason
    silent = StepLog()
    silent.feed(b"0: Memstats: After params initialized:\n")
    assert diagnose(Evidence.from_log(silent, 15, scheduler_state="TIMEOUT")).failure is F.OOM


def test_a_time_limit_does_not_hide_an_exception_far_above_the_end() -> None:
    log = StepLog()
    log.feed(
        b"0: completed step: 0, seconds: 1.0, Tokens/s/device: 5.0, loss: 2.0\n"
        b'0: Traceback (most recent call last):\n0:   File "train.py", line 9, in <module>\n'
        b"0:     main()\n0: ValueError: bad shape\n"
        + b"".join(b"0: I1201 12:00:00 waiting for the others %d\n" % i for i in range(500))
    )
    d = diagnose(Evidence.from_log(log, 15, scheduler_state="TIMEOUT", exit_code=0))
    assert d.failure is F.PYTHON_EXCEPTION and d.reason == "Python exception on task 0: ValueError: bad shape"


def test_an_exception_printed_after_slurms_time_limit_line_follows_from_the_kill() -> None:
    log = StepLog()
    log.feed(
        b"0: completed step: 3, seconds: 1.0, Tokens/s/device: 5.0, loss: 2.0\n"
        b"slurmstepd: error: *** JOB 7 ON node01 CANCELLED AT 2026-12-01T10:00:00 DUE TO TIME LIMIT ***\n"
        b'0: Traceback (most recent call last):\n0:   File "train.py", line 9, in <module>\n'
        b"0: RuntimeError: Received signal 15\n"
    )
    d = diagnose(Evidence.from_log(log, 15, scheduler_state="TIMEOUT", exit_code=0))
    assert d.failure is F.HANG and d.phase is HangPhase.AFTER_STEP0
    before = StepLog()  # the same exception before the time limit is the root cause
    before.feed(
        b"0: completed step: 3, seconds: 1.0, Tokens/s/device: 5.0, loss: 2.0\n"
        b"0: RuntimeError: shapes do not match\n"
        b"slurmstepd: error: *** JOB 7 ON node01 CANCELLED AT 2026-12-01T10:00:00 DUE TO TIME LIMIT ***\n"
    )
    d = diagnose(Evidence.from_log(before, 15, scheduler_state="TIMEOUT", exit_code=0))
    assert d.failure is F.PYTHON_EXCEPTION and "RuntimeError: shapes do not match" in d.reason


@pytest.mark.parametrize(
    "line, name",
    [
        ("0: ValueError: bad shape", "ValueError"),
        ("[231844] ValueError: Tried to step", "ValueError"),
        ("(MaxTextTrainer pid=1, ip=10.0.0.1) RuntimeError: boom", "RuntimeError"),
        (
            "E1201 12:00:00.1 1 train.py:45] jaxlib.xla_extension.XlaRuntimeError: INTERNAL: x",
            "jaxlib.xla_extension.XlaRuntimeError",
        ),
        ("[1]<stderr>:RuntimeError: boom", "RuntimeError"),
        ("AssertionError", "AssertionError"),
        ("W0101 x.cc:1] Retrying after TransientError", None),  # a name mid-sentence
        ("I1201 a.py:1] Failed to save: ValueError: x", None),  # a handled error, logged
        ("KeyboardInterrupt", None),  # follows a cancel
    ],
)
def test_an_exception_line_behind_any_log_prefix_is_root_cause_evidence(line: str, name: str | None) -> None:
    found = match_line(line, steps_done=False, after_step=False)
    got = found[1].group("exc") if found and found[0].label == "python-exception-line" else None
    assert got == name


@pytest.mark.parametrize(
    "line",
    [
        "0: OSError: [Errno 122] Disk quota exceeded: '/home/u/maxtext/outputs/91512/ckpt'",
        "0: OSError: [Errno 5] Input/output error: '/lustre/run/xla_dump/module_0001.txt'",
        "0: E1201 dump.cc:266] Could not write XLA debug data: RESOURCE_EXHAUSTED: /d; No space left on device",
    ],
)
def test_disk_full_quota_and_io_errors_are_disk_full_never_oom(line: str) -> None:
    diagnosis = diagnose(
        Evidence(
            last_step=3,
            expected_steps=15,
            exit_code=1,
            log_text=line + "\n",
            oom_line=line if "RESOURCE_EXHAUSTED" in line else None,
        )
    )
    assert diagnosis.failure is F.DISK_FULL and diagnosis.verdict is Verdict.DISK_FULL
    assert line.split(": ", 1)[1][:30] in diagnosis.reason


@pytest.mark.parametrize("prefix", ["", "0: ", "(RayTrainWorker pid=77, ip=10.0.0.2) "])
def test_an_exception_right_under_a_frame_without_source_is_the_exception(prefix: str) -> None:
    """Ray and Cython frames print no source line: the exception line follows the frame directly,
    and is the exception, while a deeper-indented line under a frame is the frame's source."""
    frame = f'{prefix}  File "/opt/maxtext/train.py", line 24, in run\n'
    source = diagnose(Evidence(None, 10, exit_code=1, log_text=frame + f"{prefix}    raise ValueError(x)\n"))
    assert source.failure is FailureClass.UNKNOWN
    got = diagnose(Evidence(None, 10, exit_code=1, log_text=frame + f"{prefix}TypeError: bad 'loops'\n"))
    assert got.failure is FailureClass.PYTHON_EXCEPTION and "TypeError: bad 'loops'" in got.reason


def test_a_long_line_is_quoted_from_the_clause_that_holds_the_evidence() -> None:
    head = "2023-04-16 15:44:18.280050: E pjrt_stream_executor_client.cc:2432] " + "x" * 300
    line = f"{head}: nccl_all_reduce_thunk.cc:244: NCCL operation ncclGroupEnd() failed: unhandled cuda error."
    got = diagnose(Evidence(None, 10, exit_code=1, log_text=line))
    assert got.failure is FailureClass.RCCL_INIT_FLAKE
    assert got.reason.endswith("…NCCL operation ncclGroupEnd() failed: unhandled cuda error.")


@pytest.mark.parametrize(
    "warning",
    [
        "WARNING:jax._src.xla_bridge:CUDA backend failed to initialize: FAILED_PRECONDITION: No visible GPU devices."
        " (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)",
        "I0923 21:58:25.539228 139973430083584 xla_bridge.py:513] Unable to initialize backend 'cuda':"
        " FAILED_PRECONDITION: No visible GPU devices.",
    ],
)
def test_jax_falling_back_to_cpu_is_no_gpu_fault(warning: str) -> None:
    """A job allowed to run on CPU says no GPU was found and carries on: what ends it decides."""
    text = f"{warning}\nTraceback (most recent call last):\nValueError: bad mesh\n"
    d = diagnose(Evidence(last_step=None, expected_steps=15, exit_code=1, log_text=text))
    assert (d.failure, d.label) == (F.PYTHON_EXCEPTION, "python-exception-line"), d.reason
    fatal = "jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: No visible GPU devices."
    d = diagnose(Evidence(last_step=None, expected_steps=15, exit_code=1, log_text=f"{warning}\n{fatal}\n"))
    assert (d.failure, d.label) == (F.GPU_RUNTIME_ERROR, "gpu-unavailable"), d.reason
