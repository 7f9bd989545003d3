"""Failure-message families the third corpus round found misread: each test names a family by a
line of a different member than the corpus case (tests/data/logs/real/) holds."""

from __future__ import annotations

import pytest

from pytest_xlatune.results import Verdict
from pytest_xlatune.triage.diagnosis import Evidence, FailureClass, diagnose
from pytest_xlatune.triage.hang import HangDetector
from pytest_xlatune.triage.lines import parse_step_line
from pytest_xlatune.triage.logs import StepLog

F = FailureClass


def _diagnose(text: str, last_step: int | None = None, **kw: object) -> object:
    log = StepLog()
    log.feed(text.encode())
    log.flush()
    kw.setdefault("exit_code", 1)
    return diagnose(Evidence.from_log(log, 15 if last_step is None else last_step + 100, **kw))


@pytest.mark.parametrize(
    ("line", "failure", "label"),
    [
        # absl's flag parser (libtpu, a Pathways proxy, a MaxText script's own absl flags)
        (
            "absl.flags._exceptions.UnrecognizedFlagError: Unknown command line flag 'xla_tpu_foo'",
            F.UNKNOWN_FLAG,
            "unknown-flag",
        ),
        # the JAX coordinator: not reachable, or a task came back under a new incarnation
        (
            "E0101 client.cc:1] Failed to connect: UNAVAILABLE: failed to connect to all addresses; last error: "
            "UNKNOWN: ipv4:10.0.0.1:1234: Connection refused",
            F.COORDINATION_TIMEOUT,
            "coordination-unreachable",
        ),
        (
            "ABORTED: /job:jax_worker/replica:0/task:3 unexpectedly tried to connect with a different incarnation. "
            "It has likely restarted.",
            F.COORDINATION_TIMEOUT,
            "coordination-restarted",
        ),
        # Slurm's memory enforcement and an older kernel's OOM killer are host OOMs
        ("slurmstepd: error: Job 42664148 exceeded memory limit (10889240 > 4194304), being killed", F.OOM, "oom-host"),
        ("srun: Exceeded job memory limit", F.OOM, "oom-host"),
        ("[12345.678901] Out of memory: Kill process 4242 (python3) score 901 or sacrifice child", F.OOM, "oom-host"),
        # the cuda_async allocator's line, also without the CUDA error's name (a marin run log)
        (
            "E gpu_cudamallocasync_allocator.cc:359] cuMemAllocAsync failed to allocate 281923031072 bytes",
            F.OOM,
            "oom-gpu",
        ),
        # Go tools and tar report a full disk in lower case
        ("tar: usr/lib/libcudnn.so.8: Cannot write: no space left on device", F.DISK_FULL, "disk-full"),
        # Pallas kernels' Mosaic compiler
        (
            "jax.errors.JaxRuntimeError: INTERNAL: Mosaic failed to compile TPU kernel: Bad lhs type",
            F.XLA_COMPILE_FAIL,
            "xla-compile-fail",
        ),
        # a GPU node not ready (NVSwitch systems before the fabric manager runs): the cuInit probe's
        # failure, noise in its other wordings, is the cause here
        (
            "0: E0528 07:52:27.737669 cuda_platform.cc:51] failed call to cuInit: INTERNAL: CUDA error: Failed "
            "call to cuInit: CUDA_ERROR_SYSTEM_NOT_READY: system not yet initialized",
            F.GPU_RUNTIME_ERROR,
            "gpu-runtime-error",
        ),
        # the driver refusing the code XLA built (the corpus holds CUDA_ERROR_INVALID_IMAGE)
        (
            "E0101 cuda_executor.cc:1] Failed to load in-memory CUBIN: CUDA_ERROR_NO_BINARY_FOR_GPU: no kernel "
            "image is available for execution on the device",
            F.XLA_COMPILE_FAIL,
            "no-binary-for-gpu",
        ),
        (
            '"hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"\nAborted (core dumped)',
            F.XLA_COMPILE_FAIL,
            "no-binary-for-gpu",
        ),
        # XLA's FATAL check, srun-prefixed and with a newer absl timestamp (openxla/xla#47373's wording)
        (
            "0: F0000 00:00:1786849858.256082 3893849 computation_partitioner.cc:269] Check failed: "
            "operand_maps.size() == 1 (0 vs. 1)\n0: *** Check failure stack trace: ***\nAborted (core dumped)",
            F.XLA_COMPILE_FAIL,
            "xla-check-failed",
        ),
        # sticky CUDA errors beyond the illegal address, and the GPU's own reset and RAS reports
        (
            "E0101 cuda_executor.cc:1] CUDA_ERROR_MISALIGNED_ADDRESS: misaligned address",
            F.GPU_RUNTIME_ERROR,
            "gpu-runtime-error",
        ),
        ("[1.0] amdgpu 0000:1c:00.0: amdgpu: GPU reset begin!", F.GPU_RUNTIME_ERROR, "gpu-runtime-error"),
        # the NVLink fabric's uncorrectable error, as XLA quotes the CUDA error's text
        (
            "E0821 04:06:44.000000 7 pjrt_client.cc:1] Execution of replica 0 failed: INTERNAL: CUDA error: "
            "uncorrectable NVLink error detected during the execution",
            F.GPU_RUNTIME_ERROR,
            "gpu-runtime-error",
        ),
        (
            "[1.0] amdgpu 0000:e6:00.0: {1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!",
            F.GPU_RUNTIME_ERROR,
            "gpu-runtime-error",
        ),
        # slurmd could not start the tasks on a node
        (
            "srun: error: Task launch for StepId=20.0 failed on node gpu-st-38: Socket timed out on send/recv operation",
            F.NODE_FAIL,
            "slurm-launch-failed",
        ),
        # a task a signal killed, with nothing fatal before it
        ("srun: error: gpu-a07: task 3: Bus error (core dumped)", F.NODE_FAIL, "task-signal"),
        # the same crash in Python's faulthandler words and the batch shell's job report
        ("Fatal Python error: Bus error", F.NODE_FAIL, "task-signal"),
        (
            "/var/spool/slurmd/job4242/slurm_script: line 12:  4242 Aborted                 (core dumped) python3 train.py",
            F.NODE_FAIL,
            "task-signal",
        ),
        ("Floating point exception (core dumped)", F.NODE_FAIL, "task-signal"),
        # a failed CUDA/HIP call NCCL/RCCL returns as an error (at init: before any step)
        (
            "gpu-a07:71:90 [0] /src/transport/p2p.cc:237 NCCL WARN Cuda failure 'invalid argument'",
            F.RCCL_INIT_FLAKE,
            "rccl-init-flake",
        ),
        # the node's RDMA adapter in the two wordings the corpus lacks (net_ib.cc's formats; the corpus holds
        # the oldest `Got async event : port error` and the newest `Got async error event: port error`)
        (
            "gpu-a07:71:90 [0] transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_0:1 Got async event : port error",
            F.NIC_FAULT,
            "nic-port-down",
        ),
        (
            "gpu-a07:71:90 [0] transport/net_ib.cc:190 NCCL WARN NET/IB : mlx5_3:1 async fatal event: local "
            "catastrophic error",
            F.NIC_FAULT,
            "nic-adapter-fatal",
        ),
        # Slurm's reasons for a cancel besides scancel
        (
            "slurmstepd: error: *** STEP 608.0 ON gpu-a07 CANCELLED AT 2022-08-12T02:06:12 DUE TO JOB REQUEUE ***",
            F.CANCELLED,
            "slurm-cancelled",
        ),
    ],
)
def test_a_family_member_gets_its_class(line: str, failure: FailureClass, label: str) -> None:
    got = _diagnose(line + "\n")
    assert (got.failure, got.label) == (failure, label), got.reason
    far = _diagnose(line + "\n" + "I1201 12:00:00 profiler_session.cc:121] collecting\n" * 200)
    assert (far.failure, far.label) == (failure, label), "not streamed: lost once the tail moves on"


