"""Pipeline shapes vs the batch they split (pure): which microbatch counts a run would refuse.

The embedded workload (local backend, sbatch without a `command`) takes its batch from the cell
alone: pdbs × the devices of its parallelism axes and overrides, split into `microbatches`, each
split again over data × FSDP (workload/args.py's rule, `microbatch_problem`). A shape it would
refuse is refused at collection, naming `pipeline_shapes[i].microbatches`. MaxText on a cluster
has its own rules and a device count the cell does not state: there a run's refusal is named
after the key when it fails (`refusal_line`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..cell.fit import spans_nodes
from ..cell.nodes import CellError
from ..cell.values import Cell
from ..workload.args import ArgError, fitting_microbatches, parse_args, read_args
from .expand import RunKind, RunSpec
from .request import passthrough

EMBEDDED_WORKLOAD = "pytest_xlatune.workload"  # the default of --xlatune-workload


def _refused(cell: Cell, spec: RunSpec) -> str | None:
    """The embedded workload's words for a run it would refuse; None when it accepts it."""
    try:
        parse_args(passthrough(cell, spec))
    except ArgError as exc:
        return str(exc)
    return None


def _shape(cell: Cell, profile: str) -> int | None:
    """The index of the pipeline shape named `profile`."""
    return next((i for i, s in enumerate(cell.pipeline_shapes) if s.name == profile), None)


def microbatch_misfit(cell: Cell, specs: Sequence[RunSpec], workload: str = EMBEDDED_WORKLOAD) -> CellError | None:
    """The first pipeline shape whose microbatches the embedded workload would refuse, as the
    cell error to raise at collection; None where all fit or the rule is not known here
    (another workload module, MaxText across nodes, a baseline the workload refuses as well)."""
    if workload != EMBEDDED_WORKLOAD or spans_nodes(cell):
        return None
    baselines = {s.config_tag: s for s in specs if s.kind is RunKind.BASELINE}
    for spec in specs:
        index, base = _shape(cell, spec.profile), baselines.get(spec.config_tag)
        if spec.kind is not RunKind.PIPELINE_SHAPE or index is None or base is None or _refused(cell, base):
            continue
        if (problem := _refused(cell, spec)) is None:
            continue
        shape, c = cell.pipeline_shapes[index], read_args(passthrough(cell, spec))
        fits = ", ".join(map(str, fitting_microbatches(c))) or "none does"
        circular = f", at least {c.stages} for a circular pipeline" if shape.virtual_stages > 1 else ""
        return CellError(
            cell.path,
            shape.line,
            f"pipeline_shapes[{index}].microbatches",
            f"a number of microbatches that splits the global batch {c.global_batch} (per-device batch "
            f"{c.per_device_batch_size:g} × {c.num_devices} devices) into microbatches divisible by "
            f"data × FSDP = {c.data * c.fsdp}{circular} ({fits})",
            f"{shape.microbatches} ({problem})",
        )
    return None


def refusal_line(cell: Cell, spec: RunSpec, reason: str, where: Path | str) -> str | None:
    """For a pipeline shape whose run was refused over its microbatches (MaxText's or the
    workload's words), the cell key to change: `cells/x.yml:14: pipeline_shapes[1].microbatches: …`."""
    index = _shape(cell, spec.profile)
    if spec.kind is not RunKind.PIPELINE_SHAPE or index is None or "microbatch" not in reason.lower():
        return None
    shape = cell.pipeline_shapes[index]
    return (
        f"{where}:{shape.line}: pipeline_shapes[{index}].microbatches: the run refused shape {shape.name} "
        f"({shape.microbatches} microbatches, virtual_stages {shape.virtual_stages}); change or drop it"
    )
