"""Collective inventory from compiled HLO text: recorded CPU dumps of the workload, plus snippets."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import pytest

from pytest_xlatune.evidence.collective_table import (
    DiffRow,
    InventoryRow,
    describe_diff,
    diff,
    inventory,
    render_inventory_md,
)
from pytest_xlatune.evidence.hlo import Collective, Kind, collectives, find_train_step_dump

DATA = Path(__file__).parents[2] / "data" / "hlo"
KINDS = "all-gather|reduce-scatter|all-reduce|collective-permute|all-to-all|ragged-all-to-all|collective-broadcast"
# Independent of the module's parser: an opcode directly followed by "(", never part of a name.
OPCODE = re.compile(rf"(?<![\w.%-])({KINDS})(?:-start)?\(")
GiB = 1 << 30


def dump(name: str) -> str:
    return (DATA / f"{name}.txt").read_text()


def counted(text: str) -> Counter[str]:
    return Counter(OPCODE.findall(text))


def in_while_bodies(text: str) -> Counter[str]:
    """Ops between a while body's header and its closing brace, found by plain text search."""
    found: Counter[str] = Counter()
    for body in set(re.findall(r"body=%([^\s,]+)", text)):
        start = text.index(f"\n%{body} (")
        found += counted(text[start : text.index("\n}\n", start)])
    return found


def row(rows: list[InventoryRow], kind: Kind) -> InventoryRow:
    return next(r for r in rows if r.kind is kind)


# --- recorded dumps -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fsdp", "fsdp_no_cpu_ar_combiner", "tp", "pp"])
def test_counts_per_kind_match_an_independent_count(name: str) -> None:
    text = dump(name)
    rows = inventory(collectives(text))
    assert {r.kind.value: r.count for r in rows} == dict(counted(text))
    assert {r.kind.value: r.in_loop_count for r in rows if r.in_loop_count} == dict(in_while_bodies(text))
    assert all(r.sync_count == r.count for r in rows)  # the CPU backend runs every collective sync


def test_fsdp_gathers_weights_inside_the_layer_loop() -> None:
    rows = inventory(collectives(dump("fsdp")))
    ag = row(rows, Kind.ALL_GATHER)
    assert ag.count == 14 and ag.in_loop_count == 12
    assert {r.kind for r in rows} >= {Kind.ALL_GATHER, Kind.ALL_REDUCE}


def test_tp_reduces_partial_matmuls_with_all_reduce() -> None:
    rows = inventory(collectives(dump("tp")))
    assert [r.kind for r in rows] == [Kind.ALL_REDUCE]
    assert row(rows, Kind.ALL_REDUCE).count == 8


def test_pp_sends_activations_round_the_stage_ring() -> None:
    found = [c for c in collectives(dump("pp")) if c.kind is Kind.COLLECTIVE_PERMUTE]
    assert len(found) == 2 and all(c.in_loop and c.while_body for c in found)
    assert {c.source_target_pairs for c in found} == {"{{0,1},{1,2},{2,3},{3,0}}", "{{1,0},{2,1},{3,2},{0,3}}"}


def test_bytes_and_attributes_of_hand_checked_instructions() -> None:
    text = dump("fsdp")
    by_name = {c.name: c for c in collectives(text)}
    ag = by_name["all-gather"]  # %all-gather = f32[256,4,64]{2,1,0} all-gather(...), channel_id=1
    assert ag.bytes == 256 * 4 * 64 * 4
    assert ag.channel_id == 1 and ag.replica_groups == "mesh['axis_0'=8,'axis_1'=1,'axis_2'=1] {'axis_0'}"
    assert (
        ag.in_loop
        and not ag.is_async
        and ag.line
        == text.splitlines().index(next(line for line in text.splitlines() if line.startswith("  %all-gather = "))) + 1
    )
    # %all-reduce.52 = (f32[256]{0}, f32[1024,256]{1,0}, f32[]) all-reduce(...): tuple summed
    ar = by_name["all-reduce.52"]
    assert ar.bytes == (256 + 1024 * 256 + 1) * 4 and not ar.in_loop and ar.computation.startswith("main")