@pytest.mark.parametrize(
    "line",
    [
        "slurmstepd: error: Exceeded step memory limit at some point.",  # a warning jobs survive
        "W0101 client.cc:1] WatchTasksAsync failed: CANCELLED: Cancelled",
        "srun: error: gpu-a07: task 3: Exited with exit code 143",  # scancel's cascade
        # HIP's AMD_LOG_LEVEL=5 trace of a library without code for this GPU: it goes on (ROCm/ROCm#4208)
        ":3:hip_platform.cpp         :715 : 8802962852 us: [pid:19349 tid:0x14dec9d33080] init: Returned "
        "hipErrorNoBinaryForGpu : continue parsing remaining modules",
    ],
)
def test_lines_next_to_the_families_are_no_failure(line: str) -> None:
    assert _diagnose(line + "\n").failure is F.UNKNOWN


@pytest.mark.parametrize(
    "line",
    [
        # the port coming back, and the subnet manager asking clients to re-register (printed right after
        # init in deepspeedai/DeepSpeed#3272's log)
        "gpu-a07:71:90 [0] transport/net_ib.cc:199 NCCL WARN NET/IB : mlx5_32:1 Got async error event: port active",
        "gpu1:5021:5386 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : client reregistration",
        # one connection's queue pair, not the adapter (NVIDIA/nccl#1919)
        "node-0:139577:139678 [0] transport/net_ib.cc:154 NCCL WARN NET/IB : mlx5_1:1 async fatal event on QP "
        "(0x7309dc3bb338): invalid request local work queue error",
    ],
)
def test_ib_async_events_that_are_no_nic_fault(line: str) -> None:
    assert _diagnose(line + "\n").failure is not F.NIC_FAULT


