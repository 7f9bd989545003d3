"""The report is a function of the store and the cell: re-rendering never builds the engine."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from tests import report_cases as cases


def test_the_report_cli_and_writer_import_no_engine_module() -> None:
    code = (
        "import sys, pytest_xlatune.report.__main__, pytest_xlatune.report.files, "
        "pytest_xlatune.report.build; "
        "print(sorted(m for m in sys.modules if m.startswith('pytest_xlatune.engine')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_pooled_result_keeps_each_jobs_own_tgs_in_the_appendix_and_job_tgs() -> None:
    # adaptive repeats pool a profile's runs into its first job's result (tgs = their mean); the
    # appendix row and junit/export job_tgs of that job showed the mean, not the job's own value
    from pytest_xlatune.report.data import every_job

    first = next(r for r in cases.winner().appendix if r.tgs is not None)
    second = dataclasses.replace(first, job_id="9001", tgs=900.0)
    pooled = dataclasses.replace(first, tgs=(first.tgs + 900.0) / 2, runs=((first.job_id, first.tgs), ("9001", 900.0)))
    assert pooled.own_tgs == first.tgs and first.own_tgs == first.tgs
    rows = {r.job_id: r.tgs for r in every_job([pooled], [first, second])}
    assert rows[first.job_id] == first.tgs and rows["9001"] == 900.0
