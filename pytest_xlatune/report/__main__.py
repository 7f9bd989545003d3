"""Re-render tuning reports (markdown, and HTML beside it) from the results store without running anything.

python -m pytest_xlatune.report cells/demo_fsdp8.yml [--store .xlatune] [--out .] [--zh]
                                [--export DIR] [--numerics fail|warn] [--mask REGEX]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cell.load import CellError, load_cell
from ..cell.values import Cell
from ..options import mask_patterns, numerics_mode
from ..paths import CellPaths, html_report_path
from ..plan.expand import expand
from ..shareable import clean, configure
from ..store import ResultStore, StoreError
from ..verdict.numerics import Mode
from .build import CellReport, from_store, report_data
from .files import Output, write_if_changed, write_reports
from .history import HistoryError, history_path
from .history_files import write_history_files
from .html_page import page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_xlatune.report", description=__doc__)
    parser.add_argument("cells", nargs="+", type=Path, help="cell files whose reports to render")
    parser.add_argument("--store", type=Path, default=Path(".xlatune"), help="results store directory")
    parser.add_argument("--out", type=Path, default=Path("."), help="where reports are written")
    parser.add_argument("--root", type=Path, default=Path("."), help="the pytest rootdir of the sweep")
    parser.add_argument(
        "--zh", action="store_true", help="also write <MODEL_TAG>-tuning.zh.md (rewritten anyway when it exists)"
    )
    parser.add_argument(
        "--export",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write each cell's latest results as CSV and JSON into DIR",
    )
    parser.add_argument(
        "--numerics",
        type=numerics_mode,
        default=Mode.FAIL,
        metavar="fail|warn",
        help="as the sweep's --xlatune-numerics: may a run whose loss left the "
        "baseline's be the recipe (warn) or not (fail, the default)",
    )
    parser.add_argument(
        "--mask",
        type=mask_patterns,
        default=(),
        metavar="REGEX",
        help="as the sweep's --xlatune-mask: more text to mask in what is written",
    )
    args = parser.parse_args(argv)
    configure(args.mask)
    try:
        cells = [load_cell(path) for path in args.cells]
    except CellError as error:
        print(clean(f"error: {error}"), file=sys.stderr)
        return 2
    try:
        reports = [
            report
            for cell in cells
            if (
                report := from_store(
                    cell,
                    ResultStore(CellPaths(cell.path, args.root, args.store).store),
                    expand(cell),
                    args.root,
                    cell.image,
                    args.numerics,
                )
            )
            is not None
        ]
        written = write_reports(reports, args.out, mode=args.numerics, write_zh=args.zh, export_dir=args.export)
        written += write_html_pages(reports, args.out, args.numerics) + write_histories(cells, args)
    except (StoreError, HistoryError, OSError) as error:  # a link or a folder in place of a store, a report dir
        print(clean(f"error: {error}"), file=sys.stderr)
        return 2
    if not written:
        print("error: no stored results for these cells under " + str(args.store), file=sys.stderr)
        return 1
    for output in written:
        print(f"{'written' if output.changed else 'unchanged'} {output.path}")
    return 0


def write_histories(cells: list[Cell], args: argparse.Namespace) -> list[Output]:
    """`<MODEL_TAG>-history.md/.html` and their charts, for the cells with a history."""
    by_tag: dict[str, list[tuple[str, str, Path]]] = {}
    for cell in cells:
        paths = CellPaths(cell.path, args.root, args.store)
        by_tag.setdefault(cell.model_tag, []).append((paths.cell_id, paths.slug, history_path(paths.store)))
    return [o for tag, found in by_tag.items() for o in write_history_files(tag, found, args.out)]


def write_html_pages(reports: list[CellReport], out: Path, mode: Mode) -> list[Output]:
    """`<MODEL_TAG>-tuning.html` beside each markdown report: the cells' HTML blocks."""
    by_tag: dict[str, list[CellReport]] = {}
    for report in reports:
        by_tag.setdefault(report.cell.model_tag, []).append(report)
    return [
        write_if_changed(html_report_path(out, tag), page(tag, [report_data(r, mode) for r in cells]), "HTML report")
        for tag, cells in by_tag.items()
    ]


if __name__ == "__main__":
    sys.exit(main())
