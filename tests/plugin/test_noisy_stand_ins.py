"""Noisy and adversarial stand-ins of whole sweeps (the fake trainer's scripted load): the
verdicts never claim more than the runs hold, and every output says the same."""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import FAKE, FIXED

# The baseline pair ran on a loaded machine (jobs 1 and 2 at 0.77 of their speed); the load was
# gone for the baseline's evidence run (job 3) and every no-op profile after it.
LOADED_BASELINE = """\
model_tag: loaded
nodes: 1
parallelism: FSDP=8
baseline_repeats: 2
overrides: {fake_load: "1:0.77,2:0.77"}
waves:
  2:
    - {name: noop_a, xla_flags: [--xla_noop_a=1]}
    - {name: noop_b, xla_flags: [--xla_noop_b=1]}
"""


def test_a_loaded_baseline_pair_its_evidence_run_contradicts_makes_no_noop_a_win(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(".yml", loaded=LOADED_BASELINE)
    result = pytester.runpytest(str(cell), "-v", "--junitxml=junit.xml", *FIXED)
    result.assert_outcomes(passed=6)
    assert not [line for line in result.stdout.lines if " PASSED " in line and " better" in line], result.stdout.str()
    result.stdout.fnmatch_lines(["*wave2::noop_a* PASSED * TGS +29.* within noise*", "*lock*not written*"])
    assert not (pytester.path / "loaded.lock.json").exists()
    report = (pytester.path / "loaded-tuning.md").read_text()
    tldr = report.split("## TL;DR", 1)[1].split("\n## ", 1)[0]
    assert "inconclusive" in tldr and "keep the deployed environment" not in tldr, tldr
    assert "**Identical settings disagree**" in report and "evidence: " in report
    directions = {
        p.get("value")
        for p in ET.parse(pytester.path / "junit.xml").getroot().iter("property")
        if p.get("name") == "xlatune_direction"
    }
    assert "better" not in directions and "within_noise" in directions, directions


def test_a_run_whose_steps_slowed_mid_run_is_no_more_certain_than_its_steps_say(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    # Job 4 (noop_a's run) lost 40 % from step 10 on: a co-tenant for the second half of it.
    cell = pytester.makefile(".yml", tail=LOADED_BASELINE.replace('"1:0.77,2:0.77"', '"4:0.6:10"'))
    result = pytester.runpytest(str(cell), "-v", *FIXED)
    result.assert_outcomes(passed=6)
    # Its own steps leave ±20 % on its mean: at run time nothing to judge, and the words say why.
    result.stdout.fnmatch_lines(
        ["*wave2::noop_a* PASSED * TGS -20.* noise too large to judge: its steps shifted within its run*"]
    )
    assert not [line for line in result.stdout.lines if " PASSED " in line and (" worse" in line or " better" in line)]


def test_a_deterministic_sweep_reads_the_baselines_evidence_run_within_noise(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    # No noise at all: the baseline pair agrees exactly, and the baseline's profiled evidence run
    # (steps 9-14) is 0.01 % off it from which steps it averages. The steps' own error bounds it.
    cell = pytester.makefile(".yml", det=LOADED_BASELINE.replace('overrides: {fake_load: "1:0.77,2:0.77"}\n', ""))
    result = pytester.runpytest(str(cell), "-v", *FIXED)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*wave1.5::evidence* PASSED * TGS -0.01 % * within noise*"])
    assert "unstable" not in result.stdout.str()
    assert "Identical settings disagree" not in (pytester.path / "loaded-tuning.md").read_text()


def test_an_interval_no_run_could_judge_says_so_with_the_same_figure_in_every_output(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    # Heavy load on the second baseline run (0.4 of its speed): baselines 1000 and 400, 150 %
    # apart, 1 df. The honest interval spans [-100, +1.8 million] %: no output calls that "within
    # noise" as if it had looked; each says the noise is too large to judge, and why.
    cell = pytester.makefile(".yml", heavy=LOADED_BASELINE.replace('"1:0.77,2:0.77"', '"2:0.4"'))
    result = pytester.runpytest(str(cell), "-v", "--junitxml=junit.xml", "--html=report.html", *FIXED)
    result.assert_outcomes(passed=6)
    words = "noise too large to judge: baselines differ by 150 %"
    lines = [ln for ln in result.stdout.lines if "wave2::noop_b" in ln and " TGS " in ln]
    assert all("noise too large to judge: " in ln and "within noise" not in ln for ln in lines), lines
    line = lines[-1]  # the final figure (the summary's correction, when later runs moved it)
    assert words in line, line
    shown = re.search(r"TGS ([-+]\d+\.\d\d) % \[([-+][\d.]+), ([-+][\d.]+)\]", line)
    assert shown is not None and float(shown.group(2)) <= -50 and float(shown.group(3)) >= 100
    cases = {
        p.get("value"): {q.get("name"): q.get("value") for q in case.iter("property")}
        for case in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
        for p in case.iter("property")
        if p.get("name") == "xlatune_item"
    }
    noop_b = cases["wave2::noop_b[default]"]
    assert noop_b["xlatune_direction"] == "too_noisy" and noop_b["xlatune_judged"] == words
    # the figure itself: the same Δ and interval as the terminal line
    low, high = (float(v) for v in (noop_b["xlatune_delta_ci"] or "").strip("()").split(", "))
    assert f"{float(noop_b['xlatune_delta_pct'] or 0):+.2f}" == shown.group(1)
    assert (f"{low:+.1f}", f"{high:+.1f}") == (shown.group(2), shown.group(3))
    report = (pytester.path / "loaded-tuning.md").read_text()
    row = next(ln for ln in report.splitlines() if ln.startswith("| noop_b |"))
    assert words in row and f"[{low:+.2f}, {high:+.2f}] %" in row, row
    assert "within noise" not in report.split("## TL;DR", 1)[1].split("\n## ", 1)[0]
    page = html.unescape((pytester.path / "report.html").read_text())
    assert f"success {words}" in page and f"<td>{words}</td>" in page


def test_drift_after_the_baselines_locks_no_noop_under_the_fixed_protocol(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    # The machine got 12 % faster after the baseline's runs (jobs 1-3 at 0.89 of the speed of
    # everything after): every no-op reads +12 %, its evidence re-run agrees. The fixed protocol
    # ran no control after the win's first run, so nothing tells the drift from a win.
    text = LOADED_BASELINE.replace('"1:0.77,2:0.77"', '"1:0.89,2:0.89,3:0.89"')
    cell = pytester.makefile(".yml", drift=text.replace("    - {name: noop_b, xla_flags: [--xla_noop_b=1]}\n", ""))
    result = pytester.runpytest(str(cell), "-v", *FIXED)
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "*recipe lock drift.lock.json not written: no lock: the win is not confirmed: no control (a baseline run) "
            "ran after noop_*'s first run (job *): a drift since the baseline's runs (jobs 1, 2) would read as this win"
        ]
    )
    assert not (pytester.path / "drift.lock.json").exists()
    report = (pytester.path / "loaded-tuning.md").read_text()
    assert "**Not confirmed, no lock:** no control (a baseline run) ran after" in report


# A profile +12 % on its plain runs whose profiled re-run (the recipe's evidence run) measured
# -6 % under a co-tenant: its settings' runs disagree on the win itself. The adaptive sweep's
# re-run is job 5 (its first win's confirming run), the fixed protocol's job 6 (after noop_b).
CONTRADICTED = """\
model_tag: contra
nodes: 1
parallelism: FSDP=8
baseline_repeats: 2
overrides: {{fake_load: "{job}:0.84"}}
waves:
  2:
    - {{name: unst, xla_flags: [--xla_unst=1, --xla_fake_tgs=1120]}}
    - {{name: noop_b, xla_flags: [--xla_noop_b=1]}}
"""


@pytest.mark.parametrize(
    ("job", "protocol"), [("5", []), ("6", ["--xlatune-fixed-protocol"])], ids=["adaptive", "fixed"]
)
def test_a_win_its_profiled_rerun_contradicts_is_unstable_everywhere_and_no_recipe(
    pytester: pytest.Pytester, fake_trainer_env: None, job: str, protocol: list[str]
) -> None:
    cell = pytester.makefile(".yml", contra=CONTRADICTED.format(job=job))
    result = pytester.runpytest(str(cell), "-v", "--junitxml=junit.xml", "--html=report.html", *FAKE, *protocol)
    result.assert_outcomes(passed=6)
    final = result.stdout.str().split("xlatune: final figures", 1)[1]
    # the plain runs' +12.00 % stays the figure; the verdict is the settings' runs: unstable
    result.stdout.fnmatch_lines(
        [
            "*xlatune: final figures*",
            "contra.yml::wave2::unst[[]default[]]: 1120.1 TGS +12.00 % * unstable*",
            f"*recipe lock contra.lock.json not written: no lock: the win is not confirmed: the winner's re-run "
            f"evidence2::winner[[]default[]] (job {job}) measured 940.8 TGS (-5.93 % vs the baseline), which "
            "contradicts unst's *",
        ]
    )
    assert " better" not in final, final
    assert not (pytester.path / "contra.lock.json").exists()
    cases = {
        p.get("value"): {q.get("name"): q.get("value") for q in case.iter("property")}
        for case in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
        for p in case.iter("property")
        if p.get("name") == "xlatune_item"
    }
    assert cases["wave2::unst[default]"]["xlatune_direction"] == "unstable"
    report = (pytester.path / "contra-tuning.md").read_text()
    tldr = report.split("## TL;DR", 1)[1].split("\n## ", 1)[0]
    assert "⭐" not in report and "Best recipe" not in tldr, tldr
    assert "the fastest, `unst`, is +12.00 %" in tldr and ": unstable)" in tldr, tldr
    assert "Keep `configs/contra.env.sh` as deployed." in report
    row = next(ln for ln in report.splitlines() if ln.startswith("| unst |"))
    assert "| unstable |" in row, row
    page = html.unescape((pytester.path / "report.html").read_text())
    assert "★" not in page and "Best recipe" not in page


# Job 2 (the second baseline repeat) stalled 10x on one steady step (step 7): the baselines
# differ by 11 % (their runs' std/mean 6.10 % with the control). A true +8 % flag (win, +10.52 %
# against those baselines) is still confirmed by its runs after the first and a control, and
# locked. (The model tag names the jobs, which seed the noise: these figures are model_tag adv's.)
STALLED_BASELINE = """\
model_tag: adv
nodes: 1
parallelism: FSDP=8
baseline_repeats: 2
overrides: {fake_load: "2:0.1:7,2:1:8", fake_noise: 0.008, fake_seed: 1}
waves:
  2:
    - {name: noop_a, xla_flags: [--xla_noop_a=1]}
    - {name: noop_b, xla_flags: [--xla_noop_b=1]}
    - {name: noop_c, xla_flags: [--xla_noop_c=1]}
    - {name: win, xla_flags: [--xla_win=1, --xla_fake_tgs=1080]}
"""


def test_a_locked_win_is_not_called_unconfirmed_in_the_reports(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    result = pytester.runpytest(
        str(pytester.makefile(".yml", stalled=STALLED_BASELINE)), "-v", "--html=report.html", *FAKE
    )
    result.assert_outcomes(passed=8)
    lock = json.loads((pytester.path / "stalled.lock.json").read_text())
    (recipe,) = lock["recipes"]
    delta = f"{recipe['delta_pct']:+.2f} %"
    result.stdout.fnmatch_lines(
        [f"stalled.yml::wave2::win[[]default[]]: * TGS {delta} * better*", f"*new lock: win [[]default[]] {delta}*"]
    )
    # Its Δ is under twice the baselines' spread (the stall), yet its runs confirm it: the lock
    # holds it, so no report tells the reader to treat it as unconfirmed.
    report = (pytester.path / "adv-tuning.md").read_text()
    tldr = report.split("## TL;DR", 1)[1].split("\n## ", 1)[0]
    assert "**`win`** ⭐" in tldr and delta in tldr and "unconfirmed" not in tldr, tldr
    page = html.unescape((pytester.path / "report.html").read_text())
    assert "Best recipe for" in page and "unconfirmed" not in page
