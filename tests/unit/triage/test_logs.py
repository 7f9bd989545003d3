"""Step lines, signals, tail and steady state over recorded MaxText / maxtext-slurm logs."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_xlatune.triage import logs
from pytest_xlatune.triage.diagnosis import Evidence, FailureClass, diagnose
from pytest_xlatune.triage.lines import (
    KNOWN_NOISE,
    StepRecord,
    is_noise,
    parse_step_line,
    strip_known_noise,
)
from pytest_xlatune.triage.logs import (
    TAIL_LINES,
    SignalKind,
    StepLog,
)
from pytest_xlatune.triage.signatures import UNKNOWN_FLAG_RE, rejected_flag
from pytest_xlatune.verdict.steady import last_loss, steady_state

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
LOG_FILES = sorted(p.name for p in LOGS.glob("*.log"))
TW = "total_weights"


@pytest.fixture(params=["memmem", "bytes.find"])
def finder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a StepLog test with libc memmem and with the pure bytes.find fallback."""
    if request.param == "memmem":
        found = logs._libc_find()
        if found is None:
            pytest.skip("no libc memmem here")
        monkeypatch.setattr(logs, "_find", found)
    else:
        monkeypatch.setattr(logs, "_find", logs._bytes_find)
    return str(request.param)


def ingest(data: bytes, chunk: int | None = None) -> tuple[StepLog, list[StepRecord]]:
    log = StepLog()
    size = chunk or max(1, len(data))
    new = [rec for at in range(0, len(data), size) for rec in log.feed(data[at : at + size])]
    return log, new + log.flush()


def snapshot(log: StepLog) -> tuple[object, ...]:
    # repr, because a nan loss never equals itself
    return (
        repr(log.steps),
        log.last_step,
        log.signals,
        log.unknown_flag,
        log.saw_memstats,
        log.summary_status,
        log.tail_text(),
    )


# -- parse_step_line ----------------------------------------------------------------------------

PUBLIC = "completed step: 7, seconds: 6.051, TFLOP/s/device: 451.236, Tokens/s/device: 8123.462, total_weights: 393216, loss: 6.765"
SLURM = "0: completed step: 9, seconds: 25.250, TFLOP/s/device: 283.1, MFU: 11.32%, Tokens/s/device: 1135.7, total_weights: 1024, loss: 7.123"
ABSL = "I1130 12:00:00.000000 123 metric_logger.py:196] "
MTP = ", main_model_loss: 7.1, mtp_loss: 0.4"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(
            PUBLIC,
            StepRecord(7, 6.051, 451.236, None, 8123.462, 6.765, ((TW, 393216.0),)),
            id="public-maxtext",
        ),
        pytest.param(SLURM, StepRecord(9, 25.25, 283.1, 11.32, 1135.7, 7.123, ((TW, 1024.0),)), id="maxtext-slurm-mfu"),
        pytest.param(ABSL + PUBLIC, StepRecord(7, 6.051, 451.236, None, 8123.462, 6.765, ((TW, 393216.0),)), id="absl"),
        pytest.param(
            "3: " + ABSL + SLURM[3:],
            StepRecord(9, 25.25, 283.1, 11.32, 1135.7, 7.123, ((TW, 1024.0),)),
            id="srun+absl",
        ),
        pytest.param(
            PUBLIC + MTP,
            StepRecord(
                7,
                6.051,
                451.236,
                None,
                8123.462,
                6.765,
                ((TW, 393216.0), ("main_model_loss", 7.1), ("mtp_loss", 0.4)),
            ),
            id="mtp",
        ),
        pytest.param(
            "completed step: 3, seconds: 1.000, mtp_loss: 0.400, loss: 7.500",
            StepRecord(3, 1.0, None, None, None, 7.5, (("mtp_loss", 0.4),)),
            id="mtp_loss-before-loss",
        ),
        pytest.param(
            "completed step: 3, seconds: 1.000, main_model_loss: 7.100, mtp_loss: 0.400",
            StepRecord(3, 1.0, None, None, None, None, (("main_model_loss", 7.1), ("mtp_loss", 0.4))),
            id="no-loss-field",
        ),
        pytest.param(
            "completed step: 0, seconds: 12.511, TFLOP/s: 8.412, loss: 10.873",
            StepRecord(0, 12.511, 8.412, None, None, 10.873),
            id="oldest-tflops",
        ),
        pytest.param(
            "completed step: 2, seconds: 0.905, TFLOP/s/device: 116.279, loss: 9.604",
            StepRecord(2, 0.905, 116.279, None, None, 9.604),
            id="old-tflops-device",
        ),
        pytest.param(
            "completed step: 12, seconds: 1e+01, TFLOP/s/device: 1.5E2, Tokens/s/device: 1e+03, total_weights: 1024.0, loss: 2.5e-01, lr: 1.000e-04",
            StepRecord(12, 10.0, 150.0, None, 1000.0, 0.25, ((TW, 1024.0), ("lr", 1e-4))),
            id="exponents",
        ),
        pytest.param(
            "completed step: 4, seconds: 2.000, TFLOP/s/device: inf, Tokens/s/device: -inf, total_weights: 8, loss: 3.000",
            StepRecord(4, 2.0, math.inf, None, -math.inf, 3.0, ((TW, 8.0),)),
            id="inf",
        ),
        pytest.param(
            "completed step: 5, seconds: 0.310, TFLOP/s       : 12.000, loss          : 4.200",
            StepRecord(5, 0.31, 12.0, None, None, 4.2),
            id="padded-colons",
        ),
        pytest.param(SLURM + "\r", StepRecord(9, 25.25, 283.1, 11.32, 1135.7, 7.123, ((TW, 1024.0),)), id="crlf"),
    ],
)
def test_parse_step_line_reads_every_known_format(line: str, expected: StepRecord) -> None:
    assert parse_step_line(line) == expected


