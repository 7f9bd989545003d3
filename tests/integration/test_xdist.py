"""xdist: cells on disjoint nodelists run in parallel; one nodelist never runs two jobs at once."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tests.conftest import REAL as FAKE
from tests.conftest import REAL_FIXED as FIXED
from tests.integration.fixtures_infra import placement

pytestmark = pytest.mark.slurm

CELL = """\
model_tag: {tag}
nodelist: {nodes}
parallelism: FSDP=8
baseline_repeats: 1
overrides: {{fake_step_sleep: 0.1}}
waves:
  2:
    - {{name: a, xla_flags: [--xla_fake_tgs=1100]}}
    - {{name: b, xla_flags: [--xla_fake_tgs=900]}}
backend: {{kind: sbatch}}
"""


def spans(store: Path) -> list[tuple[str, str]]:
    out = []
    for line in store.read_text().splitlines():
        event = json.loads(line)
        if event["event"] != "submitted":
            continue
        _, start, end = placement(event["job_id"])
        out.append((start, end))
    return sorted(out)


def test_two_cells_on_disjoint_nodelists_run_in_parallel(
    pytester: pytest.Pytester, local_slurm: None, fake_trainer_env: None
) -> None:
    pytester.makefile(
        ".yml", left=CELL.format(tag="left", nodes="node[01-02]"), right=CELL.format(tag="right", nodes="node[03-04]")
    )
    # The fixed protocol: every item its own job (a's confirmed win would skip b adaptively).
    result = pytester.runpytest(
        "left.yml", "right.yml", "-n", "2", "--dist", "loadgroup", "-v", *FIXED, "--xlatune-poll-interval=0.2"
    )
    result.assert_outcomes(passed=10)  # 5 per cell, winner evidence included
    workers = {
        cell: {line.split("]")[0] for line in result.stdout.lines if line.startswith("[gw") and f"{cell}.yml::" in line}
        for cell in ("left", "right")
    }
    assert all(len(w) == 1 for w in workers.values()), workers  # one worker per nodelist
    left, right = (spans(pytester.path / ".xlatune" / f"{n}.jsonl") for n in ("left", "right"))
    for cell in (left, right):
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(cell)), cell  # serial per nodelist
    assert left[0][0] < right[-1][1] and right[0][0] < left[-1][1]  # the two cells overlapped
    # Written once, by the controller, for each cell.
    assert (pytester.path / "left-tuning.md").exists() and (pytester.path / "right-tuning.md").exists()


def test_items_carry_one_xdist_group_per_slot(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".yml",
        a=CELL.format(tag="a", nodes="node[01-02]"),
        b=CELL.format(tag="b", nodes="node[01-02]"),
        c=CELL.format(tag="c", nodes="node[03-04]"),
        d="model_tag: d\nnodes: 1\nparallelism: FSDP=2\n",
    )
    pytester.makeconftest("""
        def pytest_collection_finish(session):
            for item in session.items:
                print("GROUP", item.nodeid, item.get_closest_marker("xdist_group").kwargs["name"])
    """)
    result = pytester.runpytest("a.yml", "b.yml", "c.yml", "d.yml", "--collect-only", "-s")
    result.stdout.fnmatch_lines(
        [
            "GROUP a.yml::wave1::baseline[[]default[]] nodelist=node_01-02_",
            "GROUP b.yml::wave2::b[[]default[]] nodelist=node_01-02_",
            "GROUP c.yml::wave2::a[[]default[]] nodelist=node_03-04_",
            "GROUP d.yml::wave1::baseline[[]default[]] local",
        ]
    )


def test_local_cells_share_one_worker(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    # All local cells compete for this machine's CPUs: one group, so they never run at once.
    pytester.makefile(
        ".yml", **{n: f"model_tag: {n}\nnodes: 1\nparallelism: FSDP=2\nbaseline_repeats: 1\n" for n in ("x", "y")}
    )
    result = pytester.runpytest("x.yml", "y.yml", "-n", "2", "--dist", "loadgroup", "-v", *FAKE)
    result.assert_outcomes(passed=4)
    workers = {line.split("]")[0] for line in result.stdout.lines if line.startswith("[gw")}
    assert len(workers) == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["*x.yml::wave1::baseline[[]default[]]@local*"])
