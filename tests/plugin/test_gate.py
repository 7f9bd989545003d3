"""Image-upgrade gate with the fake trainer: lock written by a sweep, then replayed on new images.

An "image" of the local backend is a Python interpreter; the new images here are wrappers around
this one that change what the trainer sees, as a new XLA build would. The lock's image (none
here: this interpreter) runs each gate run's control just before it, in the same session.
"""

from __future__ import annotations

import json
import re
import stat
import sys
import xml.etree.ElementTree as ET
from html import escape as html_escape
from pathlib import Path

import pytest

from pytest_xlatune.report.history import load_history
from tests.conftest import FAKE

CELL = """\
model_tag: gated
nodes: 1
parallelism: FSDP=8
config_tags:
  sparse: {}
  dense: {}
waves:
  2:
    - {name: fast, xla_flags: [--xla_fake_tgs=1100]}
    - {name: slow, xla_flags: [--xla_fake_tgs=900]}
"""

WRAPPER = """#!/bin/bash
{body}
exec {python} "$@"
"""


def image(tmp: Path, name: str, body: str) -> str:
    path = tmp / name
    path.write_text(WRAPPER.format(body=body, python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def swept(pytester: pytest.Pytester, fake_trainer_env: None) -> Path:
    cell = pytester.makefile(".yml", gated=CELL)
    pytester.runpytest(str(cell), *FAKE).assert_outcomes(passed=9)  # + evidence2::winner
    return cell


def test_sweep_writes_a_lock_with_the_winner_per_config_tag(swept: Path) -> None:
    lock = json.loads(swept.with_suffix(".lock.json").read_text())
    assert [(r["config_tag"], r["profile"], r["xla_flags"]) for r in lock["recipes"]] == [
        ("sparse", "fast", ["--xla_fake_tgs=1100"]),
        ("dense", "fast", ["--xla_fake_tgs=1100"]),
    ]
    assert lock["recipes"][0]["tgs"] == pytest.approx(1100, rel=0.01)
    assert lock["recipes"][0]["ci_low_pct"] > 0 and lock["nodelist"] == "localhost"


def test_gate_runs_only_baselines_and_locked_recipes_and_passes_on_the_same_image(
    pytester: pytest.Pytester, swept: Path
) -> None:
    result = pytester.runpytest(str(swept), "--xlatune-gate", "--collect-only", "-q", *FAKE)
    result.stdout.fnmatch_lines(
        [
            "gated.yml::gate::baseline-oldimage[[]sparse[]]",
            "gated.yml::gate::baseline[[]sparse[]]",
            "gated.yml::gate::baseline-r2-oldimage[[]sparse[]]",
            "gated.yml::gate::baseline-r2[[]sparse[]]",
            "gated.yml::gate::fast-oldimage[[]sparse[]]",
            "gated.yml::gate::fast[[]sparse[]]",
            "gated.yml::gate::fast-oldimage[[]dense[]]",
            "gated.yml::gate::fast[[]dense[]]",
            "12 tests collected*",
        ]
    )
    same = image(pytester.path, "same-python", "")
    pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={same}", *FAKE).assert_outcomes(passed=12)
    # Interleaved in time: each run on the new image right after its control on the lock's.
    gate_runs = [e for e in events(pytester) if e["event"] == "result" and e["wave"] == "gate"]
    assert [e["image"].endswith("same-python") for e in gate_runs] == [False, True] * 6
    assert [e["profile"] for e in gate_runs[:2]] == ["baseline-oldimage", "baseline"]
    assert {e["image"] for e in gate_runs[::2]} == {""}  # the lock's image: none


def test_gate_fails_clearly_when_a_locked_flag_is_gone(pytester: pytest.Pytester, swept: Path) -> None:
    gone = image(
        pytester.path,
        "noflag-python",
        """
case "$XLA_FLAGS" in *--xla_fake_tgs=*)
  echo "F1201 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: --xla_fake_tgs=1100"; exit 1;;
esac""",
    )
    result = pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={gone}", *FAKE)
    result.assert_outcomes(passed=10, failed=2)  # the old-image controls and new baselines pass
    result.stdout.fnmatch_lines(
        [
            "*locked recipe 'fast' [[]sparse[]]: a locked flag no longer exists in "
            "image*noflag-python*Unknown flag in XLA_FLAGS: --xla_fake_tgs=1100*"
            "not a performance regression*"
        ]
    )


def test_gate_fails_when_the_recipe_got_slower(pytester: pytest.Pytester, swept: Path) -> None:
    slower = image(
        pytester.path,
        "slow-python",
        """
case "$XLA_FLAGS" in *--xla_fake_tgs=1100*) export XLA_FLAGS="$XLA_FLAGS --xla_fake_tgs=1030";; esac""",
    )
    result = pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={slower}", *FAKE)
    result.assert_outcomes(passed=10, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*recipe 'fast' [[]sparse[]] regressed vs the lock*TGS 1030.* vs 1100.*"
            "-6.3* %*tolerance -1 %*on the lock's image (default) in this session "
            "(locked 1100.*, for context)"
        ]
    )
    assert "no longer beats" not in result.stdout.str()  # 1030 still beats the baseline (1000)
    # The sweep and the gate each appended a row per config tag to the cell's history.
    history = load_history(pytester.path / ".xlatune" / "gated.history.csv")
    assert list(zip(history["kind"], history["config_tag"], history["recipe"], strict=True)) == [
        ("sweep", "sparse", "fast"),
        ("sweep", "dense", "fast"),
        ("gate", "sparse", "fast"),
        ("gate", "dense", "fast"),
    ]
    assert history["recipe_tgs"].tolist()[2] == pytest.approx(1030, rel=0.01)
    assert history["control_tgs"].tolist()[2] == pytest.approx(1100, rel=0.01)
    assert history["image"].tolist() == ["", "", slower, slower] and (history["node_hours"] > 0).all()


def test_a_cell_without_a_lock_is_skipped_in_one_line_and_the_others_are_gated(
    pytester: pytest.Pytester, swept: Path
) -> None:
    # `pytest cells/ --xlatune-gate`: a sweep that found nothing better wrote no lock for nolock.yml.
    pytester.makefile(".yml", nolock=CELL.replace("model_tag: gated", "model_tag: unlocked"))
    result = pytester.runpytest("gated.yml", "nolock.yml", "--xlatune-gate", "-rs", *FAKE)
    result.assert_outcomes(passed=12, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1[]] nolock.yml:1: nolock.lock.json: no recipe lock, nothing to gate "
            "(a finished sweep writes one when it finds a recipe better than the "
            "baseline: run pytest nolock.yml first)"
        ]
    )
    assert "Traceback" not in result.stdout.str() and "error" not in result.stdout.str().lower()
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("{not json", "expected JSON, found *"),
        ("[" * 3000 + "]" * 3000, "expected JSON, found a document nested too deeply"),
        ("[]", "expected a JSON object (a recipe lock), found a list"),
        ("null", "expected a JSON object (a recipe lock), found null"),
    ],
    ids=["syntax", "deep", "list", "null"],
)
def test_an_unreadable_lock_is_one_clear_line(
    pytester: pytest.Pytester, fake_trainer_env: None, text: str, found: str
) -> None:
    cell = pytester.makefile(".yml", broken=CELL)
    cell.with_suffix(".lock.json").write_text(text)
    result = pytester.runpytest(str(cell), "--xlatune-gate", *FAKE)
    result.stdout.fnmatch_lines([f"*broken.lock.json: {found}"])
    assert "Traceback" not in result.stdout.str() and "Error:" not in result.stdout.str()