def test_nan_loss_is_kept_as_nan() -> None:
    rec = parse_step_line(
        "0: completed step: 6, seconds: 2.100, TFLOP/s/device: 300.000, Tokens/s/device: nan, total_weights: 1024, loss: nan"
    )
    assert rec is not None and rec.loss is not None and rec.tokens_per_s is not None
    assert math.isnan(rec.loss) and math.isnan(rec.tokens_per_s)


def test_loss_is_never_taken_from_mtp_loss() -> None:
    rec = parse_step_line(
        "completed step: 1, seconds: 1.000, TFLOP/s/device: 2.000, mtp_loss: 0.400, main_model_loss: 7.100"
    )
    assert rec is not None and rec.loss is None
    rec = parse_step_line(PUBLIC + MTP)
    assert rec is not None and rec.loss == 6.765 and dict(rec.extra)["mtp_loss"] == 0.4


@pytest.mark.parametrize(
    "line",
    [
        "eval metrics after step: 5, loss=2.100, total_weights=1024",
        "uncompleted step: 5, seconds: 1.0",
        "To see full metrics 'tensorboard --logdir=/outputs/x/tensorboard/'",
        "",
    ],
)
def test_parse_step_line_rejects_other_lines(line: str) -> None:
    assert parse_step_line(line) is None


@pytest.mark.parametrize("line", ["completed step: 5", "completed step: 5, TFLOP/s/device: 3.000, loss: 1.000"])
def test_a_step_line_without_seconds_is_still_progress(line: str) -> None:
    rec = parse_step_line(line)
    assert rec is not None and rec.step == 5 and rec.seconds is None


GLUED = "completed step: 1, seconds: 1.000completed step: 2, seconds: 2.000, loss: 5.000"


def test_glued_step_lines_are_cut_apart() -> None:
    # Two tasks writing without srun -l can glue lines; the fields must not mix.
    assert parse_step_line(GLUED) == StepRecord(1, 1.0, None, None, None, None)
    log, _ = ingest(GLUED.encode() + b"\n")
    assert log.steps == {
        1: StepRecord(1, 1.0, None, None, None, None),
        2: StepRecord(2, 2.0, None, None, None, 5.0),
    }


