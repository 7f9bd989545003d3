"""The pytest-html row columns: an inert candidate says so in its Verdict cell, in the words of its
terminal line and junit property."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_xlatune.evidence.inert import inert_text
from pytest_xlatune.report.html import COLUMNS, FIRST_EXTRA_COLUMN, pytest_html_results_table_row


def verdict_cell(**props: object) -> str:
    cells = ["<td>passed</td>", "<td>cell.yml::wave2::vec256[default]</td>"]
    report = SimpleNamespace(
        user_properties=[(f"xlatune_{k}", v) for k, v in props.items()],
        nodeid="cell.yml::wave2::vec256[default]",
        when="call",
    )
    pytest_html_results_table_row(report, cells)  # type: ignore[arg-type]
    return cells[FIRST_EXTRA_COLUMN + [title for title, _ in COLUMNS].index("Verdict")]


def test_an_inert_candidates_verdict_cell_names_the_run_it_compiled_to() -> None:
    why = inert_text("wave1::baseline[default]")
    cell = verdict_cell(verdict="success", direction="within_noise", inert=why)
    assert cell.endswith(
        ">success within noise (inert here: compiles to `wave1::baseline[default]`&#x27;s program)</td>"
    )
    assert verdict_cell(verdict="success", direction="better", inert="").endswith(">success better</td>")
