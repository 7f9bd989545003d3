"""The playbook end to end with the fake trainer: retries, infra-flake drop, OOM xfail, STOP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FAKE, notify_sink

HANG = "--xlatune-hang=init_allowance_s=1,compile_allowance_s=1,floor_s=1,k=2"

CELL = """\
model_tag: pb
nodes: 1
parallelism: FSDP=8
baseline_repeats: 1
waves:
  2:
    - {{name: p, xla_flags: [{flags}]}}
"""


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / ".xlatune" / "pb.jsonl").read_text().splitlines()]


def run(pytester: pytest.Pytester, flags: str, *args: str) -> pytest.RunResult:
    cell = pytester.makefile(".yml", pb=CELL.format(flags=flags))
    return pytester.runpytest(str(cell), "-k", "wave2", "-rsx", *FAKE, HANG, *args)


def test_rccl_flake_three_times_in_a_row_is_dropped_as_infra_flake(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    result = run(pytester, "--xla_fake_fail=rccl_hang")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*dropped as infra-flake*rccl_init_flake*"])
    # Each retry is shown without -v (an incident); step progress is not.
    shown = [line for line in result.outlines if line.startswith("  [xlatune] wave2::p[default] job ")]
    assert [line.split(": ", 1)[1].split(":")[0] for line in shown] == [
        "no new step for 1 s (before_step0)",
        "retry on the same nodelist",
    ] * 2 + ["no new step for 1 s (before_step0)"], shown
    assert "step 1/" not in result.stdout.str()
    kinds = [e["event"] for e in events(pytester.path)]
    assert kinds.count("submitted") == 3 and kinds.count("attempt") == 2
    assert kinds.count("result") == 1


def test_coordination_timeout_twice_stops_the_sweep_with_the_stop_message(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(
        ".yml",
        pb=CELL.format(flags="--xla_fake_fail=coord_timeout") + "    - {name: q, xla_flags: [--xla_fake_tgs=1100]}\n",
    )
    result = pytester.runpytest(str(cell), "-k", "wave2", *FAKE)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # session.shouldstop: non-zero
    result.assert_outcomes(failed=1)  # q never runs: the session stopped
    result.stdout.fnmatch_lines(
        [
            "*[[]xla-tuning STOP[]] pb FSDP=8 sweep halted*",
            "*Reason: *coordination_timeout*",
            "*Pending profiles in queue: wave2::q[[]default[]] (cancelled by stop)*",
            "*xlatune STOP: *",
        ]
    )
    stop = [e for e in events(pytester.path) if e["event"] == "stop"]
    assert len(stop) == 1 and stop[0]["pending"] == ["wave2::q[default]"]


def test_oom_is_never_retried_and_xfails_with_the_memory_figures(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    result = run(pytester, "--xla_fake_fail=oom")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["*job 1: oom on sight: cancelling*", "*8589934592 bytes*never retried*"])
    assert [e["event"] for e in events(pytester.path)].count("submitted") == 1
    [oom] = [e for e in events(pytester.path) if e["event"] == "result"]
    assert oom["verdict"] == "oom" and "Total memory: 64.00GiB" in oom["log_tail"]


def test_notifier_gets_the_stop_message_as_one_argument(
    pytester: pytest.Pytester, fake_trainer_env: None, tmp_path: Path
) -> None:
    notify, sink = notify_sink(tmp_path)
    run(pytester, "--xla_fake_fail=coord_timeout", notify)
    sent = sink.read_text()
    assert sent.startswith("[xla-tuning STOP] pb FSDP=8 sweep halted")


def test_a_coordination_timeout_line_cancels_the_hanging_job_on_sight(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    # Hang detection would take 15 min here; cancel-on-sight ends each attempt at once.
    cell = pytester.makefile(".yml", pb=CELL.format(flags="--xla_fake_fail=coord_timeout_hang"))
    result = pytester.runpytest_subprocess(str(cell), "-k", "wave2", "-v", *FAKE, timeout=120)
    result.stdout.fnmatch_lines(["*coordination_timeout on sight: cancelling*", "*[[]xla-tuning STOP[]]*"])
    results = [e for e in events(pytester.path) if e["event"] in ("attempt", "result")]
    assert [e["verdict"] for e in results] == ["coordination_timeout", "coordination_timeout"]