def test_a_likely_regression_is_measured_again_before_the_gate_fails(pytester: pytest.Pytester, swept: Path) -> None:
    # -2.5 % on one run is probably past the 1 % tolerance, but not surely: the gate measures the
    # recipe and the baseline again, each after its old-image control (at most
    # thresholds.remeasure times), and fails once the interval is past the tolerance.
    slower = image(
        pytester.path,
        "bit-slower-python",
        """
case "$XLA_FLAGS" in *--xla_fake_tgs=1100*) export XLA_FLAGS="$XLA_FLAGS --xla_fake_tgs=1072.5";; esac""",
    )
    result = pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={slower}", "-k", "sparse", *FAKE)
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*recipe 'fast' [[]sparse[]] regressed vs the lock*"
            "TGS 1072.* vs 1100.* (-2.50 %*jobs *, * vs jobs *, * on the lock's image"
            " (default) in this session (locked 1100.*, for context)"
        ]
    )
    gate_runs = [e for e in events(pytester) if e["event"] == "result" and e["wave"] == "gate"]
    on_new_image = [e["profile"] for e in gate_runs if e["image"].endswith("bit-slower-python")]
    assert sorted(on_new_image) == ["baseline", "baseline", "baseline-r2", "fast", "fast"]
    # Every new-image run, the re-measurements too, came right after its old-image control.
    assert [e["profile"] for e in gate_runs] == [
        p for name in ["baseline", "baseline-r2", "fast", "fast", "baseline"] for p in (f"{name}-oldimage", name)
    ]


