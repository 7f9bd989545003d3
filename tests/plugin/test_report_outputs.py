"""Session-end outputs besides the report: --xlatune-export, the .zh.md mirror, and a report
file shared by cells of different parallelisms (extended, not overwritten)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from pytest_xlatune.report.__main__ import main as rerender
from tests.conftest import FAKE, FIXED

CELL = """\
model_tag: fake
nodes: 1
parallelism: {parallelism}
pdbs: 2
overrides: {overrides}
config_tags:
  sparse: {{}}
env_file:
  - flag: --xla_fake_env=1
    image_default: "0"
waves:
  2:
    - name: fast
      xla_flags: [--xla_fake_tgs=1100]
    - name: slow
      xla_flags: [--xla_fake_tgs=900]
"""
FSDP = CELL.format(parallelism="FSDP=8", overrides="{}")
# On this "parallelism" the fake trainer scales --xla_fake_tgs runs by 0.85: fast turns worse.
PP = CELL.format(parallelism="PP=2", overrides="{fake_penalize: --xla_fake_tgs, fake_penalty: 0.85}")


@pytest.fixture
def fsdp(pytester: pytest.Pytester, fake_trainer_env: None) -> Path:
    return pytester.makefile(".yml", fsdp8=FSDP)


def test_export_writes_csv_and_json_of_the_latest_results(pytester: pytest.Pytester, fsdp: Path) -> None:
    result = pytester.runpytest(str(fsdp), "--xlatune-export=exports", *FAKE)
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*written to *exports/fsdp8-results.csv", "*written to *exports/fsdp8-results.json"])
    frame = pd.read_csv(pytester.path / "exports" / "fsdp8-results.csv", dtype={"job_id": str})
    assert len(frame) == 8  # with evidence2::winner and the control the win needs after its first run
    fast = frame.set_index("profile").loc["fast"]
    assert fast["item"] == "wave2::fast[sparse]" and fast["direction"] == "better"
    assert fast["delta_pct"] == pytest.approx(10.0, abs=0.05)
    records = json.loads((pytester.path / "exports" / "fsdp8-results.json").read_text())
    assert {r["profile"] for r in records} == set(frame["profile"])


def test_export_dir_from_ini(pytester: pytest.Pytester, fsdp: Path) -> None:
    pytester.makeini("[pytest]\nxlatune_export = from-ini\n")
    pytester.runpytest(str(fsdp), *FAKE).assert_outcomes(passed=7)
    assert (pytester.path / "from-ini" / "fsdp8-results.csv").exists()


def test_no_export_by_default(pytester: pytest.Pytester, fsdp: Path) -> None:
    pytester.runpytest(str(fsdp), *FAKE).assert_outcomes(passed=7)
    assert not list(pytester.path.rglob("*-results.csv"))


def test_rerender_cli_exports_and_writes_the_mirror(
    pytester: pytest.Pytester, fsdp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.runpytest(str(fsdp), *FAKE).assert_outcomes(passed=7)
    assert not (pytester.path / "fake-tuning.zh.md").exists()
    assert rerender([str(fsdp), "--export", "out", "--zh"]) == 0
    written = capsys.readouterr().out
    assert "written fake-tuning.zh.md" in written and "written out/fsdp8-results.json" in written
    assert (pytester.path / "out" / "fsdp8-results.csv").exists()


def test_zh_mirror_on_request_and_kept_up_to_date_once_it_exists(pytester: pytest.Pytester, fsdp: Path) -> None:
    pytester.runpytest(str(fsdp), "-k", "baseline or fast", "--xlatune-zh", *FAKE)
    mirror = pytester.path / "fake-tuning.zh.md"
    assert "## 调优排行榜 (Tuning leaderboard)" in mirror.read_text()
    assert "| slow |" not in mirror.read_text()
    pytester.runpytest(str(fsdp), *FAKE)  # no --xlatune-zh: the existing mirror is rewritten
    assert re.search(r"\| slow \| `--xla_fake_tgs=900` \| 900\.\d", mirror.read_text())


def test_another_parallelism_extends_the_report_with_sign_flips(pytester: pytest.Pytester, fsdp: Path) -> None:
    pp = pytester.makefile(".yml", pp2=PP)
    pytester.runpytest(str(fsdp), *FAKE).assert_outcomes(passed=7)
    report = pytester.path / "fake-tuning.md"
    fsdp_section = report.read_text()
    assert "## Sign flips" not in fsdp_section

    pytester.runpytest(str(pp), *FAKE).assert_outcomes(passed=7)
    text = report.read_text()
    assert text.startswith(fsdp_section)  # the FSDP=8 section is kept as it was
    pp_section = text.split("<!-- xlatune:cell PP=2 pp2.yml -->")[1]
    assert re.search(
        r"\| fast \| `--xla_fake_tgs=1100` \| -6\.50 % \(worse\) \| "
        r"\+(?:10\.0\d|9\.9\d) % \(better\) \| \*\*flip\*\* \|",  # its profiled re-run pooled
        pp_section,
    )

    pytester.runpytest(str(fsdp), *FAKE)  # re-render FSDP=8 from the store: now it sees PP=2
    text = report.read_text()
    assert text.count("<!-- xlatune:cell ") == 2 and pp_section in text
    fsdp_section = text.split("<!-- xlatune:cell PP=2")[0]
    assert "**Sign flip:** the same flags are worse on PP=2 `sparse` (-6.50 %)" in fsdp_section
    assert 'if [[ "$_xlatune_v" -le 1 ]]; then' in fsdp_section


def test_summary_and_report_show_the_sweeps_node_hours_from_the_stored_jobs(
    pytester: pytest.Pytester, fsdp: Path
) -> None:
    result = pytester.runpytest(str(fsdp), *FIXED)  # one result per item (no confirming runs)
    result.assert_outcomes(passed=7)
    [store] = [p for p in pytester.path.rglob("*.jsonl") if "fsdp8" in p.name]
    jobs = [json.loads(line) for line in store.read_text().splitlines()]
    jobs = [r for r in jobs if r["event"] == "result"]
    assert len(jobs) == 7 and all(r["nodes"] == 1 for r in jobs)
    for r in jobs:  # one local node for the time the job ran
        assert r["node_minutes"] == pytest.approx((r["ended_at"] - r["started_at"]) / 60)
        assert r["submitted_at"] - 1 <= r["started_at"] <= r["ended_at"] <= r["finished_at"]
    total = sum(r["node_minutes"] for r in jobs)
    hours = f"{total / 60:.2f} node-hours ({total:.1f} node-minutes)"
    result.stdout.fnmatch_lines([f"xlatune: fsdp8.yml: sweep cost {hours} over 7 jobs"])
    [report] = pytester.path.rglob("fake-tuning.md")
    assert f"- **Cost:** {hours} over 7 jobs" in report.read_text()
    # A rerun reuses every result: it adds no job and no cost.
    again = pytester.runpytest(str(fsdp), *FIXED)
    again.stdout.fnmatch_lines([f"xlatune: fsdp8.yml: sweep cost {hours} over 7 jobs"])
    # One item measured again: the cell's cost grows by its job, and the line says what this
    # session's own job cost beside it.
    third = pytester.runpytest(str(fsdp), "-k", "fast", "--xlatune-remeasure", *FIXED)
    jobs = [json.loads(line) for line in store.read_text().splitlines()]
    [new] = [r for r in jobs if r["event"] == "result"][7:]
    total += new["node_minutes"]
    mine = f"{new['node_minutes'] / 60:.2f} node-hours ({new['node_minutes']:.1f} node-minutes)"
    third.stdout.fnmatch_lines(
        [
            f"xlatune: fsdp8.yml: sweep cost {total / 60:.2f} node-hours ({total:.1f} node-minutes) over 8 jobs"
            f" (this session: {mine} over 1 job)"
        ]
    )
