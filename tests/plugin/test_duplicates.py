"""No duplicate runs: an item whose effective settings equal an earlier item's shares its job,
unless --xlatune-fixed-protocol (or its ini twin) asks for every item to run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FAKE

# restore_default appends the image default (1100) after the env file's 1000: last wins, so
# `same` runs exactly what restore_default runs.
CELL = """\
model_tag: dup
nodes: 1
parallelism: FSDP=8
env_file:
  - flag: --xla_fake_tgs=1000
    image_default: "1100"
waves:
  2:
    - {name: same, xla_flags: [--xla_fake_tgs=1100]}
    - {name: other, xla_flags: [--xla_fake_tgs=900]}
"""


@pytest.fixture
def cell(pytester: pytest.Pytester, fake_trainer_env: None) -> Path:
    return pytester.makefile(".yml", dup=CELL)


def results(pytester: pytest.Pytester) -> dict[str, dict[str, object]]:
    lines = (pytester.path / ".xlatune" / "dup.jsonl").read_text().splitlines()
    return {e["item"]: e for e in map(json.loads, lines) if e["event"] == "result"}


def test_an_item_with_the_settings_of_an_earlier_one_shares_its_job(pytester: pytest.Pytester, cell: Path) -> None:
    result = pytester.runpytest(str(cell), "-v", *FAKE)
    result.assert_outcomes(passed=7)  # baseline ×2, restore_default, evidence, same, other, winner
    result.stdout.fnmatch_lines(
        [
            # its win's confirming run is the recipe's evidence run, pooled into the figure
            "*wave2::same[[]default[]] PASSED 1100.* TGS +*.* %*(profiled)*(same effective "
            "settings as wave1::restore_default[[]default[]]: shared)*"
        ]
    )
    stored = results(pytester)
    lines = (pytester.path / ".xlatune" / "dup.jsonl").read_text().splitlines()
    runs = [
        e for e in map(json.loads, lines) if e["event"] == "result" and e["item"] == "wave1::restore_default[default]"
    ]
    same, restore = stored["wave2::same[default]"], runs[0]  # its planned run
    assert same["job_id"] == restore["job_id"] and same["shared_from"] == "wave1::restore_default[default]"
    assert same["xla_flags"] == ["--xla_fake_tgs=1100"] and same["kind"] == "profile"
    # One job fewer than items, plus the control a win needs after its first run before it counts
    # (stored under the baseline's item, so it replaces job 1 in this by-item view; the cost line
    # below counts all 7 jobs). The +10 % win's confirming run is the recipe's evidence run of
    # restore_default (the winner item's job, pooled into its figure): no plain repeat.
    assert len({e["job_id"] for e in stored.values()}) == 6
    assert len({e["key"] for e in runs}) == 1 and len({e["job_id"] for e in runs}) == 1
    assert stored["evidence2::winner[default]"]["resolved_from"] == "restore_default"
    assert not list(pytester.path.rglob("*-dup-same-default.log"))  # never submitted
    result.stdout.fnmatch_lines(
        [
            "xlatune: dup.yml: sweep cost * over 7 jobs",
            # whether a fast fake job is stopped early depends on when the
            # watcher looks (a loaded CI stopped restore_default as a winner)
            "xlatune: dup.yml: saved node-minutes: * early stop(s) *, 1 shared duplicate(s) *, 0 skipped item(s) *",
        ]
    )
    # The rerun reuses the shared result and still says whose job it is.
    again = pytester.runpytest(str(cell), "-v", *FAKE)
    again.stdout.fnmatch_lines(["*wave2::same[[]default[]] REUSED 1100.* TGS*: shared)*"])


@pytest.mark.parametrize("how", ["option", "ini"])
def test_the_fixed_protocol_runs_every_item_in_its_own_job(pytester: pytest.Pytester, cell: Path, how: str) -> None:
    if how == "ini":
        pytester.makeini("[pytest]\nxlatune_fixed_protocol = true\n")
    args = ["--xlatune-fixed-protocol"] if how == "option" else []
    result = pytester.runpytest(str(cell), "-v", *args, *FAKE)
    result.assert_outcomes(passed=7)
    assert "shared" not in result.stdout.str()
    stored = results(pytester)
    assert stored["wave2::same[default]"]["job_id"] != stored["wave1::restore_default[default]"]["job_id"]
    assert len({e["job_id"] for e in stored.values()}) == 7
