"""A cell's report inputs from its store and plain values, and the ReportData every format renders."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..adaptive.stored import pool_stored, summary_lines  # controls and repeats, as the session reports them
from ..cell.values import Cell
from ..evidence import artifacts
from ..evidence.inert import inert_lines
from ..paths import CellPaths
from ..plan.expand import RunKind, RunSpec, run_key
from ..plan.resolve import current_results
from ..results import JobResult, Spent
from ..store import ResultStore
from ..verdict.numerics import Mode
from .data import ReportData, build


@dataclass(frozen=True)
class CellReport:
    """What one cell's report is made of: the cell, its names, its current results, its nodelist."""

    cell: Cell
    cell_id: str  # its identity in a report file
    slug: str  # its file-system name (exports)
    results: tuple[JobResult, ...]
    nodelist: str
    spent: Spent | None = None  # what every job of the cell's store cost (attempts included)
    adaptive: tuple[str, ...] = ()  # what the adaptive sweep saved, the drift its controls saw
    jobs: tuple[JobResult, ...] = ()  # every job of the cell's store (the appendix lists them all)


def from_store(
    cell: Cell, store: ResultStore, specs: list[RunSpec], root: Path, image: str, mode: Mode
) -> CellReport | None:
    """The cell's report inputs read from its store alone; None before its sweep has begun."""
    info = store.sweep_info()
    if info is None:
        return None
    nodelist = str(info["nodelist"])
    latest = store.latest_by_key()
    key = lambda spec: run_key(cell, spec, nodelist, image)  # noqa: E731

    def pool(found: list[JobResult]) -> list[JobResult]:  # what the session resolved its runs from
        return pool_stored(cell, specs, latest, key, image, found)

    results = pool(current_results(cell, specs, latest, key, mode, pool))
    jobs = store.jobs()
    return from_results(
        cell,
        root,
        results,
        nodelist,
        Spent.of(jobs),
        (*summary_lines(store.results(), list(store.events())), *inert_lines(latest.values())),
        tuple(jobs),
    )


def from_results(
    cell: Cell,
    root: Path,
    results: list[JobResult],
    nodelist: str,
    spent: Spent | None = None,
    adaptive: tuple[str, ...] = (),
    jobs: tuple[JobResult, ...] = (),
) -> CellReport:
    paths = CellPaths(cell.path, root, Path())
    return CellReport(cell, paths.cell_id, paths.slug, tuple(results), nodelist, spent, adaptive, jobs)


def report_data(report: CellReport, mode: Mode) -> ReportData:
    """The one ReportData of a cell (evidence artifacts read here): markdown and HTML render it."""
    results = list(report.results)
    loaded = {
        r.job_id: artifacts.load(r)
        for r in (*results, *report.jobs)
        if r.kind in (RunKind.EVIDENCE, RunKind.WINNER_EVIDENCE)
    }
    return build(
        report.cell,
        results,
        report.nodelist,
        report.cell.backend.kind.value,
        loaded=loaded,
        mode=mode,
        spent=report.spent,
        adaptive=report.adaptive,
        jobs=report.jobs,
    )
