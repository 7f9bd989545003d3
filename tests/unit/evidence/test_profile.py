"""Profile summary: recorded JAX traces of the embedded workload (tests/data/profile), plus snippets."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_xlatune.evidence import hlo
from pytest_xlatune.evidence.artifacts import op_kinds
from pytest_xlatune.evidence.profile import ProfileError, collective_kind, summarize, summarize_events

DATA = Path(__file__).parents[2] / "data" / "profile"
RECORDED = ["fsdp", "fsdp_no_cpu_ar_combiner", "fsdp_opt_o1", "pp"]


def trace(name: str) -> bytes:
    return (DATA / f"{name}.trace.json.gz").read_bytes()


def kinds_of(name: str) -> dict[str, str]:
    return dict(op_kinds(tuple(hlo.collectives((DATA / f"{name}.hlo.txt").read_text()))))


def events(name: str) -> list[Any]:
    return json.loads(gzip.decompress(trace(name)))["traceEvents"]  # type: ignore[no-any-return]


def op(name: str, ts: float, dur: float, device: str = "0", run: str = "1", tid: int = 1) -> dict[str, object]:
    return {
        "ph": "X",
        "name": name,
        "ts": ts,
        "dur": dur,
        "pid": 1,
        "tid": tid,
        "args": {"hlo_op": name, "hlo_module": "jit_train_step", "device_ordinal": device, "run_id": run},
    }


# --- recorded traces ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", RECORDED)
def test_parts_add_up_to_the_step_on_every_recording(name: str) -> None:
    summary = summarize(trace(name), op_kinds=kinds_of(name))
    assert summary.module == "jit_train_step"
    assert summary.compute_ms + summary.collective_ms + summary.idle_ms == pytest.approx(summary.step_ms)
    assert min(summary.compute_ms, summary.collective_ms, summary.idle_ms) >= 0
    assert summary.step_ms == pytest.approx(sum(summary.step_ms_each) / summary.steps)


@pytest.mark.parametrize(("name", "devices"), [("fsdp", 8), ("fsdp_no_cpu_ar_combiner", 8), ("pp", 4)])
def test_steps_and_devices_match_an_independent_count(name: str, devices: int) -> None:
    """Profiled steps: runs of the train step holding at least half the ops of the largest one."""
    runs = Counter(str(e["args"]["run_id"]) for e in events(name) if e.get("ph") == "X")
    full = [r for r, n in runs.items() if 2 * n >= max(runs.values())]
    summary = summarize(trace(name))
    assert summary.steps == len(full) == 2  # profiler_steps=2 in tests/data/profile/record.py
    assert summary.devices == devices


def test_each_step_spans_from_its_first_op_to_its_last() -> None:
    spans: dict[object, tuple[float, float]] = {}
    for e in events("fsdp"):
        if e.get("ph") == "X":
            run, start, end = e["args"]["run_id"], e["ts"], e["ts"] + e["dur"]
            a, b = spans.get(run, (start, end))
            spans[run] = (min(a, start), max(b, end))
    longest = sorted((b - a) / 1000 for a, b in spans.values())[-2:]
    assert sorted(summarize(trace("fsdp")).step_ms_each) == pytest.approx(longest)


def test_the_dump_decides_what_is_a_collective_pp_ppermute_is_collective_permute() -> None:
    summary = summarize(trace("pp"), op_kinds=kinds_of("pp"))
    by_kind = dict(summary.collective_ms_by_kind)
    assert by_kind["collective-permute"] > 0
    ppermute = [o for o in summary.top_ops if o.name.startswith("ppermute")]
    assert ppermute and all(o.kind == "collective-permute" for o in ppermute)


def test_combiner_off_recording_spends_time_in_more_all_reduce_ops() -> None:
    base = summarize(trace("fsdp"), top=100, op_kinds=kinds_of("fsdp"))
    off = summarize(trace("fsdp_no_cpu_ar_combiner"), top=100, op_kinds=kinds_of("fsdp_no_cpu_ar_combiner"))
    names = lambda s: {o.name for o in s.top_ops if o.kind == "all-reduce"}  # noqa: E731
    assert len(names(base)) == 2 and len(names(off)) == 11  # the dumps' counts (test_hlo)


def test_plain_json_and_gzip_read_the_same() -> None:
    assert summarize(gzip.decompress(trace("pp"))) == summarize(trace("pp"))


# --- semantics, on hand-written events ------------------------------------------------------------


def test_union_nesting_and_self_time() -> None:
    # Device 0: a while (0-100) holding an all-gather (10-40) and a fusion (50-70); idle 100-120.
    # Device 1: one fusion 0-120. The step spans 0-120 (both devices).
    summary = summarize_events(
        [
            op("while.1", 0, 100),
            op("all-gather.2", 10, 30),
            op("fusion.3", 50, 20),
            op("fusion.4", 0, 120, device="1", tid=2),
        ]
    )
    assert summary.steps == 1 and summary.devices == 2
    assert summary.step_ms == pytest.approx(0.120)
    # per device: (70 + 120) / 2 compute, (30 + 0) / 2 collective, (20 + 0) / 2 idle, in µs
    assert summary.compute_ms == pytest.approx(0.095)
    assert summary.collective_ms == pytest.approx(0.015)
    assert summary.idle_ms == pytest.approx(0.010)
    top = {o.name: o.ms for o in summary.top_ops}
    assert top["while.1"] == pytest.approx(0.025)  # 100 - 30 - 20, over 2 device-steps
    assert top["fusion.4"] == pytest.approx(0.060)


def test_partial_run_at_the_window_edge_is_left_out() -> None:
    full = [op(f"f.{i}", 100 + 10 * i, 5, run="2") for i in range(10)]
    summary = summarize_events([op("f.0", 0, 5, run="1"), *full])
    assert summary.steps == 1 and summary.step_ms == pytest.approx(0.095)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("all-gather.13", "all-gather"),
        ("all-reduce-start.2", "all-reduce"),
        ("ppermute.18", "collective-permute"),
        ("psum.3", "all-reduce"),
        ("collective-permute-done", "collective-permute"),
        ("ynn_fusion.17", None),
        ("copy_bitcast_fusion.14", None),
        ("ncclDevKernel_AllGather_RING", "collective"),
    ],
)
def test_collective_kind_is_guessed_from_the_name_without_a_dump(name: str, kind: str | None) -> None:
    assert collective_kind(name) == kind


def test_with_a_dump_only_its_collectives_count() -> None:
    assert collective_kind("all-gather", {"all-gather.5": "all-gather"}) is None
    assert collective_kind("fusion.1", {"fusion.1": "all-reduce"}) == "all-reduce"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x1f\x8bnot gzip", "not a readable gzip file"),
        (b"{", "not JSON"),
        (b'{"traceEvents": 3}', "no traceEvents list"),
        (b'{"traceEvents": [{"ph": "X", "name": "x", "ts": 0, "dur": 1}]}', "no XLA op events"),
    ],
)
def test_unreadable_input_is_one_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(ProfileError, match=message) as info:
        summarize(data)
    assert "\n" not in str(info.value)