def test_a_step_line_with_coloured_numbers_is_read_by_steplog_as_by_parse_step_line() -> None:
    # A highlighting log handler (rich, a colouring formatter) wraps each number in escapes: the
    # StepLog must read what parse_step_line reads, not drop the line.
    line = "completed step: \x1b[1;36m5\x1b[0m, seconds: \x1b[1;36m5.668\x1b[0m, loss: \x1b[1;36m10.879\x1b[0m"
    expected = StepRecord(5, 5.668, None, None, None, 10.879)
    assert parse_step_line(line) == expected
    for chunk in (None, 7):
        log, new = ingest(line.encode() + b"\n", chunk)
        assert (log.steps, new, log.last_step) == ({5: expected}, [expected], 5)
        assert log.first_step_line is not None and "\x1b" not in log.first_step_line


# -- StepLog over the recorded logs -------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """What a recorded log must yield."""

    steps: range
    records: dict[int, StepRecord] = field(default_factory=dict)
    unknown_flag: str | None = None
    saw_memstats: bool = True
    summary_status: str | None = None
    ooms: int = 0


OK = "SUCCESS (exit 0)"
EXPECT = {
    "maxtext-public.log": Expect(
        range(10), {7: StepRecord(7, 6.051, 451.236, None, 8123.462, 6.765, ((TW, 393216.0),))}
    ),
    "maxtext-slurm-mfu.log": Expect(
        range(15),
        {9: StepRecord(9, 25.25, 283.093, 11.32, 1135.739, 7.123, ((TW, 1024.0),))},
        summary_status=OK,
    ),
    "srun-2node-interleaved.log": Expect(
        range(8),
        {  # the first task to print a step wins: task 1 for steps 3 and 6, task 0 otherwise
            3: StepRecord(3, 29.865, 230.424, 9.22, 924.488, 9.391, ((TW, 2048.0),)),
            4: StepRecord(4, 29.87, 230.385, 9.22, 924.33, 8.862, ((TW, 2048.0),)),
            6: StepRecord(6, 29.863, 230.439, 9.22, 924.549, 8.047, ((TW, 2048.0),)),
        },
        summary_status=OK,
    ),
    "absl-prefixed.log": Expect(
        range(4), {1: StepRecord(1, 3.812, 486.118, None, 18958.902, 10.442, ((TW, 65536.0),))}
    ),
    "mtp.log": Expect(
        range(3),
        {
            1: StepRecord(
                1,
                38.207,
                191.712,
                7.67,
                771.34,
                11.512,
                ((TW, 4096.0), ("main_model_loss", 11.105), ("mtp_loss", 0.407)),
            )
        },
    ),
    "old-format.log": Expect(
        range(4),
        {
            0: StepRecord(0, 12.511, 8.412, None, None, 10.873),
            3: StepRecord(3, 0.904, 116.408, None, None, 9.012),
        },
    ),
    "unknown-flag.log": Expect(
        range(0),
        unknown_flag="--xla_gpu_enable_obsolete_thing",
        saw_memstats=False,
        summary_status="FAILED (exit 1)",
    ),
    "oom.log": Expect(range(0), summary_status="FAILED (exit 1)", ooms=3),
    "bad-flag-value.log": Expect(range(0), unknown_flag="--xla_backend_optimization_level", saw_memstats=False),
}


def test_every_recorded_log_has_expectations() -> None:
    assert sorted(EXPECT) == LOG_FILES


@pytest.mark.parametrize("name", LOG_FILES)
def test_steplog_reads_recorded_log(name: str, finder: str) -> None:
    want = EXPECT[name]
    log, new = ingest((LOGS / name).read_bytes())
    assert sorted(log.steps) == list(want.steps)
    assert [rec.step for rec in new] == list(want.steps)
    for step, rec in want.records.items():
        assert log.steps[step] == rec
    assert log.last_step == (want.steps[-1] if want.steps else None)
    assert log.unknown_flag == want.unknown_flag
    assert log.saw_memstats is want.saw_memstats
    assert log.summary_status == want.summary_status
    assert sum(s.kind is SignalKind.OOM for s in log.signals) == want.ooms
    assert log.tail and not any(is_noise(line) or "\x1b" in line for line in log.tail)


