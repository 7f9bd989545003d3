"""The CI gate as shipped in examples/ci/: the GitHub workflow's `run:` steps, run as written in a
fresh folder after a sweep, on the local backend: the gate passes on the same venv, fails on a
slower one, and skips a lock-less cell of the same folder with one line; the GitLab job runs the
same commands.

Adapted for this machine, and only this: the install step is read, not run (it clones and pip
installs the repository: network and minutes); `.venv/bin/python` is a wrapper around this
interpreter, which has the package; PYTEST_ADDOPTS points the cells at the scripted fake trainer
(the embedded JAX workload would make this test minutes long and its verdict depend on the load).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import TESTS_DIR

EXAMPLES = TESTS_DIR.parent / "examples" / "ci"

CELL = """\
model_tag: {tag}
nodes: 1
parallelism: FSDP=8
waves:
  2:
    - {{name: fast, xla_flags: [--xla_fake_tgs=1100]}}
"""
SLOWER = """#!/bin/bash
case "$XLA_FLAGS" in *--xla_fake_tgs=1100*) export XLA_FLAGS="$XLA_FLAGS --xla_fake_tgs=1030";; esac
exec {python} "$@"
"""


def script(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def github_steps() -> tuple[dict[str, str], list[str]]:
    workflow = yaml.safe_load((EXAMPLES / "github-gate.yml").read_text())
    steps = workflow["jobs"]["gate"]["steps"]
    return workflow["env"], [step["run"] for step in steps if "run" in step]


def run(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def test_the_github_workflow_gates_as_written(tmp_path: Path) -> None:
    env_of_workflow, (install, gate) = github_steps()
    # The install step installs from a clone of the repository (there is no PyPI release).
    assert 'git clone --depth 1 --branch "$XLATUNE_REF" "$XLATUNE_REPO" .xlatune-src' in install
    assert '-m pip install --quiet -e ".xlatune-src[demo]"' in install
    assert set(env_of_workflow) >= {"XLATUNE_REPO", "XLATUNE_REF", "NEW_IMAGE", "XLATUNE_ARGS"}
    script(tmp_path / ".venv" / "bin" / "python", f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "locked.yml").write_text(CELL.format(tag="locked"))
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR),
           "PYTEST_ADDOPTS": "--xlatune-workload=fake_trainer --xlatune-poll-interval=0.05 -p no:cacheprovider"}
    # Before CI: the sweep, whose lock is committed next to the cell.
    sweep = run(".venv/bin/python -m pytest cells/locked.yml", tmp_path, env)
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    assert (tmp_path / "cells" / "locked.lock.json").exists(), sweep.stdout
    tuning = (tmp_path / "locked-tuning.md").read_text()
    # A cell never swept (or whose sweep found nothing better): no lock in the same folder.
    (tmp_path / "cells" / "unlocked.yml").write_text(CELL.format(tag="unlocked"))

    same = run(gate, tmp_path, {**env, "NEW_IMAGE": str(tmp_path / ".venv" / "bin" / "python"), "XLATUNE_ARGS": ""})
    out = same.stdout + same.stderr
    assert same.returncode == 0, out
    assert ("SKIPPED [1] cells/unlocked.yml:1: cells/unlocked.lock.json: no recipe lock, nothing to gate (a "
            "finished sweep writes one when it finds a recipe better than the baseline: run pytest "
            "cells/unlocked.yml first)") in out
    assert "**Verdict: PASSED" in (tmp_path / "locked-gate.md").read_text()

    slower = script(tmp_path / "slower" / "python", SLOWER.format(python=sys.executable))
    slow = run(gate, tmp_path, {**env, "NEW_IMAGE": slower, "XLATUNE_ARGS": ""})
    out = slow.stdout + slow.stderr
    assert slow.returncode == 1, out
    assert "recipe 'fast' [default] regressed vs the lock" in out and "cells/unlocked.lock.json: no recipe lock" in out
    assert "**Verdict: FAILED:" in (tmp_path / "locked-gate.md").read_text()

    advisory = run(gate, tmp_path, {**env, "NEW_IMAGE": slower, "XLATUNE_ARGS": "--xlatune-gate-advisory"})
    assert advisory.returncode == 0, advisory.stdout + advisory.stderr
    assert "**Verdict: FAILED (advisory" in (tmp_path / "locked-gate.md").read_text()
    assert (tmp_path / "locked-tuning.md").read_text() == tuning  # the gate never rewrites it
    assert (tmp_path / "gate.xml").exists()


def test_the_gitlab_job_runs_the_same_commands() -> None:
    _, (install, gate) = github_steps()
    job = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())["xlatune-gate"]
    assert job["script"] == [*install.strip().splitlines(), gate.strip()]
    assert "*-gate.md" in job["artifacts"]["paths"]


@pytest.mark.parametrize("name", ["github-gate.yml", "gitlab-ci.yml"])
def test_the_ci_files_install_from_a_clone_not_from_pypi(name: str) -> None:
    text = (EXAMPLES / name).read_text()
    assert "pip install pytest-xlatune" not in text and "XLATUNE_REPO" in text
