"""A third-party backend, added from a conftest.py through pytest_xlatune_make_launcher."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FAKE

CELL = """\
model_tag: fake
nodes: 1
parallelism: FSDP=8
pdbs: 2
config_tags:
  sparse: {}
waves:
  2:
    - name: fast
      xla_flags: [--xla_fake_tgs=1100]
"""

# The conftest's backend runs each job through the built-in local launcher, records every job
# name it was asked to start, and reports a nodelist of its own.
CONFTEST = """\
from pathlib import Path

from pytest_xlatune.launch.local import LocalLauncher
from pytest_xlatune.launch.registry import Backend


class Recording(LocalLauncher):
    name = "recording"

    def submit(self, request):
        with open(Path(__file__).parent / "submitted.txt", "a") as out:
            out.write(request.job_name + "\\n")
        return super().submit(request)


def pytest_xlatune_make_launcher(context):
    launcher = Recording(context.paths.jobs_dir, context.store.max_job_number() + 1,
                         python=context.cell_settings.python, module=context.settings.workload)
    return Backend(launcher, nodelist="hooked01")
"""


@pytest.fixture
def cell(pytester: pytest.Pytester, fake_trainer_env: None) -> Path:
    pytester.makeconftest(CONFTEST)
    return pytester.makefile(".yml", hooked=CELL)


def test_a_conftest_backend_runs_every_job_of_the_cell(pytester: pytest.Pytester, cell: Path) -> None:
    # Every job of the cell goes through the hook: the fixed protocol's five (an adaptive sweep
    # would add the +10 % win's confirming run).
    result = pytester.runpytest(str(cell), "-v", "--xlatune-fixed-protocol", *FAKE)
    result.assert_outcomes(passed=5)
    submitted = (pytester.path / "submitted.txt").read_text().split()
    assert len(submitted) == 5 and any("fast" in name for name in submitted)
    records = [json.loads(line) for line in (pytester.path / ".xlatune" / "hooked.jsonl").read_text().splitlines()]
    assert {r["nodelist"] for r in records if r.get("event") == "sweep"} == {"hooked01"}
    assert {r["backend"] for r in records if r.get("event") == "result"} == {"recording"}


def test_without_a_plugin_the_built_in_registry_starts_the_backend(pytester: pytest.Pytester,
                                                                   fake_trainer_env: None) -> None:
    cell = pytester.makefile(".yml", plain=CELL)
    result = pytester.runpytest(str(cell), *FAKE)
    result.assert_outcomes(passed=5)
    records = [json.loads(line) for line in (pytester.path / ".xlatune" / "plain.jsonl").read_text().splitlines()]
    assert {r["nodelist"] for r in records if r.get("event") == "sweep"} == {"localhost"}
