"""engine.report_view: the report's recipe and whether the lock holds it, as the planner reads it."""

from __future__ import annotations

import dataclasses

from pytest_xlatune.engine.report_view import recipe_view
from pytest_xlatune.verdict import verdicts
from pytest_xlatune.verdict.numerics import Mode
from tests.unit.verdict.test_noise_stressors import run


def _sweep(after: tuple[float, float]) -> list:  # type: ignore[type-arg]
    """~3 % noise; a candidate whose first run (1125.0) chose it for a repeat, then `after`."""
    baselines = [
        run(f"baseline{'-r' + str(i + 1) if i else ''}", v, "baseline", str(i + 1), wave="wave1")
        for i, v in enumerate((1000.0, 1040.0, 970.0, 1010.0))
    ]
    other = run("at_default", 1005.0, job="5", flags=("--xla_cpu_enable_fast_math=false",))
    other = dataclasses.replace(other, runs=(("5", 1000.0), ("6", 1030.0), ("7", 985.0)))
    values = (1125.0, *after)
    win = run("win", sum(values) / 3, job="8", flags=("--xla_b=1",), runs=tuple(zip(("8", "9", "10"), values)))
    return [*baselines, other, win]


def test_a_recipe_whose_runs_after_its_first_do_not_win_alone_is_named_but_not_locked() -> None:
    results = _sweep((1055.0, 1065.0))
    found = recipe_view(results, "default", Mode.FAIL)
    assert found is not None
    best, why, unbracketed = found
    assert best.profile == "win" and "do not show the win on their own" in why and not unbracketed
    assert why == verdicts.confirmation(best, results)


def test_a_recipe_replicated_on_its_own_lacks_only_a_control_after_its_first_run() -> None:
    found = recipe_view(_sweep((1115.0, 1120.0)), "default", Mode.FAIL)
    assert found is not None and found[0].profile == "win"
    assert found[1].startswith("no control (a baseline run) ran after win's first run") and found[2]


def test_a_replicated_recipe_a_control_brackets_is_locked() -> None:
    control = run("baseline", 1005.0, "baseline", "11", wave="wave1")  # the baseline again, after job 8
    found = recipe_view([*_sweep((1115.0, 1120.0)), control], "default", Mode.FAIL)
    assert found is not None and found[0].profile == "win" and found[1] == "" and not found[2]


def test_no_recipe_without_a_win() -> None:
    results = [r for r in _sweep((1115.0, 1120.0)) if r.profile != "win"]
    assert recipe_view(results, "default", Mode.FAIL) is None
