"""plan.shape_fit: a pipeline shape the embedded workload would refuse is known from the cell."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_xlatune.cell.values import Backend, BackendKind, Cell, ClusterSlot, Parallelism, PipelineShape
from pytest_xlatune.plan.expand import expand
from pytest_xlatune.plan.request import passthrough
from pytest_xlatune.plan.shape_fit import microbatch_misfit, refusal_line
from pytest_xlatune.workload.args import ArgError, parse_args


def pp_cell(axes: tuple[tuple[str, int], ...], pdbs: int, *shapes: PipelineShape) -> Cell:
    return Cell(
        path=Path("cells/pp.yml"),
        model_tag="pp",
        slot=ClusterSlot(nodes=1),
        parallelism=Parallelism(axes),
        pdbs=pdbs,
        pipeline_shapes=shapes,
        overrides=(("num_decoder_layers", "8"),),
    )


def accepted(cell: Cell) -> list[int]:
    """The microbatch counts the workload itself runs for the cell's one shape."""
    spec = next(s for s in expand(cell) if s.profile.startswith("mb"))
    ok = []
    for m in range(1, 70):
        try:
            parse_args((*passthrough(cell, spec), f"num_pipeline_microbatches={m}"))
        except ArgError:
            continue
        ok.append(m)
    return ok


@pytest.mark.parametrize(
    ("axes", "pdbs", "virtual_stages"),
    [
        ((("PP", 4), ("FSDP", 2)), 1, 1),
        ((("PP", 4), ("FSDP", 2)), 3, 1),
        ((("PP", 4),), 2, 2),
        ((("PP", 2), ("TP", 2)), 4, 1),
    ],
)
def test_the_microbatches_named_as_fitting_are_exactly_those_the_workload_runs(
    axes: tuple[tuple[str, int], ...], pdbs: int, virtual_stages: int
) -> None:
    bad = pp_cell(axes, pdbs, PipelineShape(64, virtual_stages, line=9))  # 64 fits none of these batches
    error = microbatch_misfit(bad, expand(bad))
    assert error is not None and (error.line, error.key) == (9, "pipeline_shapes[0].microbatches")
    listed = error.expected.rsplit("(", 1)[1].rstrip(")")
    assert [int(m) for m in listed.split(", ")] == accepted(bad)
    for m in accepted(bad):
        good = pp_cell(axes, pdbs, PipelineShape(m, virtual_stages))
        assert microbatch_misfit(good, expand(good)) is None


def test_the_rule_is_checked_only_where_the_embedded_workload_runs() -> None:
    shape = PipelineShape(8, line=9)
    local = pp_cell((("PP", 4), ("FSDP", 2)), 1, shape)
    assert microbatch_misfit(local, expand(local)) is not None
    assert microbatch_misfit(local, expand(local), workload="my_trainer") is None  # its own rule
    cluster = replace(local, slot=ClusterSlot(nodes=8), backend=Backend(BackendKind.MAXTEXT_SLURM))
    assert microbatch_misfit(cluster, expand(cluster)) is None  # MaxText's devices and rules: not in the cell


def test_a_refused_run_names_the_key_only_for_a_shape_refused_over_its_microbatches() -> None:
    cell = pp_cell((("PP", 4),), 2, PipelineShape(4), PipelineShape(6, line=12))
    specs = {s.profile: s for s in expand(cell)}
    reason = (
        "Python exception: AssertionError: The number of microbatches (6) must be divisible by the number of stages (4)"
    )
    assert refusal_line(cell, specs["mb6_v1"], reason, "cells/pp.yml") == (
        "cells/pp.yml:12: pipeline_shapes[1].microbatches: the run refused shape mb6_v1 (6 microbatches, "
        "virtual_stages 1); change or drop it"
    )
    assert refusal_line(cell, specs["mb6_v1"], "Python exception: RuntimeError: boom", "cells/pp.yml") is None
    assert refusal_line(cell, specs["baseline"], reason, "cells/pp.yml") is None
