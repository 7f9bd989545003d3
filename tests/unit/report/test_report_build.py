"""The report is a function of the store and the cell: re-rendering never builds the engine."""

from __future__ import annotations

import subprocess
import sys


def test_the_report_cli_and_writer_import_no_engine_module() -> None:
    code = (
        "import sys, pytest_xlatune.report.__main__, pytest_xlatune.report.files, "
        "pytest_xlatune.report.build; "
        "print(sorted(m for m in sys.modules if m.startswith('pytest_xlatune.engine')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
