"""The pytest-html row columns: an inert candidate says so in its Verdict cell, in the words of its
terminal line and junit property."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_xlatune.evidence.inert import inert_text
from pytest_xlatune.report.html import COLUMNS, FIRST_EXTRA_COLUMN, pytest_html_results_table_row


def column_cell(column: str, nodeid: str, **props: object) -> str:
    """The HTML results table's `column` cell of an item with these xlatune_* properties."""
    cells = ["<td>passed</td>", f"<td>{nodeid}</td>"]
    report = SimpleNamespace(
        user_properties=[(f"xlatune_{k}", v) for k, v in props.items()], nodeid=nodeid, when="call"
    )
    pytest_html_results_table_row(report, cells)  # type: ignore[arg-type]
    return cells[FIRST_EXTRA_COLUMN + [title for title, _ in COLUMNS].index(column)]


def verdict_cell(**props: object) -> str:
    return column_cell("Verdict", "cell.yml::wave2::vec256[default]", **props)


def test_an_inert_candidates_verdict_cell_names_the_run_it_compiled_to() -> None:
    why = inert_text("wave1::baseline[default]")
    cell = verdict_cell(verdict="success", direction="within_noise", inert=why)
    assert cell.endswith(
        ">success within noise (inert here: compiles to `wave1::baseline[default]`&#x27;s program)</td>"
    )
    assert verdict_cell(verdict="success", direction="better", inert="").endswith(">success better</td>")


def job_cell(**props: object) -> str:
    return column_cell("Job", "cell.yml::wave1::baseline-r2[default]", **props)


def test_the_job_cell_names_the_runs_behind_the_tgs_cell() -> None:
    # The TGS cell shows the figure (the mean of its settings' runs); the Job cell showed the item's
    # own job only (`2` beside 11936.4 = mean of jobs 1 and 2), as the leaderboard no longer does.
    runs = "11936.4 = mean of 11379.9, 12493.0; jobs 1, 2"
    cell = job_cell(tgs=11936.4, job_id="2", runs=runs)
    assert cell.endswith(f">{runs}</td>") and "xlatune-fig-job" in cell
    assert job_cell(tgs=11379.9, job_id="1", runs="11379.9 (job 1)").endswith(">1</td>")
