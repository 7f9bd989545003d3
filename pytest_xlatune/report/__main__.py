"""Re-render tuning reports from the results store without running anything.

    python -m pytest_xlatune.report cells/demo_fsdp8.yml [--store .xlatune] [--out .] [--zh]
                                    [--export DIR] [--numerics fail|warn]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cell.load import CellError, load_cell
from ..engine.session import Runtime
from ..judge.numerics import Mode
from ..settings import Settings, numerics_mode
from .files import write_reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_xlatune.report", description=__doc__)
    parser.add_argument("cells", nargs="+", type=Path, help="cell files whose reports to render")
    parser.add_argument("--store", type=Path, default=Path(".xlatune"), help="results store directory")
    parser.add_argument("--out", type=Path, default=Path("."), help="where reports are written")
    parser.add_argument("--root", type=Path, default=Path("."), help="the pytest rootdir of the sweep")
    parser.add_argument("--zh", action="store_true",
                        help="also write <MODEL_TAG>-tuning.zh.md (rewritten anyway when it exists)")
    parser.add_argument("--export", type=Path, default=None, metavar="DIR",
                        help="also write each cell's latest results as CSV and JSON into DIR")
    parser.add_argument("--numerics", type=numerics_mode, default=Mode.FAIL, metavar="fail|warn",
                        help="as the sweep's --xlatune-numerics: may a run whose loss left the "
                        "baseline's be the recipe (warn) or not (fail, the default)")
    args = parser.parse_args(argv)
    settings = Settings(store_dir=args.store, report_dir=args.out, write_report=True,
                        remeasure=False, poll_interval=1.0, python=sys.executable,
                        export_dir=args.export, write_zh=args.zh, numerics=args.numerics)
    runtime = Runtime(settings, args.root, report=lambda text: None)
    try:
        for path in args.cells:
            runtime.note_cell(load_cell(path))
    except CellError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    written = write_reports(runtime)
    if not written:
        print("error: no stored results for these cells under " + str(args.store), file=sys.stderr)
        return 1
    for output in written:
        print(f"{'written' if output.changed else 'unchanged'} {output.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
