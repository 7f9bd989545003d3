"""A candidate whose item the adaptive sweep skipped (the search concluded) is never run later
"ahead" of another item: its pytest outcome is final, so its jobs would show in the report and
the exports only, and the summary would count it as saved."""

from __future__ import annotations

from pathlib import Path

from pytest_xlatune.adaptive.order import Gain, Prior
from pytest_xlatune.adaptive.values import Submit
from pytest_xlatune.engine.adaptive import Driver
from pytest_xlatune.plan.expand import RunKind
from tests.unit.plan.test_resolution import make_sweep


def test_a_skipped_candidate_is_not_run_ahead_of_a_later_item(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    names = [s.name for s in sweep.specs if s.kind is RunKind.PROFILE]
    skipped, current = names[0], names[-1]
    driver = Driver.plan_for(sweep, sweep.specs, Prior((Gain(skipped, 5.0, "a prior sweep"),)))
    assert driver is not None
    ahead = Submit(skipped, "next candidate by expected gain")
    assert driver._ahead(ahead, current, driver.state(0.0))  # before its item was skipped: it may
    assert driver._skipped(skipped, "confirmed win").startswith("not run: the adaptive sweep concluded")
    assert not driver._ahead(ahead, current, driver.state(0.0))
