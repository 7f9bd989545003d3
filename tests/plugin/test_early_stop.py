"""The adaptive sweep stops a clear loser early and stores its partial steady state; a kill -9
between the recorded stop and its result loses nothing and submits nothing twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import FAKE, REAL

CELL = """\
model_tag: stop
nodes: 1
parallelism: FSDP=8
baseline_repeats: 2
overrides: {fake_step_sleep: 0.12}
waves:
  2:
    - {name: slow, xla_flags: [--xla_fake_tgs=700]}
    - {name: other, xla_flags: [--xla_fake_tgs=1010]}
"""

# scancel that takes 3 s to act (a busy controller): the kill below lands after the stop was
# recorded and before the job was cancelled or its result stored.
CONFTEST = """\
import time

from pytest_xlatune.launch.local import LocalLauncher
from pytest_xlatune.launch.registry import Backend


class SlowCancel(LocalLauncher):
    def cancel(self, job_id):
        time.sleep(3)
        super().cancel(job_id)


def pytest_xlatune_make_launcher(context):
    launcher = SlowCancel(context.paths.jobs_dir, context.store.max_job_number() + 1,
                          python=context.cell_settings.python, module=context.settings.workload)
    return Backend(launcher, nodelist="local")
"""


def events(store: Path) -> list[dict]:
    if not store.exists():
        return []
    return [json.loads(line) for line in store.read_bytes().splitlines(keepends=True) if line.endswith(b"\n")]


def run_pytest(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "cell.yml", "-v", *REAL, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_a_clear_loser_is_stopped_early_and_measured(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    cell = pytester.makefile(".yml", stop=CELL)
    result = pytester.runpytest(str(cell), "-v", *FAKE)
    result.assert_outcomes(passed=6)  # baseline ×2, evidence, slow, other, winner
    result.stdout.fnmatch_lines(
        [
            "*wave2::slow[[]default[]] PASSED 70[01].* TGS -[23]*.* % *worse "
            "(stopped early: futile after 1 of 10 steady steps: *)*",
            "xlatune: stop.yml: saved node-minutes: * early stop(s) *",
        ]
    )  # slow; other may settle early
    stored = [e for e in events(pytester.path / ".xlatune" / "stop.jsonl") if e["event"] == "result"]
    slow = next(e for e in stored if e["item"] == "wave2::slow[default]")
    # the baselines ran out (the step scatter is known): the futility test looks from the first steady step
    assert slow["verdict"] == "stopped_early" and len(slow["steps_used"]) == 1
    assert slow["step_count"] < 15 and abs(slow["tgs"] - 700) < 5
    report = next(pytester.path.glob("*-tuning.md")).read_text()
    assert "- **Adaptive sweep:** saved node-minutes: " in report  # the report says it too
    # Under the fixed protocol the same loser runs to its end.
    fixed = pytester.runpytest(str(cell), "-v", "--xlatune-fixed-protocol", "--xlatune-remeasure", *FAKE)
    fixed.assert_outcomes(passed=6)
    assert "stopped early" not in fixed.stdout.str()


@pytest.mark.realproc
def test_kill_9_during_an_early_stop_loses_nothing(tmp_path: Path, fake_trainer_env: None) -> None:
    (tmp_path / "cell.yml").write_text(CELL)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    store = tmp_path / ".xlatune" / "cell.jsonl"
    first = run_pytest(tmp_path)
    deadline = time.time() + 90
    while time.time() < deadline:  # the stop is recorded: kill before the (slow) cancel acts
        if any(e["event"] == "early_stop" for e in events(store)):
            break
        time.sleep(0.02)
    else:
        first.kill()
        pytest.fail(f"no early stop: {first.communicate()[0]}")
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    stop = next(e for e in events(store) if e["event"] == "early_stop")
    assert not any(e["event"] == "result" and e["key"] == stop["key"] for e in events(store))

    second = run_pytest(tmp_path)
    output = second.communicate(timeout=180)[0]
    assert second.returncode == 0, output
    assert "re-attached to job" in output
    submitted = Counter(e["key"] for e in events(store) if e["event"] == "submitted")
    assert all(count == 1 for count in submitted.values()), submitted  # nothing submitted twice
    results = [e for e in events(store) if e["event"] == "result" and e["key"] == stop["key"]]
    assert [r["verdict"] for r in results] == ["stopped_early"], results  # never no_steps or cancelled
    assert results[0]["job_id"] == stop["job_id"] and results[0]["tgs_values"]
    assert "wave2::slow[default] PASSED 7" in output and "stopped early: futile after 1 of" in output, output


def test_a_spent_budget_skips_the_candidates_naming_it(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    cell = pytester.makefile(".yml", stop=CELL)
    # 0.01 h = 36 s of queue time: less than the 25 min kept for the closing runs, so the search
    # is over once the planned baselines and the evidence run have run.
    result = pytester.runpytest(str(cell), "-rs", "--xlatune-budget=0.01h", *FAKE)
    result.assert_outcomes(passed=3, skipped=3)
    result.stdout.fnmatch_lines(["SKIPPED * not run: the adaptive sweep concluded: less than 25 min of budget left*"])
    assert "stopped early" not in result.stdout.str()


CONTROLS_CELL = """\
model_tag: ctl
nodes: 1
parallelism: FSDP=8
baseline_repeats: 2
overrides: {fake_step_sleep: 0.03}
waves:
  2:
""" + "".join(f"    - {{name: p{n}, xla_flags: [--xla_fake_tgs={1000 + n}]}}\n" for n in range(1, 11))


def test_a_control_is_interleaved_after_every_eight_candidates_and_its_drift_reported(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(".yml", ctl=CONTROLS_CELL)
    result = pytester.runpytest(str(cell), "-v", *FAKE)
    result.assert_outcomes(passed=14)  # baseline ×2, evidence, p1-p10, the best one's evidence run
    out = result.stdout.str()
    # AdaptiveRules.control_every = 8 candidate runs: the baseline runs again before the 9th candidate.
    result.stdout.fnmatch_lines(["*control 1 before wave2::p9[[]default[]]: *"])
    stored = [e for e in events(pytester.path / ".xlatune" / "ctl.jsonl") if e["event"] == "result"]
    baselines = [e for e in stored if e["kind"] == "baseline"]
    assert len(baselines) >= 3, out  # the two planned repeats and the control, each its own job
    assert len({e["job_id"] for e in baselines}) == len(baselines)
    drift = [e for e in events(pytester.path / ".xlatune" / "ctl.jsonl") if e["event"] == "drift"]
    assert drift and drift[-1]["text"].startswith("drift: the controls moved ")
    report = next(pytester.path.glob("*-tuning.md")).read_text()
    assert "- **Adaptive sweep:** drift: the controls moved " in report
    result.stdout.fnmatch_lines(["xlatune: ctl.yml: drift: the controls moved *"])