def test_a_lock_written_on_a_faster_cluster_does_not_fail_the_same_image(
    pytester: pytest.Pytester, swept: Path
) -> None:
    # The lock's TGS are 60 % above what this machine measures today (it drifted, or got busier):
    # compared with the stored numbers the gate would fail; old vs new in this session it passes.
    path = swept.with_suffix(".lock.json")
    lock = json.loads(path.read_text())
    for recipe in lock["recipes"]:
        recipe["tgs"], recipe["baseline_tgs"] = recipe["tgs"] * 1.6, recipe["baseline_tgs"] * 1.6
    path.write_text(json.dumps(lock))
    same = image(pytester.path, "same-python", "")
    pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={same}", *FAKE).assert_outcomes(passed=12)


def events(pytester: pytest.Pytester) -> list[dict[str, object]]:
    return [json.loads(line) for line in (pytester.path / ".xlatune" / "gated.jsonl").read_text().splitlines()]


def test_the_gate_writes_its_own_report_and_leaves_the_tuning_report_as_the_sweep_wrote_it(
    pytester: pytest.Pytester, swept: Path
) -> None:
    tuning = (pytester.path / "gated-tuning.md").read_text()
    lock = json.loads(swept.with_suffix(".lock.json").read_text())
    # The lock says what it was measured on: this interpreter and its JAX version.
    assert lock["measured_on"].startswith(f"Python {sys.version.split()[0]}, ")
    assert lock["measured_on"].endswith(f"({sys.executable})")
    slower = image(
        pytester.path,
        "slow-python",
        """
case "$XLA_FLAGS" in *--xla_fake_tgs=1100*) export XLA_FLAGS="$XLA_FLAGS --xla_fake_tgs=1030";; esac""",
    )
    result = pytester.runpytest(
        str(swept), "--xlatune-gate", f"--xlatune-image={slower}", "--html=gate.html", "--self-contained-html", *FAKE
    )
    result.assert_outcomes(passed=10, failed=2)
    result.stdout.fnmatch_lines(["xlatune: gate report written to gated-gate.md"])
    html = (pytester.path / "gate.html").read_text()
    assert "Image gate: gated.yml" in html and "FAILED: 2 of 12 gate item(s) failed" in html
    assert html.find("FAILED: 2 of 12") < html.find('<div id="environment-header">')  # the verdict first
    assert (pytester.path / "gated-tuning.md").read_text() == tuning
    gate = (pytester.path / "gated-gate.md").read_text()
    assert "**Verdict: FAILED: 2 of 12 gate item(s) failed**" in gate
    assert f"| new | {slower} | Python {sys.version.split()[0]}, " in gate
    assert f"| lock ({lock['date']}, gated.lock.json) | (default) | {lock['measured_on']} |" in gate
    assert "`gate::fast[sparse]` (failed):" in gate and "recipe 'fast' [sparse] regressed vs the lock" in gate


def test_advisory_mode_reports_the_regression_and_does_not_fail(pytester: pytest.Pytester, swept: Path) -> None:
    slower = image(
        pytester.path,
        "slow-python",
        """
case "$XLA_FLAGS" in *--xla_fake_tgs=1100*) export XLA_FLAGS="$XLA_FLAGS --xla_fake_tgs=1030";; esac""",
    )
    result = pytester.runpytest(
        str(swept), "--xlatune-gate", "--xlatune-gate-advisory", f"--xlatune-image={slower}", "-rx", *FAKE
    )
    result.assert_outcomes(passed=10, xfailed=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["XFAIL *gate::fast[[]sparse[]]* - advisory gate: recipe 'fast' [[]sparse[]] regressed*"]
    )
    gate = (pytester.path / "gated-gate.md").read_text()
    assert "**Verdict: FAILED (advisory: reported, the exit code stays 0): 2 of 12 gate item(s) failed**" in gate


