"""Likely winners first across sweeps: a second cell in the same store directory runs the
candidate whose settings won the first cell's sweep ahead of its list order, and says why (also
under --collect-only); without another sweep nothing is said and list order is kept."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FAKE

CELL = """\
model_tag: {tag}
nodes: 1
parallelism: FSDP=8
env_file:
  - flag: --xla_fake_tgs=1000
    image_default: "1000"
waves:
  2:
{profiles}
"""
SLOW = "    - {name: slow, xla_flags: [--xla_fake_tgs=950]}"
WIN = "    - {name: win, xla_flags: [--xla_fake_tgs=1200]}"
SOON = "    - {name: fast, xla_flags: [--xla_fake_tgs=1200]}"  # the same settings, another name


def order_of(pytester: pytest.Pytester, tag: str) -> list[str]:
    """The candidates' items in the order their first job was submitted."""
    lines = (pytester.path / ".xlatune" / f"{tag}.jsonl").read_text().splitlines()
    results = [e for e in map(json.loads, lines) if e["event"] == "result" and e["kind"] == "profile"]
    return [e["item"] for e in sorted(results, key=lambda e: e["submitted_at"])]


def test_a_second_cell_runs_the_first_sweeps_winner_first(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    first = pytester.makefile(".yml", one=CELL.format(tag="one", profiles=f"{WIN}\n{SLOW}"))
    second = pytester.makefile(".yml", two=CELL.format(tag="two", profiles=f"{SLOW}\n{SOON}"))
    listed = pytester.runpytest(str(second), "--collect-only", "-q", *FAKE)
    assert "planned order" not in listed.stdout.str()  # no other sweep yet: list order, nothing said
    assert pytester.runpytest(str(first), *FAKE).ret == 0
    planned = pytester.runpytest(str(second), "--collect-only", "-q", *FAKE)
    planned.stdout.fnmatch_lines(
        [
            "xlatune: two.yml: candidates in planned order wave2::fast[[]default[]], "
            "wave1::restore_default[[]default[]], wave2::slow[[]default[]]; ahead of list order: wave2::fast[[]default[]] "
            "+10.00 % (+20.0 % in 1 FSDP sweep(s) → +10.00)"
        ]
    )
    ran = pytester.runpytest(str(second), "-v", *FAKE)
    ran.stdout.fnmatch_lines(
        ["*wave2::fast[[]default[]]: run ahead of wave2::slow[[]default[]]: next candidate by expected gain*"]
    )
    assert order_of(pytester, "two")[0] == "wave2::fast[default]"
    # Its summary says the order once, from the store (the report's line too).
    assert ran.stdout.str().count("xlatune: two.yml: candidates in planned order wave2::fast[default]") == 1
    assert order_of(pytester, "one")[0] == "wave2::win[default]"  # the first sweep: list order


def test_collect_only_plans_the_same_order_the_session_runs(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    # restore_default (the image default of an env-file flag) is one of the planner's candidates:
    # --collect-only names it where the session does.
    first = pytester.makefile(".yml", one=CELL.format(tag="one", profiles=f"{WIN}\n{SLOW}"))
    restoring = CELL.replace('image_default: "1000"', 'image_default: "1010"')
    second = pytester.makefile(".yml", two=restoring.format(tag="two", profiles=f"{SLOW}\n{SOON}"))
    assert pytester.runpytest(str(first), *FAKE).ret == 0

    def planned(output: str) -> list[str]:
        return [line for line in output.splitlines() if "xlatune: two.yml: candidates in planned order" in line]

    collected = planned(pytester.runpytest(str(second), "--collect-only", "-q", *FAKE).stdout.str())
    ran = planned(pytester.runpytest(str(second), "-v", *FAKE).stdout.str())
    assert collected and "wave1::restore_default[default]" in collected[0]
    assert collected == ran[:1]
