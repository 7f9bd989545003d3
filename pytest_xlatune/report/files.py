"""Write the tuning reports and exports of given cells (the report package's only writes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import safefs
from ..paths import export_path, report_path
from ..shareable import clean
from ..verdict.numerics import Mode
from . import sections
from .build import CellReport, report_data
from .data import ReportData
from .export import export_texts
from .markdown import render_document


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
    text = clean(text)
    if _read(path) == text:
        return Output(path, what, False, why)
    write_atomic(path, text)
    return Output(path, what, True, why)


def write_atomic(path: Path, text: str) -> None:
    """Replace the file in one rename, cleaned (shareable.clean: every report, export and lock);
    a link there is replaced, never written through; the user's umask (0644 under 022)."""
    safefs.write_atomic(path, clean(text))


def write_reports(
    reports: Sequence[CellReport],
    report_dir: Path,
    *,
    mode: Mode = Mode.FAIL,
    write_zh: bool = False,
    export_dir: Path | None = None,
) -> list[Output]:
    """Per model tag `<MODEL_TAG>-tuning.md` (and its .zh.md mirror when asked for or present),
    replacing only the sections of these cells; plus their exports when `export_dir` is given.
    A file whose content would not change is not rewritten."""
    by_tag: dict[str, list[tuple[str, ReportData]]] = {}
    for report in reports:
        by_tag.setdefault(report.cell.model_tag, []).append((report.cell_id, report_data(report, mode)))
    written = []
    for tag, cells in by_tag.items():
        path = report_path(report_dir, tag)
        mirror = report_path(report_dir, tag, "zh")
        existing = _read(path)
        written.append(write_if_changed(path, render_document(existing, cells), "tuning report"))
        if write_zh or mirror.exists():
            # Sign flips in the mirror also see cells that so far only the English file covers.
            known = sections.parse(existing or "").summaries()
            written.append(
                write_if_changed(mirror, render_document(_read(mirror), cells, "zh", known), "tuning report")
            )
    if export_dir is not None:
        for report in reports:
            for suffix, text in export_texts(list(report.results)).items():
                target = export_path(export_dir, report.slug, suffix)
                written.append(write_if_changed(target, text, "results export"))
    return written


def _read(path: Path) -> str | None:
    """The file's text; None when there is none, or a link is there (it is replaced, not read)."""
    try:
        return safefs.read_text_nofollow(path)
    except safefs.LinkRefused:
        return None
