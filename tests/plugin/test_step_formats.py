"""Step lines of other MaxText eras through a whole run: derived TGS, step time, last loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FAKE

CELL = """\
model_tag: eras
nodes: 1
parallelism: FSDP=8
pdbs: 2
baseline_repeats: 1
overrides: {{max_target_length: 512, fake_format: {fmt}}}
waves:
  2:
    - name: fast
      xla_flags: [--xla_fake_tgs=1100]
"""


def results(path: Path) -> list[dict]:
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in records if r.get("event", "result") == "result" and "verdict" in r]


def test_without_tokens_per_device_tgs_is_derived_from_step_time(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(".yml", eras=CELL.format(fmt="no_tokens"))
    result = pytester.runpytest(str(cell), "-k", "wave1 and baseline", "-v", *FAKE)
    result.assert_outcomes(passed=1)
    (stored,) = results(pytester.path / ".xlatune" / "eras.jsonl")
    # A step is 1024 tokens per device (pdbs 2 x 512) and lasts 1024/TGS s: the derived TGS is
    # the fake trainer's true 1000 (its seconds are rounded to 3 decimals).
    assert stored["verdict"] == "success" and stored["tgs_derived"] is True
    assert stored["tgs"] == pytest.approx(1000.0, rel=2e-3)
    assert stored["step_seconds"] == pytest.approx(1.024, rel=2e-3)
    assert stored["last_loss"] == pytest.approx(5 - 14 * 0.1)
    report = (pytester.path / "eras-tuning.md").read_text()
    assert "(derived)" in report


def test_without_seconds_steps_count_and_the_loss_is_kept(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    cell = pytester.makefile(".yml", eras=CELL.format(fmt="no_seconds"))
    result = pytester.runpytest(str(cell), "-k", "wave1 and baseline", *FAKE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no Tokens/s/device in the steady-state window (15 steps completed*"])
    (stored,) = results(pytester.path / ".xlatune" / "eras.jsonl")
    assert stored["verdict"] == "no_steps" and stored["step_count"] == 15
    assert stored["tgs"] is None and stored["last_loss"] == pytest.approx(5 - 14 * 0.1)