def test_advisory_without_the_gate_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--xlatune-gate-advisory")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--xlatune-gate-advisory: expected with --xlatune-gate, found it alone"])


def test_a_new_venv_without_the_workload_fails_preflight_once_in_one_line(
    pytester: pytest.Pytester, swept: Path
) -> None:
    # A new venv that lacks the workload module: every item used to be retried and fail with
    # "exited with code 1 before any completed step"; pre-flight says so once, before any job.
    bare = image(
        pytester.path, "bare-python", 'export PYTHONPATH=/nonexistent PYTHONNOUSERSITE=1\nexec python3 -I "$@"'
    )
    result = pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={bare}", *FAKE)
    result.assert_outcomes(failed=12)
    line = (
        f"*gated.yml: --xlatune-image: expected an interpreter that can run the workload, found {bare} "
        "(Python *) cannot import the workload module fake_trainer: make fake_trainer importable there*"
    )
    result.stdout.fnmatch_lines([line])
    assert "before any completed step" not in result.stdout.str()
    jobs = [e for e in events(pytester) if e["event"] == "submitted" and e.get("wave") == "gate"]
    assert jobs == []


def test_a_second_gate_measures_its_runs_again_in_its_own_time_window(pytester: pytest.Pytester, swept: Path) -> None:
    same = image(pytester.path, "same-python", "")
    pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={same}", *FAKE).assert_outcomes(passed=12)
    second = pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={same}", *FAKE)
    second.assert_outcomes(passed=12)
    assert "REUSED" not in second.stdout.str()
    gate_runs = [e for e in events(pytester) if e["event"] == "result" and e["wave"] == "gate"]
    # Each of the 12 gate items ran once per gate session: none of the second's came from the first.
    assert len(gate_runs) == 24 and len({e["job_id"] for e in gate_runs}) == 24
    assert [e["profile"] for e in gate_runs[:12]] == [e["profile"] for e in gate_runs[12:]]


def test_the_gate_reports_run_table_is_this_gates(pytester: pytest.Pytester, swept: Path) -> None:
    # A gate of another image before: its runs are the latest of their keys in the store, but
    # not this gate's (they were listed under this session's verdict).
    other = image(pytester.path, "other-python", "")
    pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={other}", *FAKE).assert_outcomes(passed=12)
    before = {e["job_id"] for e in events(pytester) if e["event"] == "result"}
    same = image(pytester.path, "same-python", "")
    pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={same}", *FAKE).assert_outcomes(passed=12)
    now = {e["job_id"] for e in events(pytester) if e["event"] == "result" and e["wave"] == "gate"} - before
    table = (pytester.path / "gated-gate.md").read_text().split("### Gate runs", 1)[1]
    jobs = {row.split("|")[4].strip() for row in table.splitlines() if row.startswith("| gate::")}
    assert jobs == now and len(now) == 12


def test_a_second_gate_of_the_recipe_alone_runs_its_controls_in_its_own_session(
    pytester: pytest.Pytester, swept: Path
) -> None:
    # The first gate's baseline and old-image runs (same image, latest in the store) were taken
    # as the second's controls ("jobs … vs 65 72 … in this session", job 65 from the first gate).
    same = image(pytester.path, "same-python", "")
    pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={same}", *FAKE).assert_outcomes(passed=12)
    first = {e["job_id"] for e in events(pytester) if e["event"] == "result"}
    alone = pytester.runpytest(
        f"{swept}::gate::fast[sparse]", "--xlatune-gate", f"--xlatune-image={same}", "-rf", *FAKE
    )
    alone.assert_outcomes(passed=1)
    ran = [e for e in events(pytester) if e["event"] == "result" and e["job_id"] not in first]
    assert {e["profile"] for e in ran} >= {"baseline", "baseline-oldimage", "fast", "fast-oldimage"}


