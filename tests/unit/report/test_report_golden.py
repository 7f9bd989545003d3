"""The tuning report (.md and its .zh.md mirror) rendered from hand-made results, against golden
files in tests/data/golden/. After an intended change, rewrite them and review the diff:

    XLATUNE_UPDATE_GOLDEN=1 pytest tests/unit/report/test_report_golden.py
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_xlatune.report.data import ReportData
from pytest_xlatune.report.markdown import render_document
from tests import report_cases as cases

GOLDEN = Path(__file__).parents[2] / "data" / "golden"
UPDATE = os.environ.get("XLATUNE_UPDATE_GOLDEN") == "1"
LANGUAGES = ("en", "zh")


def one_cell(make: Callable[[], ReportData]) -> Callable[[str], str]:
    def render(language: str) -> str:
        data = make()
        return render_document(None, [(f"cells/{data.cell.path.name}", data)], language)

    return render


def two_parallelisms(language: str) -> str:
    """PP=8 rendered first, then FSDP=8 extends the same file: FSDP's section gets the flips."""
    pp = cases.pp8()
    existing = render_document(None, [("cells/golden_pp8.yml", pp)], language)
    return render_document(existing, [("cells/golden_fsdp8.yml", cases.winner())], language)


SCENARIOS: dict[str, Callable[[str], str]] = {
    "winner": one_cell(cases.winner),
    "within_noise": one_cell(cases.within_noise),
    "env_file_hurts": one_cell(cases.env_file_hurts),
    "failures": one_cell(cases.failures),
    "many_profiles": one_cell(cases.many_profiles),
    "sign_flips": two_parallelisms,
    "evidence_no_winner": one_cell(cases.evidence_no_winner),
    "evidence_same_collectives": one_cell(cases.evidence_same_collectives),
    "pipeline_shapes": one_cell(cases.pipeline_shapes),
    "numerics_and_tie": one_cell(cases.numerics_and_tie),
    "under_powered": one_cell(cases.under_powered),
    "well_powered": one_cell(cases.well_powered),
}


def golden_path(name: str, language: str) -> Path:
    return GOLDEN / (f"{name}.md" if language == "en" else f"{name}.{language}.md")


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_report_matches_golden_file(name: str, language: str) -> None:
    text = SCENARIOS[name](language)
    path = golden_path(name, language)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: run with XLATUNE_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), (
        f"{path.name} differs: run with XLATUNE_UPDATE_GOLDEN=1 and review the diff"
    )


def _shape(text: str) -> list[str]:
    """Section depth, table widths and numbers: what a translation must not change."""
    shape = []
    for line in text.splitlines():
        if line.startswith("#"):
            shape.append(line.split(" ", 1)[0])
        elif line.startswith("|"):
            shape.append(f"|{line.count(' | ')}|" + " ".join(re.findall(r"[-+]?\d[\d,.]*", line)))
        elif line.startswith("<!-- "):
            shape.append(line)
    return shape


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_chinese_mirror_has_the_same_sections_tables_and_numbers(name: str) -> None:
    assert _shape(SCENARIOS[name]("zh")) == _shape(SCENARIOS[name]("en"))


def test_scenarios_show_what_they_are_named_for() -> None:
    """Guards the golden files against being rewritten into something that misses the point."""
    winner = SCENARIOS["winner"]("en")
    assert "**`ag256m`** ⭐" in winner and "### Baseline evidence: job 14604" in winner
    assert re.search(r"\| `sparse` \| 1,003\.0 \| -5\.28 % \|", winner)  # restore_default
    assert re.search(r"\| `dense` \| ag256m \| 940\.0 \|", winner)  # cross-config
    assert "No profile beat `baseline-deployed`" in SCENARIOS["within_noise"]("en")
    hurts = SCENARIOS["env_file_hurts"]("en")  # no winner, but the image defaults beat the env file
    assert "keep the deployed environment" not in hurts and "as deployed" not in hurts
    assert "Restore the image defaults in `configs/golden.env.sh`: `baseline-no-env` is +7.29 %" in hurts, hurts
    assert "- `--xla_gpu_all_gather_combine_threshold_bytes=1073741824` → `8589934592`" in hurts
    failed = SCENARIOS["failures"]("en")
    assert "| unknown_flag |" in failed and "| oom |" in failed
    many = SCENARIOS["many_profiles"]("en")
    board = many.split("## Tuning leaderboard")[1].split("##")[0]
    rows = [line for line in board.splitlines() if line.startswith("| ") and not line.startswith(("| Profile", "| …"))]
    assert len(rows) == 8 + 5 and "| … |" in board and "ag08" not in board
    flips = SCENARIOS["sign_flips"]("en")
    fsdp = flips.split("<!-- xlatune:cell FSDP=8")[1]
    assert re.search(r"\| ag256m \| .* \| \+7\.\d\d % \(better\) \| -4\.\d\d % \(worse\) \| \*\*flip\*\* \|", fsdp)
    assert 'if [[ "$_xlatune_v" -le 1 ]]; then' in fsdp
    assert "## Sign flips" not in flips.split("<!-- xlatune:cell FSDP=8")[0]  # PP kept verbatim


def test_evidence_scenarios_show_the_diff_and_the_profile_from_the_recordings() -> None:
    """The report's diff comes from the recorded dumps: all-reduce 2 → 11 ops with the combiner off."""
    diff = SCENARIOS["evidence_no_winner"]("en")
    why = diff.split("## Why the winning flag wins")[1].split("## Negative findings")[0]
    assert "- all-reduce: 2 ops of 640.8 KiB → 11 ops of 116.5 KiB; in loop 1 of 2 → 8 of 11" in why
    assert "- all-gather: unchanged" in why and "baseline job 3 against job 6" in why
    assert "do not show a speed-up" in why  # the recorded profile of the re-run is slower
    same = SCENARIOS["evidence_same_collectives"]("en")
    why = same.split("## Why the winning flag wins")[1].split("## Negative findings")[0]
    assert "Same collectives in both compiled train steps" in why
    assert re.search(
        r"The most time saved is in \*\*\w+\*\* \(-[\d.]+ ms per step\): with the same "
        r"collectives, the win is in",
        why,
    )
    pipeline = SCENARIOS["pipeline_shapes"]("en")
    assert "| mb16_v1 | 16 | 1 | 15.79 % | 1,150.0 |" in pipeline
    assert (
        "`mb16_v1` (bubble 15.79 %) measured 6.50 % slower than `mb8_v1` (bubble 27.27 %): more, "
        "smaller microbatches cost more than the smaller bubble saves."
    ) in pipeline


@pytest.mark.parametrize(
    ("language", "metric"),
    [
        ("en", "mean over steps 5-11 (9-11 when the profiler ran)"),
        ("zh", "取第 5-11 步的均值（开启 profiler 时取第 9-11 步）"),
    ],
)
def test_the_metric_line_names_the_steps_a_shorter_run_measures(language: str, metric: str) -> None:
    """steps: 12 runs steps 0-11, so the steady state is steps 5-11, not the default 5-14."""
    from dataclasses import replace

    jobs = cases.Jobs()
    jobs.wave1()
    data = cases.data(replace(cases.cell(), steps=12), jobs)
    assert metric in render_document(None, [("cells/golden_fsdp8.yml", data)], language)
