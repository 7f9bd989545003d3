"""Per-run collective tables from parsed HLO (evidence/hlo.py) and their baseline ↔ winner diff."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .hlo import Collective, Kind

__all__ = ["DiffRow", "InventoryRow", "describe_diff", "diff", "format_bytes", "inventory", "render_inventory_md"]


@dataclass(frozen=True)
class InventoryRow:
    """One kind of collective in one module: the per-run summary table's row."""

    kind: Kind
    count: int
    total_bytes: int
    sync_count: int
    async_count: int
    in_loop_count: int
    largest_bytes: int


@dataclass(frozen=True)
class DiffRow:
    """One kind of collective in two runs; ``None`` where a run has none of it."""

    kind: Kind
    base: InventoryRow | None
    other: InventoryRow | None

    @property
    def changed(self) -> bool:
        return self.base != self.other


def inventory(found: Iterable[Collective]) -> list[InventoryRow]:
    """Count, bytes, sync/async and in-loop ops per kind, in Kind order."""
    by_kind: dict[Kind, list[Collective]] = {}
    for c in found:
        by_kind.setdefault(c.kind, []).append(c)
    return [
        InventoryRow(
            kind=kind,
            count=len(ops),
            total_bytes=sum(c.bytes for c in ops),
            sync_count=sum(not c.is_async for c in ops),
            async_count=sum(c.is_async for c in ops),
            in_loop_count=sum(c.in_loop for c in ops),
            largest_bytes=max(c.bytes for c in ops),
        )
        for kind in Kind
        if (ops := by_kind.get(kind))
    ]


def diff(base: Iterable[InventoryRow], other: Iterable[InventoryRow]) -> list[DiffRow]:
    """Pair two runs' inventories by kind, in Kind order; kinds neither run has are left out."""
    a, b = {r.kind: r for r in base}, {r.kind: r for r in other}
    return [DiffRow(k, a.get(k), b.get(k)) for k in Kind if k in a or k in b]


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            break
    return f"{n:.1f} {unit}"


def _ops(row: InventoryRow) -> str:
    """'6 ops of 1.3 GiB': the mean op size, so count x size is the total."""
    return f"{row.count} op{'s' * (row.count != 1)} of {format_bytes(row.total_bytes / row.count)}"


def describe_diff(rows: Iterable[DiffRow]) -> list[str]:
    """One sentence per kind: 'all-gather: 1 op of 8.0 GiB → 6 ops of 1.3 GiB'."""
    lines = []
    for row in rows:
        a, b, name = row.base, row.other, row.kind.value
        if a is None or b is None:
            if b is not None:
                lines.append(f"{name}: new, {_ops(b)}")
            elif a is not None:
                lines.append(f"{name}: gone (was {_ops(a)})")
            continue
        parts = []
        if (a.count, a.total_bytes) != (b.count, b.total_bytes):
            parts.append(f"{_ops(a)} → {_ops(b)}")
        elif a.largest_bytes != b.largest_bytes:
            parts.append(f"largest op {format_bytes(a.largest_bytes)} → {format_bytes(b.largest_bytes)}")
        if a.async_count == 0 and b.async_count:
            parts.append(f"now async ({b.async_count} of {b.count})")
        elif a.async_count and b.async_count == 0:
            parts.append(f"now sync ({b.sync_count} of {b.count})")
        elif a.async_count != b.async_count:
            parts.append(f"async {a.async_count} of {a.count} → {b.async_count} of {b.count}")
        if a.in_loop_count != b.in_loop_count:
            parts.append(f"in loop {a.in_loop_count} of {a.count} → {b.in_loop_count} of {b.count}")
        lines.append(f"{name}: {'; '.join(parts) if parts else 'unchanged'}")
    return lines


def render_inventory_md(rows: Iterable[InventoryRow]) -> str:
    """The per-run collective table as markdown."""
    out = [
        "| collective | ops | sync | async | in loop | total | largest op |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r.kind.value} | {r.count} | {r.sync_count} | {r.async_count} | {r.in_loop_count} "
            f"| {format_bytes(r.total_bytes)} | {format_bytes(r.largest_bytes)} |"
        )
    if len(out) == 2:
        out.append("| (none) | 0 | 0 | 0 | 0 | 0 B | 0 B |")
    return "\n".join(out) + "\n"