@pytest.mark.parametrize("name", LOG_FILES)
def test_odd_chunk_sizes_give_identical_results(name: str, finder: str) -> None:
    data = (LOGS / name).read_bytes()
    whole, whole_new = ingest(data)
    for size in (1, 7, 4096):
        log, new = ingest(data, size)
        assert snapshot(log) == snapshot(whole), size
        assert repr(new) == repr(whole_new), size


def test_unknown_flag_text_recorded_from_xla(finder: str) -> None:
    log, _ = ingest((LOGS / "unknown-flag.log").read_bytes())
    (signal,) = [s for s in log.signals if s.kind is SignalKind.UNKNOWN_FLAG]
    assert signal.line.endswith(
        "parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: --xla_gpu_enable_obsolete_thing=true"
    )
    assert log.steps == {}


def test_unknown_flags_plural_records_the_first_flag() -> None:
    line = b"F1130 23:57:09.059611    8506 parse_flags_from_env.cc:234] Unknown flags in XLA_FLAGS: --xla_a=true --xla_b=1\n"
    log, _ = ingest(line)
    assert log.unknown_flag == "--xla_a"


def test_a_flag_value_xla_cannot_read_is_a_rejected_flag() -> None:
    """Recorded from jaxlib 0.10.2 on this machine with XLA_FLAGS=--xla_backend_optimization_level=notanint:
    tsl's parser logs the value it cannot read, then parse_flags_from_env fails the process. The job
    fails as a rejected flag naming it (the gate and the repair read the same name), not `unknown`."""
    data = (LOGS / "bad-flag-value.log").read_bytes()
    for size in (None, 7):
        log, _ = ingest(data, size)
        assert log.unknown_flag == "--xla_backend_optimization_level", size
    got = diagnose(Evidence.from_log(log, 15, scheduler_state="FAILED", exit_code=1))
    assert got.failure is FailureClass.UNKNOWN_FLAG
    assert got.reason.startswith("XLA rejected flag --xla_backend_optimization_level: ")
    assert "Couldn't interpret value notanint" in got.reason
    m = UNKNOWN_FLAG_RE.search(got.reason)
    assert m is not None and rejected_flag(m) == "--xla_backend_optimization_level"


def test_unknown_flag_is_only_looked_for_before_the_first_step() -> None:
    log, _ = ingest(b"completed step: 0, seconds: 1.0, loss: 2.0\nUnknown flag in XLA_FLAGS: --xla_late=1\n")
    assert log.unknown_flag is None


def test_oom_signals_are_ordered_and_know_the_last_step(finder: str) -> None:
    log, _ = ingest((LOGS / "oom.log").read_bytes())
    kinds = [s.kind for s in log.signals]
    assert kinds == [
        SignalKind.MEMSTATS,
        SignalKind.OOM,
        SignalKind.OOM,
        SignalKind.OOM,
        SignalKind.JOB_SUMMARY,
    ]
    assert all(s.after_step is None for s in log.signals)
    assert "ran out of memory trying to allocate 24.00GiB" in log.signals[1].line
    data = b"completed step: 3, seconds: 1.0, loss: 2.0\n0: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8 bytes.\n"
    log, _ = ingest(data)
    assert [(s.kind, s.after_step) for s in log.signals] == [(SignalKind.OOM, 3)]


def test_job_summary_status_has_no_ansi_colours() -> None:
    data = (LOGS / "maxtext-slurm-mfu.log").read_bytes()
    assert b"Status: \x1b[32mSUCCESS (exit 0)\x1b(B\x1b[m" in data  # as `tput` wrote it
    log, _ = ingest(data)
    assert log.summary_status == "SUCCESS (exit 0)"
    assert "  Status: SUCCESS (exit 0)" in log.tail


def test_status_line_found_when_it_arrives_in_a_later_feed() -> None:
    log = StepLog()
    log.feed(b"========================== JOB SUMMARY ==========================\n  Job:    1 (x)\n")
    assert log.summary_status is None
    log.feed(b"  Status: \x1b[31mFAILED (exit 143)\x1b(B\x1b[m\n")
    assert log.summary_status == "FAILED (exit 143)"


