"""Write the tuning reports of a session (the only IO of the report package)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .data import build
from .markdown import render_tuning_md

if TYPE_CHECKING:
    from ..runtime import Runtime


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def write_reports(runtime: Runtime) -> list[Path]:
    """One `<MODEL_TAG>-tuning.md` per model tag among the session's cells."""
    by_tag: dict[str, list[str]] = {}
    for cell in runtime.cells.values():
        sweep = runtime.sweep_if_stored(cell)
        if sweep is None:
            continue
        data = build(cell, sweep.results(), sweep.nodelist, cell.backend.kind.value)
        by_tag.setdefault(cell.model_tag, []).append(render_tuning_md(data))
    written = []
    for tag, parts in by_tag.items():
        path = runtime.settings.report_dir / f"{tag}-tuning.md"
        write_atomic(path, "\n---\n\n".join(parts))
        written.append(path)
    return written
