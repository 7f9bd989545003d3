"""The history's sweep rows carry the recipe's figure as the lock shows it, and a session that
reused every stored result appends none."""

from __future__ import annotations

import json

import pytest

from pytest_xlatune.report.history import load_history
from tests.cells import cell_yaml
from tests.conftest import FAKE


def test_the_recipe_row_is_the_locks_figure_and_a_reused_session_adds_no_row(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    # Adaptive: the win is locked once a control ran after its first run (before `slow`).
    profiles = (("fast", "--xla_fake_tgs=1100"), ("slow", "--xla_fake_tgs=900"))
    cell = pytester.makefile(".yml", hist=cell_yaml("hist", *profiles, baseline_repeats=2))
    first = pytester.runpytest(str(cell), *FAKE)
    assert first.ret == 0, first.stdout.str()
    lock = json.loads((pytester.path / "hist.lock.json").read_text())
    (recipe,) = lock["recipes"]
    history = load_history(pytester.path / ".xlatune" / "hist.history.csv")
    assert history["recipe"].tolist() == ["fast"]
    assert history["recipe_tgs"].tolist()[0] == pytest.approx(recipe["tgs"], abs=0.05)  # the lock's figure
    assert history["runs"].tolist()[0] == len(recipe["job_ids"]) >= 2  # its evidence re-run joined it
    assert history["baseline_tgs"].tolist()[0] == pytest.approx(recipe["baseline_tgs"], abs=0.05)
    again = pytester.runpytest(str(cell), *FAKE)
    assert again.ret == 0 and "row(s) appended" not in again.stdout.str()
    assert len(load_history(pytester.path / ".xlatune" / "hist.history.csv")) == 1
