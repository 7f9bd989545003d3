"""Shared fixtures: pytester, and a cell writer that runs the scripted fake trainer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester", "tests.integration.fixtures_infra"]

TESTS_DIR = Path(__file__).parent


@pytest.fixture
def fake_trainer_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let job subprocesses import tests/fake_trainer.py, and a pytest subprocess load
    tests/fake_launcher.py (`-p tests.fake_launcher`)."""
    path = os.environ.get("PYTHONPATH", "")
    ours = f"{TESTS_DIR}{os.pathsep}{TESTS_DIR.parent}"
    monkeypatch.setenv("PYTHONPATH", f"{ours}{os.pathsep}{path}" if path else ours)


# The real local backend: each job is a subprocess of the fake trainer. For the tests of its
# process handling (signals to the session, kill -9, resume after a crash, job ownership).
REAL = ["--xlatune-workload=fake_trainer", "--xlatune-poll-interval=0.05", "-p", "no:cacheprovider"]
# The plugin tests' default: the same backend, the fake trainer played in memory (tests/fake_launcher.py).
FAKE = [*REAL, "-p", "tests.fake_launcher"]
# For tests of mechanics that count on every selected item running once, to its end, in list
# order (signals, selection, resume counts, stacks): the fixed protocol, not the adaptive sweep.
FIXED = [*FAKE, "--xlatune-fixed-protocol"]
REAL_FIXED = [*REAL, "--xlatune-fixed-protocol"]


def notify_sink(tmp_path: Path) -> tuple[str, Path]:
    """A --xlatune-notify value whose command appends each message (its one argument) to a file,
    messages separated by `---` lines; and that file."""
    sink, script = tmp_path / "sent.txt", tmp_path / "notify.sh"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n---\\n" "$1" >> {sink}\n')
    script.chmod(0o755)
    return f"--xlatune-notify={script} {{message}}", sink


def store_full_at(item: str) -> str:
    """A conftest for a pytester directory: the results store cannot take the `result` record of
    `item` (ENOSPC, a full disk); every other write goes through. It patches the store of the
    whole process: run it with `runpytest_subprocess`."""
    return (
        "import errno, json, os\n"
        "from pytest_xlatune.store import ResultStore\n"
        "_write = ResultStore._write_raw\n\n"
        "def _full(path, data):\n"
        "    record = json.loads(data) if data.startswith(b'{') else {}\n"
        f"    if record.get('event') == 'result' and record.get('item') == {item!r}:\n"
        "        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
        "    return _write(path, data)\n\n"
        "ResultStore._write_raw = staticmethod(_full)\n"
    )


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that asks for the local Slurm cluster's fixture is marked `slurm` like those that
    say so: scripts/test.sh runs `-m slurm` (they share the cluster's 4 nodes, count its jobs,
    and some stop its daemons: one at a time) beside `-m "not slurm"`. The Slurm tests that
    train with real JAX run last."""
    for item in items:
        if "local_slurm" in getattr(item, "fixturenames", ()) and item.get_closest_marker("slurm") is None:
            item.add_marker(pytest.mark.slurm)
    # The Slurm tests that train with real JAX go last: by then the other lane, whose JAX tests
    # come first, has ended, and the two lanes' JAX jobs do not share the two cores.
    items.sort(
        key=lambda item: item.get_closest_marker("slurm") is not None and item.get_closest_marker("jax") is not None
    )


def refused_at_collection(pytester: pytest.Pytester, cell: Path, line: str) -> None:
    """Collecting `cell` stops on one line matching `line` (fnmatch), without a traceback."""
    result = pytester.runpytest(str(cell), "--collect-only", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([line])
    assert "Traceback" not in result.stdout.str()