def test_the_quoted_flag_is_named_and_cancels_on_sight() -> None:
    log = StepLog()
    log.feed(b"ERROR: Unknown command line flag 'xla_latency_hiding_scheduler_rerun'\n")
    assert log.unknown_flag == "xla_latency_hiding_scheduler_rerun"
    assert diagnose(Evidence.from_log(log, 15, exit_code=1)).flag == "xla_latency_hiding_scheduler_rerun"


def test_the_cuda_async_allocator_s_request_is_the_oom_figure() -> None:
    got = _diagnose("E gpu_cudamallocasync_allocator.cc:359] cuMemAllocAsync failed to allocate 281923031072 bytes\n")
    assert got.memory is not None and got.memory.requested_bytes == 281923031072
    assert "allocating 262.56GiB" in got.reason  # the figure JAX's RESOURCE_EXHAUSTED line names


def test_a_task_the_coordination_service_stopped_is_not_called_a_heartbeat_timeout() -> None:
    got = _diagnose(
        "F0929 17:42:48.594200 1044529 client.h:77] Terminating process because the JAX distributed service "
        "detected fatal errors. This most likely indicates that another task died\n"
    )
    assert (got.failure, got.label) == (F.HEARTBEAT_TIMEOUT, "coordination-death")
    assert "heartbeat" not in got.reason and "another task died" in got.reason, got.reason


def test_a_crash_reported_by_the_process_and_by_srun_names_srun_s_node() -> None:
    text = (
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007fba32f6c180 (most recent call first):\n"
        '  File "/venv/lib/python3.10/site-packages/jax/_src/xla_bridge.py", line 322 in _version_check\n'
        "srun: error: gpu-a07: task 0: Segmentation fault\n"
    )
    got = _diagnose(text)
    assert (got.failure, got.label, got.node) == (F.NODE_FAIL, "task-signal", "gpu-a07"), got.reason


