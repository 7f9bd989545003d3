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


def test_without_a_plugin_the_built_in_registry_starts_the_backend(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(".yml", plain=CELL)
    result = pytester.runpytest(str(cell), *FAKE)
    result.assert_outcomes(passed=5)
    records = [json.loads(line) for line in (pytester.path / ".xlatune" / "plain.jsonl").read_text().splitlines()]
    assert {r["nodelist"] for r in records if r.get("event") == "sweep"} == {"localhost"}


# A backend kind of its own: `backend: {kind: recorded, label: ...}`; the plugin checks `label`
# and its factory reads it from the cell.
KIND_CONFTEST = """\
from pathlib import Path

from pytest_xlatune.launch.local import LocalLauncher
from pytest_xlatune.launch.registry import Backend, BackendPlugin


def check(key, value):
    if key != "label":
        return "an option of backend kind recorded: label"
    return None if value.isalpha() and value.islower() else "lowercase letters"


def start(context):
    (Path(__file__).parent / "label.txt").write_text(context.cell.backend.option("label"))
    launcher = LocalLauncher(context.paths.jobs_dir, context.store.max_job_number() + 1,
                             python=context.cell_settings.python, module=context.settings.workload)
    return Backend(launcher, nodelist="recorded01")


def pytest_xlatune_backend_kinds():
    return [BackendPlugin("recorded", start, check)]
"""


def test_a_plugin_adds_a_backend_kind_with_keys_of_its_own(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    pytester.makeconftest(KIND_CONFTEST)
    cell = pytester.makefile(".yml", kinded=CELL + "backend:\n  kind: recorded\n  label: blue\n")
    result = pytester.runpytest(str(cell), *FAKE)
    result.assert_outcomes(passed=5)
    assert (pytester.path / "label.txt").read_text() == "blue"
    records = [json.loads(line) for line in (pytester.path / ".xlatune" / "kinded.jsonl").read_text().splitlines()]
    assert {(r["nodelist"], r["backend"]) for r in records if r.get("event") == "sweep"} == {("recorded01", "recorded")}


@pytest.mark.parametrize("backend, error", [
    ("  kind: recorded\n  label: Blue7\n",
     "kinded.yml:13: backend.label: expected lowercase letters, found 'Blue7' (checked by the plugin of "
     "backend kind recorded)"),
    ("  kind: recorded\n  colour: blue\n",
     "kinded.yml:13: backend.colour: expected an option of backend kind recorded: label, found 'blue' "
     "(checked by the plugin of backend kind recorded)"),
    ("  kind: recordd\n",
     "kinded.yml:12: backend.kind: expected one of local, maxtext-slurm, sbatch, recorded, found 'recordd' "
     "(did you mean 'recorded'?)"),
])  # fmt: skip
def test_a_plugin_kinds_keys_are_checked_by_the_plugin_with_file_line_key(
    pytester: pytest.Pytester, fake_trainer_env: None, backend: str, error: str
) -> None:
    pytester.makeconftest(KIND_CONFTEST)
    cell = pytester.makefile(".yml", kinded=CELL + "backend:\n" + backend)
    result = pytester.runpytest(str(cell), *FAKE)
    result.stdout.fnmatch_lines([f"*{error}*"])
    assert not (pytester.path / "label.txt").exists()


def test_without_the_plugin_its_kind_is_an_unknown_kind_listing_the_known_ones(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(".yml", kinded=CELL + "backend:\n  kind: recorded\n")
    result = pytester.runpytest(str(cell), *FAKE)
    result.stdout.fnmatch_lines(
        ["*kinded.yml:12: backend.kind: expected one of local, maxtext-slurm, sbatch, found 'recorded'*"]
    )