def test_partial_line_waits_for_its_newline_and_flush_ends_it() -> None:
    log = StepLog()
    assert log.feed(b"0: completed step: 1, seconds: 1.0, loss: 2.0\n0: completed step: 2, sec") == [
        StepRecord(1, 1.0, None, None, None, 2.0)
    ]
    assert log.feed(b"onds: 3.0, loss: 4.0") == []
    assert log.flush() == [StepRecord(2, 3.0, None, None, None, 4.0)]
    assert log.flush() == []


def test_undecodable_bytes_are_replaced() -> None:
    log, _ = ingest(b"\xff\xfe garbage\ncompleted step: 1, seconds: 1.0, loss: \xff2.0\n")
    assert log.steps[1].loss is None
    assert log.tail[0].startswith("\ufffd")


# -- a log drowned in warnings ------------------------------------------------------------------

WARNINGS = (
    "0: W1130 08:15:02.114023   20211 gpu_hlo_schedule.cc:789] The latency hiding scheduler found no cost for fusion.{n}",
    "0: gpu-a07:20211:20698 [{g}] NCCL INFO Channel 0{g}/0 : {g}[{g}] -> 1[1] via P2P/IPC/read",
    "0: /usr/local/lib/python3.10/dist-packages/jax/_src/interpreters/mlir.py:{n}: UserWarning: Some donated buffers were not usable",
    "0: gpu-a07:20211:20698 [{g}] NCCL WARN MSCCL++: Feature not enabled. ENABLE_MSCCLPP must be defined at compile-time",
    "0: E1130 08:13:02.114023   {n} cuda_executor.cc:1228] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
)


