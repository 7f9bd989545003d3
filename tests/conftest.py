"""Shared fixtures: pytester, and a cell writer that runs the scripted fake trainer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester", "tests.integration.fixtures_infra"]

TESTS_DIR = Path(__file__).parent


@pytest.fixture
def fake_trainer_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let job subprocesses import tests/fake_trainer.py."""
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", f"{TESTS_DIR}{os.pathsep}{path}" if path else str(TESTS_DIR))


FAKE = ["--xlatune-workload=fake_trainer", "--xlatune-poll-interval=0.05", "-p", "no:cacheprovider"]
# For tests of mechanics that count on every selected item running once, to its end, in list
# order (signals, selection, resume counts, stacks): the fixed protocol, not the adaptive sweep.
FIXED = [*FAKE, "--xlatune-fixed-protocol"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Two xdist groups, one lane each under `-n 2 --dist loadgroup` (scripts/test.sh): the tests
    of the one local Slurm cluster (marked `slurm`, or asking for its fixture) one after another,
    in file order (they share its 4 nodes, count its jobs, and some stop its daemons), and beside
    them everything else (unit, pytester, JAX, sshd), also in order. One group each, not loose
    tests: xdist hands out loose tests in batches, and a batch queued behind the long Slurm group
    would wait for all of it."""
    for item in items:
        slurm = item.get_closest_marker("slurm") is not None or "local_slurm" in getattr(item, "fixturenames", ())
        item.add_marker(pytest.mark.xdist_group("slurm" if slurm else "rest"))