def test_a_tpu_fault_beats_the_python_exception_reporting_it() -> None:
    text = (
        "0: 6x2x0_SC0: *** A program or fatal error occurred, all pending programs will fail, and results may be "
        "corrupted. Physical location: tpu3:pe2:2\n"
        "0: Traceback (most recent call last):\n"
        '0:   File "/app/MaxText/train.py", line 1, in <module>\n'
        "0: jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Core halted unexpectedly\n"
    )
    got = _diagnose(text)
    assert (got.failure, got.label) == (F.GPU_RUNTIME_ERROR, "tpu-device-fault"), got.reason
    far = _diagnose(text + "I1201 12:00:00 profiler_session.cc:121] collecting\n" * 200)
    assert far.label == "tpu-device-fault", "not streamed: lost once the tail moves on"


def test_a_signal_after_a_root_cause_does_not_replace_it() -> None:
    text = (
        "0: jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Mosaic failed to compile TPU kernel: x\n"
        "srun: error: gpu-a07: task 0: Aborted (core dumped)\n"
    )
    assert _diagnose(text).failure is F.XLA_COMPILE_FAIL


STUCK = (
    "E0915 rendezvous.cc:108] [id=6] This thread has been waiting for `Initialize clique: devices=8` "
    "for 10 seconds and may be stuck.\n"
)
UNSTUCK = (
    "E0915 rendezvous.cc:130] [id=6] This thread is unstuck waiting for `Initialize clique: devices=8` "
    "after 32.9s. Warning above was a false-positive. Perhaps the timeout is too short.\n"
)


def test_a_rendezvous_warning_xla_withdrew_is_no_hang_evidence() -> None:
    got = _diagnose(STUCK + UNSTUCK)
    assert got.failure is F.UNKNOWN and "stuck" not in got.reason
    far = _diagnose(STUCK + UNSTUCK + "I1201 profiler_session.cc:121] collecting\n" * 200)
    assert far.failure is F.UNKNOWN  # the evidence kept from the whole log no longer holds it
    again = _diagnose(STUCK + UNSTUCK + STUCK.replace("id=6", "id=7"), scheduler_state="TIMEOUT")
    assert again.label == "rendezvous-stuck" and "id=7" in again.reason  # a new warning still counts


def test_the_hang_detector_drops_its_floor_when_xla_withdraws_the_warning() -> None:
    log, det = StepLog(), HangDetector()
    det.running(0.0)
    log.feed(STUCK.encode())
    det.update([], 10.0, stuck_warnings=log.stuck_warnings, unstuck_warnings=log.unstuck_warnings)
    assert det.threshold_s() == det.settings.floor_s
    log.feed(UNSTUCK.encode())
    det.update([], 20.0, stuck_warnings=log.stuck_warnings, unstuck_warnings=log.unstuck_warnings)
    assert det.threshold_s() == det.settings.init_allowance_s


PROFILER = "completed profiler activation/deactivation step: {}, total_weights: 196608, loss: 10.440"


def test_a_profiler_boundary_step_is_progress_without_timings() -> None:
    rec = parse_step_line("I0101 metric_logger.py:1] " + PROFILER.format(8))
    assert rec is not None and (rec.step, rec.seconds, rec.tokens_per_s, rec.loss) == (8, None, None, 10.44)
    assert parse_step_line("Completed eval step: 3, seconds: 1.0, running loss=2.0") is None


def test_a_run_whose_last_steps_hid_their_metrics_is_complete() -> None:
    text = "".join(f"completed step: {i}, seconds: 5.6, Tokens/s/device: 8670.1, loss: 10.5\n" for i in range(8))
    text += PROFILER.format(8) + "\n" + PROFILER.format(9) + "\n"
    log = StepLog()
    log.feed(text.encode())
    assert log.last_step == 9
    got = diagnose(Evidence.from_log(log, 10, exit_code=0, scheduler_state="COMPLETED"))
    assert (got.failure, got.verdict) == (F.SUCCESS, Verdict.SUCCESS)