def test_disabling_the_cpu_all_reduce_combiner_splits_the_gradient_all_reduce() -> None:
    base, other = dump("fsdp"), dump("fsdp_no_cpu_ar_combiner")
    rows = diff(inventory(collectives(base)), inventory(collectives(other)))
    changed = [r for r in rows if r.changed]
    assert [r.kind for r in changed] == [Kind.ALL_REDUCE]

    def ar_bytes(text: str) -> int:  # shapes read off the all-reduce lines, summed by hand
        shapes = re.findall(r"= (.*?) all-reduce\(", text)
        return sum(
            4 * math.prod(int(d) for d in dims.split(",") if d)
            for s in shapes
            for dims in re.findall(r"f32\[([\d,]*)\]", s)
        )

    n_base, n_other = counted(base)["all-reduce"], counted(other)["all-reduce"]
    was, now = changed[0].base, changed[0].other
    assert was is not None and now is not None
    assert (was.count, now.count) == (n_base, n_other) == (2, 11)
    assert was.total_bytes == now.total_bytes == ar_bytes(base) == ar_bytes(other)  # combining moves no extra bytes
    sentences = describe_diff(rows)
    assert "all-gather: unchanged" in sentences and "all-to-all: unchanged" in sentences
    (ar,) = [s for s in sentences if s.startswith("all-reduce:")]
    assert f"{n_base} ops of 2.0 MiB → {n_other} ops of " in ar and "in loop 1 of 2 → 8 of 11" in ar


def test_inventory_renders_as_a_markdown_table() -> None:
    md = render_inventory_md(inventory(collectives(dump("pp"))))
    lines = md.splitlines()
    assert lines[0].startswith("| collective |") and set(lines[1]) <= set("|-:")
    assert "| collective-permute | 2 | 2 | 0 | 2 | 512.0 KiB | 256.0 KiB |" in lines
    assert "(none)" in render_inventory_md([])


# --- train-step dump selection ---------------------------------------------------------------


def test_find_train_step_dump_picks_the_largest_after_optimizations_text(tmp_path: Path) -> None:
    files = {
        "module_0001.jit_train_step.cpu_after_optimizations.txt": 10,
        "module_0042.jit_train_step.sm_9.0_gpu_after_optimizations.txt": 30,
        "module_0042.jit_train_step.sm_9.0_gpu_after_optimizations-buffer-assignment.txt": 99,
        "module_0042.jit_train_step.before_optimizations.txt": 99,
        "module_0007.jit_init_state.cpu_after_optimizations.txt": 99,
        "module_0008.jit_not_train_step.cpu_after_optimizations.txt": 99,
    }
    for name, size in files.items():
        (tmp_path / name).write_text("x" * size)
    picked = find_train_step_dump(str(tmp_path / n) for n in files)
    assert picked == str(tmp_path / "module_0042.jit_train_step.sm_9.0_gpu_after_optimizations.txt")
    assert find_train_step_dump([str(tmp_path / "module_0007.jit_init_state.cpu_after_optimizations.txt")]) is None


# --- snippets: async pairs, tuples, loops ----------------------------------------------------

ASYNC_PAIR = """\
HloModule m, is_scheduled=true

ENTRY entry {
  p0 = bf16[8,128]{1,0} parameter(0)
  ags = (bf16[8,128]{1,0}, bf16[64,128]{1,0}) all-gather-start(p0), channel_id=7, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, frontend_attributes={_scheduling_group_id="3",is_pipelined="true"}, backend_config={"collective_backend_config":{"is_sync":false}}
  a = bf16[8,128]{1,0} add(p0, p0)
  b = bf16[8,128]{1,0} multiply(a, a)
  ROOT agd = bf16[64,128]{1,0} all-gather-done(ags)
}
"""


def test_async_pair_counts_the_instructions_scheduled_between_start_and_done() -> None:
    (c,) = collectives(ASYNC_PAIR)
    assert c.kind is Kind.ALL_GATHER and c.is_async and c.done == "agd" and c.scheduled_between == 2
    assert c.bytes == 64 * 128 * 2 and c.channel_id == 7 and not c.crosses_iteration and not c.in_loop
    assert c.frontend_attributes == {"_scheduling_group_id": "3", "is_pipelined": "true"}


def test_start_done_marked_is_sync_counts_as_sync() -> None:
    (c,) = collectives(ASYNC_PAIR.replace('"is_sync":false', '"is_sync":true'))
    assert c.async_form and c.marked_sync and not c.is_async
    assert inventory([c])[0].sync_count == 1


def test_async_start_wrapping_a_reduce_scatter_counts_once() -> None:
    text = """\
%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

%wrapped (p: f32[64]) -> f32[8] {
  %p = f32[64]{0} parameter(0)
  ROOT %rs = f32[8]{0} reduce-scatter(%p), channel_id=3, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, to_apply=%add
}

ENTRY %main (a: f32[64]) -> f32[8] {
  %a = f32[64]{0} parameter(0)
  %rs-start = ((f32[64]{0}), f32[8]{0}) async-start(f32[64]{0} %a),
      calls=%wrapped
  %rs-update = ((f32[64]{0}), f32[8]{0}) async-update(((f32[64]{0}), f32[8]{0}) %rs-start)
  %n = f32[64]{0} negate(%a)
  ROOT %rs-done = f32[8]{0} async-done(((f32[64]{0}), f32[8]{0}) %rs-update), calls=%wrapped
}
"""
    (c,) = collectives(text)
    assert (c.kind, c.name, c.done, c.computation) == (Kind.REDUCE_SCATTER, "rs-start", "rs-done", "main")
    assert c.is_async and c.scheduled_between == 2 and c.bytes == 32 and c.channel_id == 3


