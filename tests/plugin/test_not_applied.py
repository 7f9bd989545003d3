"""A profile whose NCCL setting left no trace in the library's debug lines reads `not applied`
in every output, never a recipe: the fake trainer prints recorded public NCCL debug text."""

from __future__ import annotations

import csv

import pytest

from tests.conftest import FAKE

CELL = """\
model_tag: nccl
nodes: 1
parallelism: FSDP=8
waves:
  2:
    - {name: ring, env: {NCCL_ALGO: Ring, FAKE_NCCL_TRACE: algo_ring_applied_tuning_table}, xla_flags: [--xla_fake_tgs=1000]}
    - {name: tree, env: {NCCL_ALGO: Tree, FAKE_NCCL_TRACE: algo_tree_proto_simple_ignored_fallback}, xla_flags: [--xla_fake_tgs=1150]}
"""


def test_an_ignored_nccl_setting_is_not_applied_everywhere_and_never_the_recipe(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(".yml", nccl=CELL)
    result = pytester.runpytest(
        str(cell), "-v", "--junitxml=junit.xml", "--html=report.html", "--xlatune-export=exports", *FAKE
    )
    out = result.stdout.str()
    tree = next(line for line in out.splitlines() if "wave2::tree[default] PASSED" in line)
    ring = next(line for line in out.splitlines() if "wave2::ring[default] PASSED" in line)
    assert "not applied" in tree and "better" not in tree, tree  # 1150 vs 1000: a false win otherwise
    assert "not applied" not in ring and "within noise" in ring, ring
    winner = next(line for line in out.splitlines() if "evidence2::winner[default] PASSED" in line)
    assert "not applied" in winner, winner  # the best run, re-run to show why it is no winner
    assert not cell.with_suffix(".lock.json").exists()  # the only faster profile is no recipe
    markdown = (pytester.path / "nccl-tuning.md").read_text()
    assert "not applied" in markdown and "| tree" in markdown
    assert "not_applied" in (pytester.path / "junit.xml").read_text()
    html = (pytester.path / "report.html").read_text()
    assert "not applied" in html
    rows = list(csv.DictReader((pytester.path / "exports" / "nccl-results.csv").open()))
    by_profile = {r["profile"]: r for r in rows}
    assert by_profile["tree"]["direction"] == "not_applied" and by_profile["ring"]["direction"] == "within_noise"
    store = (pytester.path / ".xlatune" / "nccl.jsonl").read_text()
    assert "NCCL_ALGO=Tree: the library chose algorithm Ring" in store