@pytest.fixture(scope="module")
def drowned() -> bytes:
    """maxtext-slurm-mfu.log with ~5,000 warnings (a fifth of them known noise) between its lines."""
    rng = random.Random(0)
    lines = (LOGS / "maxtext-slurm-mfu.log").read_text().splitlines(keepends=True)
    trailer = next(i for i, line in enumerate(lines) if "JOB SUMMARY" in line)
    out = []
    for line in lines[:trailer]:
        for _ in range(rng.randrange(0, 2 * 5000 // trailer)):
            out.append(rng.choice(WARNINGS).format(n=rng.randrange(10**6), g=rng.randrange(8)) + "\n")
        out.append(line)
    return "".join(out + lines[trailer:]).encode()


def test_steps_survive_thousands_of_warnings(drowned: bytes, finder: str) -> None:
    assert drowned.count(b"\n") > 4500
    base, _ = ingest((LOGS / "maxtext-slurm-mfu.log").read_bytes())
    log, _ = ingest(drowned)
    assert repr(log.steps) == repr(base.steps)
    assert [s.kind for s in log.signals] == [s.kind for s in base.signals]
    assert log.summary_status == "SUCCESS (exit 0)"
    assert len(log.tail) == TAIL_LINES
    assert not any(is_noise(line) for line in log.tail)
    assert log.tail[-1].startswith("=====")


def test_drowned_log_in_odd_chunks(drowned: bytes, finder: str) -> None:
    whole, _ = ingest(drowned)
    for size in (1, 7, 65536):
        assert snapshot(ingest(drowned, size)[0]) == snapshot(whole), size


def test_a_long_run_of_noise_is_marked_in_the_tail() -> None:
    noise = (
        b"0: gpu-a07:1:2 [0] NCCL WARN MSCCL++: Feature not enabled. ENABLE_MSCCLPP must be defined at compile-time\n"
    )
    log, _ = ingest(b"0: real error: NCCL WARN Timeout\n" + noise * 2000)
    assert log.tail_text().startswith("[... more than 64 KiB of known-noise lines ...]")
    log, _ = ingest(b"0: real error: NCCL WARN Timeout\n" + noise * 100)
    assert log.tail_text() == "0: real error: NCCL WARN Timeout"


# -- noise --------------------------------------------------------------------------------------

NOISE_LINES = [
    "1: E1130 08:13:02.114023 20211 cuda_executor.cc:1228] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "E1130 08:13:02.114023 20211 cuda_executor.cc:1228] INTERNAL: CUDA error: Failed call to cuInit",
    "0: gpu-a07:20211:20698 [0] NCCL WARN MSCCL++: Feature not enabled. ENABLE_MSCCLPP must be defined at compile-time",
    "0: gpu-a07:20211:20698 [3] NCCL WARN LL cutoff points not detected for a supported arch gfx950",
    "WARNING: AMD GPU device(s) is/are in a low-power state. Check power control/runtime_status",
    "Token indices sequence length is longer than the specified maximum sequence length for this model (9000 > 8192).",
    "OCI runtime exec failed: exec failed: unable to start container process: error executing setns process: exit status 1",
    "nsenter: error executing setns process: exit status 1",
    "[cgroup] Sent SIGKILL to 0/0 processes",
    "0: Cannot read CPU core 17",
    "No hardware is found. Using default TPU version: jellyfish",
    "No device identifiers found",
    "Enabling PjRt/TPU event dependency logging",
    "Fiber init: default domain = futex",
    "Error response from daemon: could not kill container: tried to kill container, but did not receive an exit event",
    "srun: error: gpu-a08: task 1: Exited with exit code 143",
    "1: NODE_EXIT host=gpu-a08 exit=143",
]
SIGNAL_LINES = [
    "0: gpu-a07:20211:20698 [0] NCCL WARN Timeout waiting for connect from peer 12",
    "srun: error: gpu-a08: task 1: Exited with exit code 1",
    "1: NODE_EXIT host=gpu-a08 exit=1",
    "0: jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 25769803776 bytes.",
    "Traceback (most recent call last):",
]


def test_every_noise_pattern_has_an_example() -> None:
    for pattern in KNOWN_NOISE:
        assert any(re.search(pattern, line) for line in NOISE_LINES), pattern


def test_strip_known_noise_keeps_real_signals() -> None:
    assert strip_known_noise(NOISE_LINES + SIGNAL_LINES) == SIGNAL_LINES
    assert all(is_noise(line) for line in NOISE_LINES)


# -- steady_state -------------------------------------------------------------------------------


def _steps(name: str) -> dict[int, StepRecord]:
    return ingest((LOGS / name).read_bytes())[0].steps


SLURM_9_14 = (1135.739, 1135.199, 1136.144, 1135.515, 1135.875, 1135.380)


def test_steady_state_skips_profiler_steps_when_the_profiler_ran() -> None:
    ss = steady_state(_steps("maxtext-slurm-mfu.log"), profiler_on=True)
    assert ss is not None
    assert ss.steps_used == (9, 10, 11, 12, 13, 14)
    assert ss.tgs_values == SLURM_9_14
    assert ss.tgs == pytest.approx(sum(SLURM_9_14) / 6)
    assert ss.step_seconds == pytest.approx((25.250 + 25.262 + 25.241 + 25.255 + 25.247 + 25.258) / 6)
    assert ss.last_loss == 6.601


def test_steady_state_uses_steps_5_to_14_without_profiler() -> None:
    ss = steady_state(_steps("maxtext-slurm-mfu.log"), profiler_on=False)
    assert ss is not None
    assert ss.steps_used == tuple(range(5, 15))
    assert ss.tgs_values == (1114.456, 1113.677, 1113.893, 698.957, *SLURM_9_14)
    assert ss.tgs == pytest.approx(sum(ss.tgs_values) / 10)


def test_steady_state_window_is_clipped_to_the_steps_present() -> None:
    steps = _steps("srun-2node-interleaved.log")  # steps 0-7
    assert steady_state(steps, profiler_on=True) is None
    ss = steady_state(steps, profiler_on=False)
    assert ss is not None and ss.steps_used == (5, 6, 7)
    assert ss.tgs_values == (924.455, 924.549, 924.392)  # step 6 is task 1's: it printed first
    assert ss.last_loss == 7.758
    ss = steady_state(steps, profiler_on=False, first=1, last=2)
    assert ss is not None and ss.steps_used == (1, 2) and ss.last_loss == 7.758  # loss of the highest step


def test_steady_state_without_tokens_reports_step_time_and_derives_tgs_when_told() -> None:
    steps = _steps("old-format.log")  # TFLOP/s era: no Tokens/s/device
    ss = steady_state(steps, profiler_on=False, first=1)
    assert ss is not None and ss.tgs is None and not ss.derived and ss.tgs_values == ()
    assert ss.steps_used == (1, 2, 3) and ss.step_seconds == pytest.approx(
        sum(steps[s].seconds or 0 for s in (1, 2, 3)) / 3
    )
    derived = steady_state(steps, profiler_on=False, first=1, tokens_per_step=4096)
    assert derived is not None and derived.derived
    assert derived.tgs_values == tuple(pytest.approx(4096 / (steps[s].seconds or 1)) for s in (1, 2, 3))
    assert derived.tgs == pytest.approx(sum(derived.tgs_values) / 3)
    assert steady_state({}, profiler_on=False) is None
    no_time = {5: StepRecord(5, None, None, None, None, 2.5)}
    assert steady_state(no_time, profiler_on=False, tokens_per_step=4096) is None
    assert last_loss(no_time) == 2.5


def test_steady_state_ignores_non_finite_tokens() -> None:
    steps = {s: StepRecord(s, 1.0, 1.0, None, 100.0 + s, 1.0) for s in range(15)}
    steps[6] = StepRecord(6, 1.0, 1.0, None, math.nan, math.nan)
    ss = steady_state(steps, profiler_on=False)
    assert ss is not None and 6 not in ss.steps_used and len(ss.tgs_values) == 9


def test_steady_state_leaves_out_a_step_timed_before_its_work_ended() -> None:
    """Asynchronous dispatch: one step prints 0.002 s and a rate 4700x its neighbours' (MaxText's
    maxtest guide); the mean is over the steps that measured something, whichever field is printed."""
    steps = {s: StepRecord(s, 11.7, 193.0, None, 4200.0 + s, 9.7) for s in range(15)}
    steps[7] = StepRecord(7, 0.002, 917442.589, None, 19907654.921, 10.0)
    steps[8] = StepRecord(8, 23.4, 96.0, None, 2100.0, 9.7)  # the step that absorbed its time stays
    ss = steady_state(steps, profiler_on=False)
    assert ss is not None and ss.mistimed == (7,) and 7 not in ss.steps_used and 8 in ss.steps_used
    assert ss.tgs == pytest.approx(sum(v for v in ss.tgs_values) / 9) and max(ss.tgs_values) < 5000
    assert ss.step_seconds == pytest.approx((11.7 * 8 + 23.4) / 9)
    no_tokens = {s: StepRecord(s, r.seconds, r.tflops, None, None, r.loss) for s, r in steps.items()}
    derived = steady_state(no_tokens, profiler_on=False, tokens_per_step=49152)
    assert derived is not None and derived.mistimed == (7,) and max(derived.tgs_values) < 5000
    no_seconds = {s: StepRecord(s, None, None, None, r.tokens_per_s, r.loss) for s, r in steps.items()}
    only_rate = steady_state(no_seconds, profiler_on=False)
    assert only_rate is not None and only_rate.mistimed == (7,)
    two = steady_state({3: steps[3], 7: steps[7]}, profiler_on=False, first=3, last=7)
    assert two is not None and two.steps_used == (3,)  # the slower one of two is the measured one


def test_steady_state_keeps_every_step_of_an_uneven_but_real_window() -> None:
    steps = _steps("maxtext-slurm-mfu.log")
    assert steady_state(steps, profiler_on=False).mistimed == ()  # type: ignore[union-attr]
    # A hog slowed most steps 20x: the fast steps are real ones, not mistimed (kept, all of them).
    loaded = {s: StepRecord(s, 10.0 if s % 5 else 0.5, None, None, 410.0 if s % 5 else 8200.0, 1.0) for s in range(15)}
    assert steady_state(loaded, profiler_on=False).mistimed == ()  # type: ignore[union-attr]
    single = steady_state({5: StepRecord(5, 0.002, None, None, 9e9, 1.0)}, profiler_on=False)
    assert single is not None and single.steps_used == (5,)  # one step: nothing to compare it with


# -- bounded memory on huge input ----------------------------------------------------------------


def test_a_10_mb_single_line_is_bounded_and_the_next_lines_still_count() -> None:
    import tracemalloc

    piece = b"RuntimeError: x " * 4096  # 64 KiB; needles on every piece
    log = StepLog()
    tracemalloc.start()
    for _ in range(160):  # 10 MiB without a newline
        log.feed(piece)
    log.feed(b"\ncompleted step: 0, seconds: 1.0, Tokens/s/device: 5.0, loss: 2.0\n")
    log.flush()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 << 20  # well under the 10 MiB line: only a bounded part of it is held
    assert log.last_step == 0 and log.steps[0].tokens_per_s == 5.0
    assert all(len(line) <= 2000 for _, line, _ in log.evidence)
    assert len(log.tail) <= TAIL_LINES and sum(len(t) for t in log.tail) < 1 << 21


def test_a_huge_log_keeps_bounded_evidence_steps_and_tail() -> None:
    block = b"".join(
        b"0: completed step: %d, seconds: 1.000, Tokens/s/device: 10.0, loss: 1.0\n"
        b"0: E1201 12:00:00.000 1 x.cc:1] RuntimeError: transient %d\n"
        b"0: I1201 12:00:00.000 1 x.cc:1] NCCL WARN something %d\n" % (i, i, i)
        for i in range(2000)
    )
    log = StepLog()
    for _ in range(6):  # 12000 steps, 12000 error lines, 12000 warnings (~1.7 MB per round)
        log.feed(block)
    steps = StepLog()
    lines = b"".join(b"completed step: %d, seconds: 1.000, loss: %d.0\n" % (i, i) for i in range(20000))
    steps.feed(lines)
    assert len(log.evidence) <= logs.MAX_EVIDENCE_LINES
    assert sum(1 for _, line, _ in log.evidence if "NCCL WARN" in line) <= logs.MAX_WEAK_EVIDENCE
    assert len(log.tail) == TAIL_LINES
    assert len(steps.steps) <= 4096 + 64 and steps.last_step == 19999
    assert steps.steps[19999].loss == 19999.0 and 0 in steps.steps  # the first and the newest


def test_triage_text_puts_early_failure_lines_before_the_tail_in_log_order() -> None:
    log = StepLog()
    log.feed(
        b"0: Memstats: After params initialized:\n"
        b"0: node01:1:1 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12\n"
        b"0: completed step: 0, seconds: 1.0, Tokens/s/device: 5.0, loss: 2.0\n"
        b"0: Traceback (most recent call last):\n"
        b'0:   File "train.py", line 1, in <module>\n'
        b"0: ValueError: bad shape\n" + b"".join(b"0: I1201 filler %d\n" % i for i in range(200))
    )
    text = log.triage_text().splitlines()
    assert text[:4] == [
        "0: node01:1:1 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12",
        "completed step: 0, seconds: 1.0, Tokens/s/device: 5.0, loss: 2.0",
        "0: ValueError: bad shape",
        "0: I1201 filler 140",
    ]
    assert len(text) == 3 + TAIL_LINES  # the traceback header is left to the tail: its exception line says it


def test_a_huge_line_is_kept_short_in_the_tail_and_read_once() -> None:
    """A 50 MB line must not ride along in the tail triage re-reads on every feed."""
    log = StepLog()
    huge = b"xxxxxxx " * (50 << 17)
    log.feed(b"start\n" + huge + b"\n")
    log.feed(
        b"completed step: 0, seconds: 1.0, TFLOP/s/device: 1.0, Tokens/s/device: 10.0, total_weights: 1, loss: 1.0\n"
    )
    assert max(len(line) for line in log.tail) < 5000
    assert any(line.startswith("xxxx") and line.endswith(" more bytes]") for line in log.tail)
    one_word = StepLog()
    one_word.feed(b"start\n" + b"x" * (1 << 20) + b"\n")
    assert one_word.tail[-1] == f"[... {1 << 20} more bytes]"  # one word longer than a tail line: none of it
    assert log.last_step == 0