def test_tuple_shapes_sum_every_element() -> None:
    text = """\
ENTRY %e (p: bf16[4,8]) -> (bf16[4,8], u32[], pred[2], s8[3]) {
  %p = bf16[4,8]{1,0} parameter(0)
  ROOT %ar = (bf16[4,8]{1,0}, u32[], pred[2]{0}, s8[3]{0}, f64[2]{0}, /*index=5*/f16[1,1]{1,0}, s64[]) all-reduce(%p, %p, %p, %p, /*index=5*/%p, %p, %p), channel_id=2, replica_groups={}, to_apply=%add, metadata={op_name="a, b = c(d)" stack_frame_id=3}
}
"""
    (c,) = collectives(text)
    assert c.bytes == 4 * 8 * 2 + 4 + 2 + 3 + 16 + 2 + 8 and c.channel_id == 2


WHILE_LOOP = """\
HloModule m, is_scheduled=true

%cond (cp: (f32[16], f32[16], s32[])) -> pred[] {
  %cp = (f32[16]{0}, f32[16]{0}, s32[]) parameter(0)
  %i = s32[] get-tuple-element(%cp), index=2
  %n = s32[] constant(4)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%helper (h: f32[16]) -> f32[16] {
  %h = f32[16]{0} parameter(0)
  ROOT %ar.9 = f32[16]{0} all-reduce(%h), channel_id=9, replica_groups={{0,1}}, to_apply=%add
}

%body (bp: (f32[16], (f32[16], f32[16], u32[], u32[]), s32[])) -> (f32[16], (f32[16], f32[16], u32[], u32[]), s32[]) {
  %bp = (f32[16]{0}, (f32[16]{0}, f32[16]{0}, u32[], u32[]), s32[]) parameter(0)
  %x = f32[16]{0} get-tuple-element(%bp), index=0
  %prev = (f32[16]{0}, f32[16]{0}, u32[], u32[]) get-tuple-element(%bp), index=1
  %recvd = f32[16]{0} collective-permute-done(%prev), frontend_attributes={is_pipelined="true"}
  %cps.1 = (f32[16]{0}, f32[16]{0}, u32[], u32[]) collective-permute-start(%x), channel_id=1, source_target_pairs={{0,1},{1,0}}
  %y = f32[16]{0} add(%x, %recvd)
  %cpd.1 = f32[16]{0} collective-permute-done(%cps.1)
  %cps.2 = (f32[16]{0}, f32[16]{0}, u32[], u32[]) collective-permute-start(%y), channel_id=2, source_target_pairs={{0,1},{1,0}}, frontend_attributes={is_pipelined="true"}
  %z = f32[16]{0} call(%cpd.1), to_apply=%helper
  %i = s32[] get-tuple-element(%bp), index=2
  ROOT %t = (f32[16]{0}, (f32[16]{0}, f32[16]{0}, u32[], u32[]), s32[]) tuple(%z, %cps.2, %i)
}

ENTRY %main (a: f32[16]) -> f32[16] {
  %a = f32[16]{0} parameter(0)
  %cps.0 = (f32[16]{0}, f32[16]{0}, u32[], u32[]) collective-permute-start(%a), channel_id=2, source_target_pairs={{0,1},{1,0}}
  %zero = s32[] constant(0)
  %init = (f32[16]{0}, (f32[16]{0}, f32[16]{0}, u32[], u32[]), s32[]) tuple(%a, %cps.0, %zero)
  %w = (f32[16]{0}, (f32[16]{0}, f32[16]{0}, u32[], u32[]), s32[]) while(%init), condition=%cond, body=%body
  ROOT %out = f32[16]{0} get-tuple-element(%w), index=0
}
"""


def test_while_body_ops_are_in_loop_and_carried_starts_cross_iterations() -> None:
    found = {c.name: c for c in collectives(WHILE_LOOP)}
    assert set(found) == {"ar.9", "cps.1", "cps.2", "cps.0"}
    inner = found["cps.1"]
    assert inner.in_loop and inner.while_body == "body" and inner.scheduled_between == 1
    assert not inner.crosses_iteration and inner.bytes == 64
    carried = found["cps.2"]  # started here, awaited by the next iteration's %recvd
    assert carried.crosses_iteration and carried.done is None and carried.scheduled_between is None
    assert carried.bytes == 64 and carried.frontend_attributes == {"is_pipelined": "true"}
    assert found["cps.0"].crosses_iteration and not found["cps.0"].in_loop
    helper = found["ar.9"]  # called from the body, so it runs every iteration
    assert helper.in_loop and helper.while_body == "body" and helper.computation == "helper"
    (cp,) = [r for r in inventory(found.values()) if r.kind is Kind.COLLECTIVE_PERMUTE]
    assert (cp.count, cp.async_count, cp.in_loop_count) == (3, 3, 2)


