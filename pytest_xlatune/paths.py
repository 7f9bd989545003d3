"""The one namer of files: a cell's store, its job, evidence and cluster dirs, its lock, the reports."""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


def cell_relative(cell_path: Path, root: Path) -> PurePosixPath:
    """The cell file relative to the rootdir (just its name when it lies outside)."""
    try:
        return PurePosixPath(cell_path.resolve().relative_to(root.resolve()).as_posix())
    except ValueError:
        return PurePosixPath(cell_path.name)


def cell_id(cell_path: Path, root: Path) -> str:
    """A cell's identity in a report file: its path relative to the rootdir."""
    return cell_relative(cell_path, root).as_posix()


def legacy_slug(cell_path: Path, root: Path) -> str:
    """The slug before it was made unique per cell path (`a/x.yml` and `a__x.yaml` shared it)."""
    return "__".join(cell_relative(cell_path, root).with_suffix("").parts)


def cell_slug(cell_path: Path, root: Path) -> str:
    """A file-system-safe name for a cell, unique per cell path: `<folder>__<stem>` for a
    `.yml` cell inside the rootdir whose path has no `__`; otherwise that name and a hash of
    the cell's path (so `x.yml`/`x.yaml`, `a/x.yml`/`a__x.yml` and same-named cells outside the
    rootdir never share a store)."""
    plain = legacy_slug(cell_path, root)
    relative = cell_relative(cell_path, root)
    inside = _inside(cell_path, root)
    if inside and relative.suffix == ".yml" and not any("__" in part for part in relative.parts):
        return plain
    identity = relative.as_posix() if inside else str(cell_path.resolve())
    return f"{plain}-{hashlib.sha256(identity.encode()).hexdigest()[:8]}"


def _inside(cell_path: Path, root: Path) -> bool:
    return cell_path.resolve().is_relative_to(root.resolve())


def lock_path(cell_path: Path) -> Path:
    """The recipe lock committed next to the cell: `<cell>.lock.json`."""
    return cell_path.with_suffix(".lock.json")


def store_file(store_dir: Path, slug: str) -> Path:
    """A cell's results store: `<store>/<slug>.jsonl` (its OS lock and torn tail beside it)."""
    return store_dir / f"{slug}.jsonl"


def slug_of_workdir(workdir: str) -> str:
    """The slug a cluster-side workdir was named after (CellPaths.workdir)."""
    return posixpath.basename(workdir.rstrip("/"))


def job_log_name(job_id: str, job_name: str) -> str:
    """A job's log, `<job id>-<job name>.log`, beside its dir `<job id>-<job name>` (local and
    sbatch backends; `%j` as the id is sbatch's own pattern for it)."""
    return f"{job_id}-{job_name}.log"


def job_dir_name(job_id: str, job_name: str) -> str:
    return f"{job_id}-{job_name}"


def report_path(report_dir: Path, model_tag: str, language: str = "en") -> Path:
    """`<MODEL_TAG>-tuning.md`, or its Chinese mirror `<MODEL_TAG>-tuning.zh.md`."""
    return report_dir / (f"{model_tag}-tuning.md" if language == "en" else f"{model_tag}-tuning.{language}.md")


def html_report_path(report_dir: Path, model_tag: str) -> Path:
    """`<MODEL_TAG>-tuning.html`: the standalone HTML report `python -m pytest_xlatune.report` writes."""
    return report_dir / f"{model_tag}-tuning.html"


def export_path(export_dir: Path, slug: str, suffix: str) -> Path:
    """A cell's results export: `<export>/<slug>-results<.csv|.json>`."""
    return export_dir / f"{slug}-results{suffix}"


@dataclass(frozen=True)
class CellPaths:
    """Every file of one cell, named once: store, local job dirs, fetched evidence, cluster workdir."""

    cell_path: Path
    root: Path
    store_dir: Path

    @property
    def slug(self) -> str:
        return cell_slug(self.cell_path, self.root)

    @property
    def cell_id(self) -> str:
        return cell_id(self.cell_path, self.root)

    @property
    def store(self) -> Path:
        return store_file(self.store_dir, self.slug)

    @property
    def legacy_store(self) -> Path | None:
        """Where an older version kept this cell's store, when that was another name and the
        name was this cell's alone (inside the rootdir); None otherwise."""
        relative = cell_relative(self.cell_path, self.root)
        if (
            not _inside(self.cell_path, self.root)
            or any("__" in part for part in relative.parts)
            or self.cell_path.with_suffix(".yml").exists()
        ):
            return None  # the old name was shared (or is another cell's own): left where it is
        old = store_file(self.store_dir, legacy_slug(self.cell_path, self.root))
        return old if old != self.store else None

    @property
    def jobs_dir(self) -> Path:
        """Where the local backend's jobs write: `<store>/<slug>/jobs/<n>/`."""
        return self.store_dir / self.slug / "jobs"

    def evidence_dir(self, job_id: str) -> Path:
        """Where a remote evidence run's artifacts are copied: `<store>/<slug>/evidence/<job>`."""
        return self.store_dir / self.slug / "evidence" / job_id

    def workdir(self, base: str) -> str:
        """The cluster-side workdir of the cell's jobs (relative: resolved by the backend)."""
        return posixpath.join(base, self.slug)

    @property
    def lock(self) -> Path:
        return lock_path(self.cell_path)