def test_a_re_measured_recipe_shows_the_figure_its_verdict_judged_everywhere(
    pytester: pytest.Pytester, swept: Path
) -> None:
    # The new image's recipe runs read 1050, then 1070 and 1070: the gate judged the mean of
    # the three (1063.3) while the item line, junit and the gate report showed the first run's 1050.
    result, counter = gate_sparse(pytester, swept, first=1050, then=1070)
    result.assert_outcomes(passed=5, failed=1)
    assert counter.read_text().strip() == "3"  # the recipe was measured three times
    result.stdout.fnmatch_lines(["*recipe 'fast' [[]sparse[]] regressed vs the lock*TGS 1063.* vs 1100.*"])
    xml = (pytester.path / "gate.xml").read_text()
    case = xml.split('name="fast[sparse]"', 1)[1].split("</testcase>", 1)[0]
    assert re.search(r'name="xlatune_tgs" value="1063\.[0-9]', case)
    assert re.search(r"mean of 1050\.\d, 1070\.\d, 1070\.\d; jobs", case)
    gate = (pytester.path / "gated-gate.md").read_text()
    assert "1050." not in gate.split("### Gate runs", 1)[0]  # the figures above the run table
    html = (pytester.path / "gate.html").read_text()
    row = html.split("gate::fast[sparse]", 1)[1].split("</tr>", 1)[0]
    assert "1063." in row and "1050." not in row


def test_a_final_gate_passes_a_likely_regression_whose_interval_includes_no_change(
    pytester: pytest.Pytester, swept: Path
) -> None:
    # 1060, then 1085 and 1085 vs controls at 1100: -2.1 % with >= 80 % odds past the 1 %
    # tolerance, yet the 95 % interval includes no change. The gate failed the image on the odds
    # alone; it now passes, everywhere alike, with a warning that says why.
    result, counter = gate_sparse(pytester, swept, first=1060, then=1085)
    result.assert_outcomes(passed=6)
    assert counter.read_text().strip() == "3"
    result.stdout.fnmatch_lines(
        [
            "*gate::fast[[]sparse[]]: recipe 'fast' [[]sparse[]] vs the lock*passed: * % odds that it regresses*"
            "yet its 95 % interval includes no change*"
        ]
    )
    assert "regressed vs the lock" not in result.stdout.str()
    assert "<failure" not in (pytester.path / "gate.xml").read_text()
    # The warning, in the terminal's words and figures, in junit, the gate report and the HTML
    # (the gate report said `PASSED … holds` with no word of it).
    [said] = re.findall(r"\] gate::fast\[sparse\]: (recipe 'fast' .*)$", result.stdout.str(), re.M)
    case = ET.parse(pytester.path / "gate.xml").find(".//testcase[@name='fast[sparse]']")
    assert case is not None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["xlatune_warning"] == said
    gate = (pytester.path / "gated-gate.md").read_text()
    assert "**Verdict: PASSED: all 6 gate item(s) passed (1 with a warning: see *Warnings*); the locked" in gate
    assert "### Warnings\n\n`gate::fast[sparse]` (passed):\n\n```text\n" + said + "\n```" in gate
    html = (pytester.path / "gate.html").read_text()
    summary = html.split('<div class="xlatune-gate">', 1)[1].split("</div>", 1)[0]
    assert "1 with a warning" in summary and html_escape(said) in summary


def test_a_recipe_re_measured_and_passed_prints_the_mean_it_was_judged_on(
    pytester: pytest.Pytester, swept: Path
) -> None:
    # 1080 first (likely past the tolerance, measured again), then 1100: the gate passes on the
    # mean, and the item's own line says that mean (it said the first run's 1080).
    counter = pytester.path / "recipe-runs"
    varying = varying_recipe(pytester.path, counter, first=1080, then=1100)
    result = pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={varying}", "-k", "sparse", "-v", *FAKE)
    result.assert_outcomes(passed=6)
    assert counter.read_text().strip() == "2"  # measured again, once
    result.stdout.fnmatch_lines(
        ["*gate::fast[[]sparse[]] PASSED 1090.* TGS * (1090.* = mean of 1080.*, 1100.*; jobs *"]
    )
    assert "gate::fast[sparse]: " not in result.stdout.str()  # no correction at the end