def test_nested_loops_name_the_innermost_body() -> None:
    text = """\
%inner (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %ag = f32[4]{0} all-gather(%p), replica_groups={}, dimensions={0}
}

%outer (q: f32[4]) -> f32[4] {
  %q = f32[4]{0} parameter(0)
  ROOT %w2 = f32[4]{0} while(%q), condition=%c, body=%inner
}

ENTRY %main (r: f32[4]) -> f32[4] {
  %r = f32[4]{0} parameter(0)
  ROOT %w1 = f32[4]{0} while(%r), condition=%c, body=%outer
}
"""
    (c,) = collectives(text)
    assert c.in_loop and c.while_body == "inner" and c.channel_id is None


def test_send_recv_from_a_decomposed_collective_permute_are_counted() -> None:
    text = """\
ENTRY %main (a: f32[32], t: token[]) -> f32[32] {
  %a = f32[32]{0} parameter(0)
  %t = token[] after-all()
  %recv = (f32[32]{0}, u32[], token[]) recv(%t), channel_id=5, frontend_attributes={_xla_send_recv_source_target_pairs={{0,1}}}
  %send = (f32[32]{0}, u32[], token[]) send(%a, %t), channel_id=5, frontend_attributes={_xla_send_recv_source_target_pairs={{0,1}}}
  %recv-done = (f32[32]{0}, token[]) recv-done(%recv), channel_id=5
  %send-done = token[] send-done(%send), channel_id=5
  ROOT %d = f32[32]{0} get-tuple-element(%recv-done), index=0
}
"""
    found = {c.kind: c for c in collectives(text)}
    assert set(found) == {Kind.SEND, Kind.RECV}
    assert found[Kind.RECV].scheduled_between == 1 and found[Kind.SEND].scheduled_between == 1
    assert found[Kind.SEND].bytes == found[Kind.RECV].bytes == 128
    assert found[Kind.SEND].frontend_attributes == {"_xla_send_recv_source_target_pairs": "{{0,1}}"}


# --- diff sentences ---------------------------------------------------------------------------


def inv(kind: Kind, count: int, total: int, *, async_count: int = 0, in_loop: int = 0) -> InventoryRow:
    return InventoryRow(kind, count, total, count - async_count, async_count, in_loop, total // count)


def test_describe_diff_speaks_in_ops_and_sizes() -> None:
    base = [
        inv(Kind.ALL_GATHER, 1, 8 * GiB),
        inv(Kind.REDUCE_SCATTER, 3, 3 * GiB),
        inv(Kind.COLLECTIVE_PERMUTE, 2, 2048),
        inv(Kind.ALL_TO_ALL, 2, 1024),
    ]
    other = [
        inv(Kind.ALL_GATHER, 6, 8 * GiB),
        inv(Kind.REDUCE_SCATTER, 3, 3 * GiB),
        inv(Kind.COLLECTIVE_PERMUTE, 2, 2048, async_count=2),
        inv(Kind.ALL_REDUCE, 1, 512),
    ]
    assert describe_diff(diff(base, other)) == [
        "all-gather: 1 op of 8.0 GiB → 6 ops of 1.3 GiB",
        "reduce-scatter: unchanged",
        "all-reduce: new, 1 op of 512 B",
        "collective-permute: now async (2 of 2)",
        "all-to-all: gone (was 2 ops of 512 B)",
    ]
    back = describe_diff(diff(other, base))
    assert "collective-permute: now sync (2 of 2)" in back


def test_diff_rows_pair_kinds_and_flag_changes() -> None:
    a, b = [inv(Kind.ALL_GATHER, 2, 100)], [inv(Kind.ALL_GATHER, 2, 100, in_loop=2)]
    (d,) = diff(a, b)
    assert d == DiffRow(Kind.ALL_GATHER, a[0], b[0]) and d.changed
    assert describe_diff([d]) == ["all-gather: in loop 0 of 2 → 2 of 2"]
    assert diff([], []) == [] and not diff(a, a)[0].changed


def test_collective_is_a_plain_record() -> None:
    c = Collective(name="x", kind=Kind.ALL_REDUCE, computation="main", line=1, bytes=4, shape="f32[]", async_form=False)
    assert not c.is_async and c.frontend_attributes == {} and inventory([c])[0].largest_bytes == 4
