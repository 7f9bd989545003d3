"""The prior across sweeps (adaptive.order.family/effects/Prior.across, engine.prior): other
stores' measured effects, matched to this cell's candidates by their settings, weak across
parallelism families, nothing at all without another sweep."""

from __future__ import annotations

import math
from pathlib import Path

from pytest_xlatune.adaptive.order import OTHER_WEIGHT, UNKNOWN, Prior, effects, family, order_line, prior_settings
from pytest_xlatune.cell.values import Parallelism
from pytest_xlatune.engine.prior import prior_for
from pytest_xlatune.plan.expand import expand
from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.store import ResultStore
from tests.unit.plan.test_plan import make_cell


def result(
    item: str, kind: str, tgs: float, flags: tuple[str, ...] = (), job: str = "1", shared_from: str = ""
) -> JobResult:
    return JobResult(
        key=f"{item}-{job}",
        item=item,
        wave="w",
        profile=item,
        config_tag="sparse",
        kind=kind,
        job_id=job,
        verdict=Verdict.SUCCESS,
        xla_flags=flags,
        tgs=tgs,
        shared_from=shared_from,
    )


def test_the_family_is_the_set_of_axes_over_one() -> None:
    assert family("FSDP=8") == "FSDP" and family("TP=2,FSDP=4") == "FSDP+TP" == family("FSDP=4,TP=2,PP=1")
    assert family("FSDP=1") == "single"
    assert family("") == UNKNOWN == family("FSDP")


def test_effects_are_against_the_own_baselines_each_settings_once() -> None:
    runs = [
        result("b1", "baseline", 1000.0),
        result("b2", "baseline", 1020.0, job="2"),
        result("x", "profile", 1131.0, ("--xla_b=2",), job="3"),
        result("y", "profile", 1111.0, ("--xla_b=2",), job="3", shared_from="x"),  # x's job again
        result("x-r", "profile", 1091.0, ("--xla_b=2",), job="5"),  # its repeat: one sweep, one mean
        result("z", "profile", 900.0, job="4"),
    ]  # sets nothing: matches no candidate
    ((settings, fam, pct),) = effects(runs, "FSDP")
    assert settings == ("--xla_b=2",) and fam == "FSDP" and math.isclose(pct, 10.0)
    assert prior_settings(["--b=1", "--a=1"], [("N", "8")]) == ("--a=1", "--b=1", "env:N=8")


def test_the_prior_matches_by_settings_not_by_name() -> None:
    seen = [(("--xla_b=2",), "FSDP", 4.0), (("--xla_c=1",), "PP", 8.0)]
    prior = Prior.across({"first": ("--xla_q=1",), "renamed": ("--xla_b=2",), "third": ("--xla_c=1",)}, seen, "FSDP")
    assert math.isclose(prior.gain("renamed").pct, 2.0) and math.isclose(prior.gain("third").pct, OTHER_WEIGHT * 4.0)
    line = order_line(["first", "renamed", "third"], prior)
    assert line.startswith("candidates in planned order renamed, third, first; ahead of list order: renamed +2.00 %")
    assert order_line(["first", "renamed"], Prior()) == ""  # no prior: list order, nothing said


def test_prior_for_reads_the_other_stores_in_the_store_directory(tmp_path: Path) -> None:
    cell = make_cell()  # FSDP=8; candidates w2 (--xla_b=2, NCCL_Z=8) and w3 (--xla_c=1)
    specs = expand(cell)
    own = tmp_path / "x.jsonl"
    assert prior_for(cell, specs, tmp_path, own) == Prior()  # no other sweep: nothing changes
    ResultStore(own).add_result(result("w3", "profile", 2000.0, ("--xla_c=1",)))  # its own runs never count
    other = ResultStore(tmp_path / "other.jsonl")
    other.append("sweep", nodelist="n1", backend="local", model_tag="o", parallelism="FSDP=2,TP=4")
    for run in (result("b", "baseline", 1000.0), result("c", "profile", 1060.0, ("--xla_c=1",), job="2")):
        other.add_result(run)
    legacy = ResultStore(tmp_path / "legacy.jsonl")  # no sweep record: unknown family
    legacy.add_result(result("b", "baseline", 1000.0))
    legacy.add_result(result("c", "profile", 1060.0, ("--xla_c=1",), job="2"))
    (tmp_path / "broken.jsonl").write_text("not a record\n")
    prior = prior_for(cell, specs, tmp_path, own)
    assert math.isclose(
        prior.gain("wave3::w3[sparse]").pct, OTHER_WEIGHT * 6.0 * 2 / 3
    )  # two other-family sweeps, shrunk
    same = prior_for(make_cell(parallelism=Parallelism((("TP", 4), ("FSDP", 2)))), specs, tmp_path, own)
    assert same.gain("wave3::w3[sparse]").pct > prior.gain("wave3::w3[sparse]").pct  # its own family counts whole
    assert prior.gain("wave2::w2[sparse]").why == "no prior"


def test_a_prior_from_another_family_reads_as_a_sentence() -> None:
    # It read "+84.6 % in 1 other families sweep(s)"; the same family's reads "in 1 FSDP sweep(s)".
    from pytest_xlatune.adaptive.order import Prior

    prior = Prior.of([("a", "FSDP", 20.0), ("b", "TP", 20.0)], "FSDP")
    assert prior.gain("a").why == "+20.0 % in 1 FSDP sweep(s) → +10.00"
    assert prior.gain("b").why.startswith("+20.0 % in 1 sweep(s) of other parallelism families → +")