def gate_sparse(pytester: pytest.Pytester, swept: Path, first: int, then: int) -> tuple[pytest.RunResult, Path]:
    """The gate of the sparse tag on a `varying_recipe` image, with junit and HTML reports; its
    result and the file that counts the recipe's runs."""
    counter = pytester.path / "recipe-runs"
    varying = varying_recipe(pytester.path, counter, first=first, then=then)
    result = pytester.runpytest(
        str(swept),
        "--xlatune-gate",
        f"--xlatune-image={varying}",
        "-k",
        "sparse",
        "--junitxml=gate.xml",
        "--html=gate.html",
        *FAKE,
    )
    return result, counter


def varying_recipe(tmp: Path, counter: Path, first: int, then: int) -> str:
    """A new image on which the recipe's first run reads `first` TGS and every later one `then`
    (`counter` counts the recipe's runs)."""
    return image(
        tmp,
        "varying-python",
        f"""
case "$XLA_FLAGS" in *--xla_fake_tgs=1100*)
  n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}
  if [ "$n" = 0 ]; then t={first}; else t={then}; fi
  export XLA_FLAGS="$XLA_FLAGS --xla_fake_tgs=$t";;
esac""",
    )


def test_a_gate_refused_at_pre_flight_reports_no_runs_of_an_earlier_gate(
    pytester: pytest.Pytester, swept: Path
) -> None:
    # The gate before ran on another interpreter; this one ran no job: its report showed the
    # earlier gate's runs (and judged the locked flags from them) as this gate's.
    same = image(pytester.path, "same-python", "")
    pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={same}", *FAKE).assert_outcomes(passed=12)
    earlier = (pytester.path / "gated-gate.md").read_text()
    assert earlier.split("### Gate runs", 1)[1].count("| gate::") == 12
    bare = image(
        pytester.path, "bare-python", 'export PYTHONPATH=/nonexistent PYTHONNOUSERSITE=1\nexec python3 -I "$@"'
    )
    pytester.runpytest(str(swept), "--xlatune-gate", f"--xlatune-image={bare}", *FAKE).assert_outcomes(failed=12)
    report = (pytester.path / "gated-gate.md").read_text()
    runs = report.split("### Gate runs", 1)[1]
    assert "| gate::" not in runs and "None: this gate ran no job of the cell" in runs
    flags = report.split("### Locked flags on the new image", 1)[1].split("###", 1)[0]
    assert "still effective" not in flags and "inert" not in flags
    assert "(the controls below)" not in report


def test_the_runs_a_gate_measured_again_join_their_items_figures(pytester: pytest.Pytester, swept: Path) -> None:
    # The check judged the recipe and the baseline with their repeats; junit (and the terminal
    # summary, the HTML) showed the first run's figure alone while the gate report listed them all.
    slower = image(
        pytester.path,
        "bit-slower-python",
        """
case "$XLA_FLAGS" in *--xla_fake_tgs=1100*) export XLA_FLAGS="$XLA_FLAGS --xla_fake_tgs=1072.5";; esac""",
    )
    result = pytester.runpytest(
        str(swept), "--xlatune-gate", f"--xlatune-image={slower}", "-k", "sparse", "--junitxml=gate.xml", *FAKE
    )
    result.assert_outcomes(passed=5, failed=1)
    table = (pytester.path / "gated-gate.md").read_text().split("### Gate runs", 1)[1]
    listed: dict[str, set[str]] = {}
    for row in table.splitlines():
        if row.startswith("| gate::"):
            cells = [c.strip() for c in row.strip("|").split("|")]
            listed.setdefault(cells[0].replace("\\", "").replace("-r2", ""), set()).add(
                cells[3]
            )  # as markdown escapes it
    assert len(listed["gate::fast[sparse]"]) == 2 and len(listed["gate::baseline[sparse]"]) == 3
    for case in ET.parse(pytester.path / "gate.xml").getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        item = str(props.get("xlatune_item"))
        if item in ("gate::fast[sparse]", "gate::baseline[sparse]"):
            jobs = str(props["xlatune_runs"]).rsplit("jobs ", 1)[1].split(", ")
            assert set(jobs) == listed[item], (item, props["xlatune_runs"])
