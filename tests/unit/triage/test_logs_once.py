"""The one-pass needle search (Aho-Corasick) finds what one memmem pass per needle finds, in the
same order: StepLog ends in the same state either way, on recorded logs and generated noisy ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_xlatune.triage import logs
from pytest_xlatune.triage.logs import StepLog
from pytest_xlatune.triage.signatures import EVIDENCE_NEEDLES

DATA = Path(__file__).resolve().parents[2] / "data"
RECORDED = sorted(
    [*(DATA / "logs").glob("*.log"), *(DATA / "logs" / "real").glob("*.txt"), *(DATA / "triage").glob("*.log")]
)


def state(log: StepLog) -> tuple[object, ...]:
    return (
        repr(log.steps),
        log.last_step,
        log.signals,
        log.unknown_flag,
        log.saw_memstats,
        log.summary_status,
        log.tail_text(),
        log.evidence,
        log.triage_text(),
        log.first_step_line,
        log.stuck_warnings,
        log.unstuck_warnings,
    )


def ingest(data: bytes, chunk: int, one_pass: bool) -> tuple[object, ...]:
    log = StepLog()
    if not one_pass:
        log._lines_with = logs._lines_with
    new = [rec for at in range(0, len(data), chunk) for rec in log.feed(data[at : at + chunk])]
    return (*state(log), repr(new + log.flush()))  # repr: a nan loss never equals itself


def same(data: bytes, chunk: int) -> None:
    assert ingest(data, chunk, one_pass=True) == ingest(data, chunk, one_pass=False)


def test_the_one_pass_search_is_the_default() -> None:
    assert StepLog()._lines_with is logs._lines_with_once


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recorded_logs_give_the_same_findings(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = path.read_bytes()
    assert data
    same(data, len(data))
    # Small blocks and windows: lines and needles straddle them, as in a GB log.
    monkeypatch.setattr(logs, "_BLOCK", 97)
    monkeypatch.setattr(logs, "_WINDOW", 13)
    same(data, 4093)


def test_a_recorded_log_has_evidence_for_this_test_to_compare() -> None:
    found = [ingest(p.read_bytes(), 1 << 20, one_pass=True) for p in RECORDED]
    assert sum(1 for f in found if f[7]) > len(RECORDED) // 2  # evidence in most of them


NEEDLE_TEXT = [
    n.decode()
    for n in (
        *EVIDENCE_NEEDLES,
        *logs.OOM_NEEDLES,
        *logs._UNKNOWN_NEEDLES,
        logs._MEMSTATS_NEEDLE,
        logs._SUMMARY_NEEDLE,
        logs._STATUS_NEEDLE,
    )
]
LINES = [
    "0: completed step: {n}, seconds: 6.051, TFLOP/s/device: 451.2, Tokens/s/device: 8123.4, loss: 6.7",
    "1: completed profiler activation/deactivation step: {n}",
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate",
    "  Total memory: 80.00GiB   Temp: 12GiB",
    "Unknown flags in XLA_FLAGS: --xla_gpu_foo=1",
    "Memstats: After params initialized:",
    "========== JOB SUMMARY ==========",
    "Status: FAILED (exit 1)",
    "0: node-0:1:2 [0] NCCL WARN MSCCL++: Feature not enabled.",
    "E1130 cuda_executor.cc:1228] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit",
    "This thread has been waiting for 10s and may be stuck",
    "This thread is unstuck waiting for all participants",
    "W external/xla/xla/service/gpu/gpu_hlo_schedule.cc:789] no cost for fusion.12",
    "\x1b[31mRuntimeError: boom\x1b[0m",
    "",
]


@st.composite
def noisy_logs(draw: st.DrawFn) -> tuple[bytes, int]:
    parts = []
    for _ in range(draw(st.integers(1, 60))):
        how = draw(st.sampled_from(["line", "line", "needle", "glued", "text"]))
        if how == "line":
            parts.append(draw(st.sampled_from(LINES)).format(n=draw(st.integers(0, 9))) + "\n")
        elif how == "needle":  # a needle amid text, sometimes twice on a line
            needle = draw(st.sampled_from(NEEDLE_TEXT))
            parts.append(draw(st.text("ab :\n", max_size=6)) + needle + draw(st.text("ab :\n", max_size=6)))
        elif how == "glued":  # two needles sharing bytes, or a needle cut by a line end
            a, b = draw(st.sampled_from(NEEDLE_TEXT)), draw(st.sampled_from(NEEDLE_TEXT))
            parts.append(a[: draw(st.integers(0, len(a)))] + b)
        else:
            parts.append(draw(st.text(alphabet="xyz:() \n\r\x1b[m", max_size=30)))
    data = "".join(parts).encode()
    return data, draw(st.integers(1, max(1, len(data))))


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=noisy_logs(), block=st.integers(1, 300), window=st.integers(1, 120))
def test_generated_logs_give_the_same_findings(case: tuple[bytes, int], block: int, window: int) -> None:
    data, chunk = case
    saved = logs._BLOCK, logs._WINDOW
    logs._BLOCK, logs._WINDOW = block, window  # monkeypatch is function-scoped: not per example
    try:
        same(data, chunk)
        same(data, len(data))
    finally:
        logs._BLOCK, logs._WINDOW = saved


def test_a_line_full_of_needles_is_searched_once_and_costs_bounded_memory() -> None:
    import tracemalloc

    line = b"oom " * (1 << 18)  # 1 MiB, a needle every 4 bytes
    tracemalloc.start()
    hits = logs._lines_with_once(line + b"\nx\n", 0, len(line) + 3, [(b"oom", logs.SignalKind.EVIDENCE), (b"x", None)])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert hits == [(0, len(line), logs.SignalKind.EVIDENCE), (len(line) + 1, len(line) + 2, None)]
    assert peak < 4 << 20  # the automaton's matches are listed one 64 KiB window at a time


def test_needles_of_a_line_are_taken_in_block_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # A failure line and a step glued on one line: which is taken first sets the failure's
    # after_step, and _lines_with takes them block by block, wherever the block boundary falls.
    data = (
        b"0: completed step: 2, seconds: 1.0\n"
        b"RuntimeError: boom 1: completed step: 3, seconds: 1.0 RESOURCE_EXHAUSTED: Out of memory\n"
    )
    afters = set()
    for block in range(1, len(data) + 1):
        monkeypatch.setattr(logs, "_BLOCK", block)
        same(data, len(data))
        log = StepLog()
        log.feed(data)
        afters.add(tuple(after for _, _, after in log.evidence))
    assert len(afters) > 1  # the boundary's place matters, and both searches agree on it
