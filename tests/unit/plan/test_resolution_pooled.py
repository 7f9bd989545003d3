"""Runs resolved from other runs are found under the resolution the session made when they ran:
from the results with the adaptive sweep's repeats and controls pooled, as every output shows them."""

from __future__ import annotations

from pathlib import Path

from pytest_xlatune.cell.values import Cell, ClusterSlot, ConfigTag, Parallelism, Profile
from pytest_xlatune.engine.sweep import Sweep
from pytest_xlatune.plan.expand import RunKind, expand
from pytest_xlatune.plan.resolve import current_results
from pytest_xlatune.store import ResultStore
from tests.unit.plan.test_resolution import NoLauncher, measure, spec


def make_sweep(tmp_path: Path) -> Sweep:
    cell = Cell(
        path=Path("c.yml"),
        model_tag="m",
        slot=ClusterSlot(nodes=1),
        parallelism=Parallelism((("TP", 2),)),
        config_tags=(ConfigTag("small"), ConfigTag("wide", (("mlp_dim", "256"),))),
        profiles=(
            Profile("one", 2, ("--xla_one=1",)),
            Profile("two", 2, ("--xla_two=1",)),
        ),
    )
    return Sweep(
        cell=cell, specs=expand(cell), store=ResultStore(tmp_path / "s.jsonl"), launcher=NoLauncher(), nodelist="n"
    )  # type: ignore[arg-type]


def test_a_cross_config_run_is_found_under_the_recipe_its_repeats_made(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    by_name = {(s.kind, s.profile, s.config_tag): s for s in sweep.specs}
    for job, s in enumerate(s for s in sweep.specs if s.kind is RunKind.BASELINE and s.config_tag == "small"):
        measure(sweep, s, 1000.0 + job, job + 1)
    measure(sweep, by_name[(RunKind.PROFILE, "one", "small")], 1580.0, 10)
    measure(sweep, by_name[(RunKind.PROFILE, "two", "small")], 1600.0, 11)
    # `one`'s repeat (the adaptive sweep's second run of the item) makes it the recipe.
    measure(sweep, by_name[(RunKind.PROFILE, "one", "small")].remeasured(1), 1640.0, 12)
    wave6, reason = sweep.resolution(spec(sweep, RunKind.CROSS_CONFIG))
    assert reason == "" and wave6 is not None and wave6.resolved_from == "one"
    measure(sweep, wave6, 1900.0, 13)

    assert any(r.kind is RunKind.CROSS_CONFIG and r.job_id == "13" for r in sweep.results())
    # The single latest runs alone would resolve wave 6 to `two` (faster first run): the result
    # stored under `one` is found only when the resolution sees the pooled figures.
    latest = sweep.store.latest_by_key()
    unpooled = current_results(sweep.cell, sweep.specs, latest, sweep.key, sweep.numerics)
    assert not any(r.kind is RunKind.CROSS_CONFIG for r in unpooled)
