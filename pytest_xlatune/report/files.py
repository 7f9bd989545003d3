"""Write the tuning reports of a session (the only IO of the report package)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..evidence import artifacts
from ..plan import RunKind
from . import sections
from .data import ReportData, build
from .export import export_texts
from .markdown import render_document
from ..results import JobResult

if TYPE_CHECKING:
    from ..runtime import Runtime


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def write_reports(runtime: Runtime) -> list[Path]:
    """Per model tag `<MODEL_TAG>-tuning.md` (and its .zh.md mirror when asked for or present),
    replacing only the sections of this session's cells; plus exports under --xlatune-export."""
    from ..runtime import cell_slug  # runtime imports this module

    by_tag: dict[str, list[tuple[str, ReportData]]] = {}
    exports: dict[str, list[JobResult]] = {}
    for cell in runtime.cells.values():
        sweep = runtime.sweep_if_stored(cell)
        if sweep is None:
            continue
        results = sweep.results()
        loaded = {r.job_id: artifacts.load(r) for r in results
                  if r.kind in (RunKind.EVIDENCE.value, RunKind.WINNER_EVIDENCE.value)}
        data = build(cell, results, sweep.nodelist, cell.backend.kind.value, loaded=loaded,
                     mode=runtime.settings.numerics)
        by_tag.setdefault(cell.model_tag, []).append((cell_id(cell.path, runtime.root), data))
        exports[cell_slug(cell.path, runtime.root)] = results
    written = []
    for tag, cells in by_tag.items():
        path = runtime.settings.report_dir / f"{tag}-tuning.md"
        mirror = path.with_name(f"{tag}-tuning.zh.md")
        existing = _read(path)
        write_atomic(path, render_document(existing, cells))
        written.append(path)
        if runtime.settings.write_zh or mirror.exists():
            # Sign flips in the mirror also see cells that so far only the English file covers.
            known = sections.parse(existing or "").summaries()
            write_atomic(mirror, render_document(_read(mirror), cells, "zh", known))
            written.append(mirror)
    if runtime.settings.export_dir is not None:
        for slug, results in exports.items():
            for suffix, text in export_texts(results).items():
                target = runtime.settings.export_dir / f"{slug}-results{suffix}"
                write_atomic(target, text)
                written.append(target)
    return written


def cell_id(cell_path: Path, root: Path) -> str:
    """A cell's identity in a report file: its path relative to the rootdir."""
    try:
        return cell_path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return cell_path.name


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None
