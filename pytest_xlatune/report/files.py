"""Write the tuning reports of a session (the only IO of the report package)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..evidence import artifacts
from ..plan.expand import RunKind
from . import sections
from .data import ReportData, build
from .export import export_texts
from .markdown import render_document
from ..paths import cell_id, cell_slug, export_path, report_path
from ..results import JobResult

if TYPE_CHECKING:
    from ..cell.model import Cell
    from ..engine.session import Runtime


@dataclass(frozen=True)
class Output:
    """A file the session wrote, or left as it was; `why` says why (shown in the terminal)."""

    path: Path
    what: str  # tuning report | results export | recipe lock
    changed: bool
    why: str = ""
    exists: bool = True  # False: not written, and there is no such file

    def line(self, cwd: Path | None = None) -> str:
        """The terminal line; a path under `cwd` is shown relative to it."""
        path = self.path
        if cwd is not None and path.is_relative_to(cwd):
            path = path.relative_to(cwd)
        why = f": {self.why}" if self.why else ""
        if self.changed:
            return f"xlatune: {self.what} written to {path}{why}"
        return f"xlatune: {self.what} {path} {'not changed' if self.exists else 'not written'}{why}"


def write_if_changed(path: Path, text: str, what: str, why: str = "") -> Output:
    """Write `text` unless the file already holds exactly that (its mtime then stays)."""
    if _read(path) == text:
        return Output(path, what, False, why)
    write_atomic(path, text)
    return Output(path, what, True, why)


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def write_reports(runtime: Runtime, cells: list[Cell] | None = None) -> list[Output]:
    """Per model tag `<MODEL_TAG>-tuning.md` (and its .zh.md mirror when asked for or present),
    replacing only the sections of this session's cells; plus exports under --xlatune-export.
    A file whose content would not change is not rewritten. `cells`: these only (default: all
    the runtime knows)."""
    by_tag: dict[str, list[tuple[str, ReportData]]] = {}
    exports: dict[str, list[JobResult]] = {}
    for cell in runtime.cells.values() if cells is None else cells:
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
        path = report_path(runtime.settings.report_dir, tag)
        mirror = report_path(runtime.settings.report_dir, tag, "zh")
        existing = _read(path)
        written.append(write_if_changed(path, render_document(existing, cells), "tuning report"))
        if runtime.settings.write_zh or mirror.exists():
            # Sign flips in the mirror also see cells that so far only the English file covers.
            known = sections.parse(existing or "").summaries()
            written.append(write_if_changed(
                mirror, render_document(_read(mirror), cells, "zh", known), "tuning report"))
    if runtime.settings.export_dir is not None:
        for slug, results in exports.items():
            for suffix, text in export_texts(results).items():
                target = export_path(runtime.settings.export_dir, slug, suffix)
                written.append(write_if_changed(target, text, "results export"))
    return written


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None
