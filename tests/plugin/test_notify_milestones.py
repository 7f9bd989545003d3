"""--xlatune-notify says the xla-tuning skill's milestones (kickoff, every positive result,
mid-point, final) besides a STOP: each once, through the command, the message one argument."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cells import cell_yaml
from tests.conftest import FIXED, notify_sink

CELL = cell_yaml(
    "nm",
    ("fast", "--xla_fake_tgs=1100"),
    ("same", "--xla_fake_other=1"),
    ("also", "--xla_fake_other=2"),
    ("more", "--xla_fake_other=3"),
    baseline_repeats=2,
)


def sent(sink: Path) -> list[str]:
    return [m.strip() for m in sink.read_text().split("\n---\n") if m.strip()]


def test_kickoff_positive_results_mid_point_and_final_are_each_sent_once(
    pytester: pytest.Pytester, fake_trainer_env: None, tmp_path: Path
) -> None:
    notify, sink = notify_sink(tmp_path)
    cell = pytester.makefile(".yml", nm=CELL)
    result = pytester.runpytest(str(cell), *FIXED, notify)
    result.assert_outcomes(passed=8)  # 2 baselines, the evidence run, 4 profiles, the winner's evidence
    messages = sent(sink)
    assert messages[0].startswith(
        "nm FSDP=8 (nm.yml): xla-tuning sweep started of 8 item(s); first item wave1::baseline"
    )
    positive = [m for m in messages if ": positive result: " in m]
    assert len(positive) == 1 and "wave2::fast[default]" in positive[0] and " better" in positive[0]
    assert "+10." in positive[0]  # the item line's figure: 1100 vs 1000 TGS
    (mid,) = [m for m in messages if ": mid-point: " in m]
    assert "4 of 8 items done" in mid
    assert messages[-1].startswith(
        "nm FSDP=8 (nm.yml): sweep finished: 8 item(s) done this session (run, reused or skipped); "
    )
    assert "nm-tuning.md" in messages[-1] and "nm.lock.json" in messages[-1]
    assert len(messages) == 4  # nothing twice; no message for the items in between


def test_without_notify_nothing_is_run(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    cell = pytester.makefile(".yml", nm=CELL)
    result = pytester.runpytest(str(cell), *FIXED, "-k", "wave1")
    assert result.ret == pytest.ExitCode.OK
    assert "notification" not in result.stdout.str()
