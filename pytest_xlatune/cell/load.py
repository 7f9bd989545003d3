"""Load a cell YAML file into frozen dataclasses; every error names file, line, key, expectation."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml
from yaml.nodes import Node

from pytest_xlatune import safeyaml
from pytest_xlatune.cell import grammar as G
from pytest_xlatune.cell import nodes as N
from pytest_xlatune.cell.nodes import CellError, Fields, kind_of, line_of
from pytest_xlatune.cell.schema import BY_NAME, KEYS, TOP_KEYS
from pytest_xlatune.cell.values import (
    BASELINE,
    EVIDENCE,
    RESTORE_DEFAULT,
    WINNER,
    BackendKind,
    Cell,
    ClusterSlot,
    Parallelism,
)
from pytest_xlatune.safefs import FileRefused, read_bytes_regular

from . import catalog as C
from . import jobnames as J
from .fit import dcn_misfit
from .sections import BACKEND_OPTIONS, THRESHOLD_KEYS

__all__ = ["CellError", "load_cell"]


def load_cell(path: Path, kinds: Mapping[str, N.KindCheck] = MappingProxyType({})) -> Cell:
    """Read, validate and freeze one cell file; raise CellError at the first problem. `kinds`:
    the backend kinds plugins added (the session's; launch.registry.BackendPlugin.check)."""
    path = Path(path)
    return _cell(N.Ctx(path, kinds), _compose(path, _read(path)))


# A cell is a few KB (the largest in cells/ is 3 KB); PyYAML's pure-Python scanner takes about a
# minute for 60 MB, so a file past this is refused before it is parsed.
MAX_BYTES = 256 * 1024


def _read(path: Path) -> str:
    try:
        data = read_bytes_regular(path, what="a cell file", limit=MAX_BYTES)
    except FileRefused as exc:  # a FIFO (the report CLI would wait on it forever), a folder
        raise CellError(path, 0, "file", "a readable cell file", exc.found or str(exc)) from None
    except OSError as exc:
        found = exc.strerror or repr(exc)
        raise CellError(path, 0, "file", "a readable cell file", found) from None
    if data is None:
        raise CellError(path, 0, "file", "a readable cell file", "no such file")
    if len(data) > MAX_BYTES:
        size = f"{path.stat().st_size:,} bytes"
        raise CellError(path, 0, "file", f"a cell file of at most {MAX_BYTES // 1024} KiB", size)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CellError(path, line, "file", "UTF-8 text", f"byte 0x{data[exc.start]:02x}") from None


def _compose(path: Path, text: str) -> Node | None:
    try:
        return safeyaml.compose(text)
    except safeyaml.AliasRefused as exc:  # before expanding: an alias bomb costs nothing here
        raise CellError(path, exc.line, exc.key or "yaml", safeyaml.EXPECTED, exc.found) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        found = exc.problem or exc.context or "a syntax error"
        found = found.removeprefix("found ")  # "found unexpected end of stream"
        if found.startswith("expected"):  # "expected <block end>, but found '-'"
            found = f"a syntax error: {found}"
        if "'\\t'" in found:
            found += " (YAML indents with spaces, not tabs)"
        elif exc.problem and exc.context and exc.context_mark:  # say where the block began
            check = "brackets" if "flow" in exc.context else "indentation"
            found += f" ({exc.context} from line {exc.context_mark.line + 1}: check its {check})"
        raise CellError(path, mark.line + 1 if mark else 0, "yaml", "valid YAML", found) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        char = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        raise CellError(path, line, "yaml", "valid YAML", f"{exc.reason} ({char})") from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise CellError(path, 0, "yaml", "valid YAML", type(exc).__name__) from None


# Keys of a section written at the top of a cell (`win_pct: 5`): the error names the section.
NESTED_KEYS: Mapping[str, str] = MappingProxyType(
    {
        **{name: "backend" for options in BACKEND_OPTIONS.values() for name in options},
        "kind": "backend",
        **dict.fromkeys(THRESHOLD_KEYS, "thresholds"),
    }
)


def _cell(r: N.Ctx, root: Node | None) -> Cell:
    if root is None:
        r.fail(1, "cell", "a mapping of cell keys", "an empty document")
    if kind_of(root) != "map":
        r.fail(root, "cell", "a mapping of cell keys")
    N.check_tags(r, root, "", set())
    top = N.mapping(r, root, "", TOP_KEYS, nested=NESTED_KEYS)
    if "schema" in top:  # a newer schema fails on its version, not on the first new key
        BY_NAME["schema"].read(r, top["schema"][1], "schema")
    values = {name: BY_NAME[name].read(r, vnode, name) for name, (_, vnode) in top.items()}
    for key in KEYS:
        if key.required is not None and key.name not in values:
            r.fail(root, key.name, key.required, f"no {key.name!r} key")
    cluster = _slot(r, root, top, values)
    for name in ("schema", "nodelist", "partition", "nodes"):
        values.pop(name, None)
    profiles, catalog_waves, stacks = values.pop("waves", ((), (), ()))
    parallelism: Parallelism = values["parallelism"]
    if "pipeline_shapes" in values and parallelism.size("PP") <= 1:
        r.fail(
            top["pipeline_shapes"][0],
            "pipeline_shapes",
            "a PP axis > 1 in parallelism (wave 5 tunes pipelines only)",
            f"parallelism {parallelism.text}",
        )
    cell = Cell(path=r.path, slot=cluster, profiles=profiles, catalog_waves=catalog_waves, stacks=stacks, **values)
    if misfit := dcn_misfit(cell):  # refused here, not after the queue wait on the cluster
        r.fail(top["parallelism"][0], "parallelism", *misfit)
    _check_job_names(r, cell, line_of(top["model_tag"][0]))
    _check_file_names(r, cell, line_of(top["model_tag"][0]))
    _check_virtual_stages(r, cell)
    return cell


def _check_virtual_stages(r: N.Ctx, cell: Cell) -> None:
    """A pipeline shape's virtual stages become num_layers_per_pipeline_stage = layers / (stages ×
    V): refuse a V the layer count (overrides.num_decoder_layers) does not give, or cannot be
    computed without, instead of running another shape under this one's name."""
    stages, layers = cell.parallelism.size("PP"), cell.decoder_layers
    for i, shape in enumerate(cell.pipeline_shapes):
        if shape.virtual_stages <= 1:
            continue
        key = f"pipeline_shapes[{i}].virtual_stages"
        if layers is None:
            r.fail(
                shape.line,
                key,
                "overrides.num_decoder_layers set as well (the layers per pipeline stage are computed from it)",
                f"virtual_stages {shape.virtual_stages} and no num_decoder_layers in overrides",
            )
        if layers % (stages * shape.virtual_stages):
            fits = [v for v in range(1, layers // stages + 1) if layers % (stages * v) == 0]
            which = (
                ", ".join(map(str, fits))
                if fits
                else f"none does: {layers} layers do not split evenly over {stages} stages"
            )
            r.fail(
                shape.line,
                key,
                f"a number of virtual stages that divides num_decoder_layers={layers} over {stages} pipeline "
                f"stages ({which})",
                str(shape.virtual_stages),
            )


def _slot(r: N.Ctx, root: Node, top: Fields, values: dict[str, Any]) -> ClusterSlot:
    present = [name for name in ("nodelist", "partition", "nodes") if name in top]
    expected = "exactly one cluster slot: nodelist | partition + nodes | nodes"
    if not present:
        r.fail(root, "nodes", expected, "none of nodelist, partition, nodes")
    if "nodelist" in present and len(present) > 1:
        last = max(present, key=lambda name: line_of(top[name][0]))
        r.fail(top[last][0], last, expected, " and ".join(present))
    if present == ["partition"]:
        r.fail(top["partition"][0], "partition", "nodes alongside partition (partition + nodes)", "no 'nodes' key")
    return ClusterSlot(values.get("nodelist"), values.get("partition"), values.get("nodes"))


# Every backend but maxtext-slurm (whose JOB_NAME check is stricter) names a job's log
# `<job id>-<model>-<run>-<config tag>.log` (local: under the store; sbatch: in the workdir), and
# each model gets `<model>-tuning.zh.md`: one path segment each, at most 255 bytes on ext4.
FILE_NAME_MAX = 255
JOB_ID_ROOM = len("12345678901-") + len(".log")  # an 11-digit Slurm job id
REPORT_SUFFIX = "-tuning.zh.md"  # the longest of a model's report names


def _check_file_names(r: N.Ctx, cell: Cell, model_tag_line: int) -> None:
    """Refuse at collection a model tag so long that a job's log or the report could not be
    created (ENAMETOOLONG after the queue wait, and no report at all)."""
    if cell.backend.kind is BackendKind.MAXTEXT_SLURM:
        return
    baseline = f"{BASELINE}-r{cell.baseline_repeats}" if cell.baseline_repeats > 1 else BASELINE
    gated = [baseline, *(p.name for p in cell.profiles)]
    gated += [c.name for group in cell.catalog_waves for c in C.get(group.catalog).candidates]
    gated += [s.name for s in cell.stacks] + [s.name for s in cell.pipeline_shapes]
    # A run the image gate may re-run on the lock's image is also `<name>-oldimage`.
    run = max([RESTORE_DEFAULT, *(name + J.OLD_IMAGE_SUFFIX for name in gated)], key=len)
    tag = max((t.name for t in cell.config_tags), key=len)
    model = len(cell.model_tag.encode())
    size = max(JOB_ID_ROOM + len(f"{cell.model_tag}-{run}-{tag}".encode()), model + len(REPORT_SUFFIX))
    if size > FILE_NAME_MAX:
        r.fail(
            model_tag_line,
            "model_tag",
            f"a model tag that fits the file names of its jobs and reports ({FILE_NAME_MAX} bytes each)",
            f"{model} bytes, making the longest {size} bytes (<job id>-<model>-{run}-{tag}.log): "
            f"shorten it by {size - FILE_NAME_MAX}",
        )


def _check_job_names(r: N.Ctx, cell: Cell, model_tag_line: int) -> None:
    """Fail early where maxtext-slurm would refuse a submission for its JOB_NAME length
    (cell.jobnames), for every run the sweep and the image gate may submit; pre-flight checks
    again with the model name resolved in the checkout. Other backends have no such limit."""
    if cell.backend.kind is not BackendKind.MAXTEXT_SLURM:
        return
    tag = max((t.name for t in cell.config_tags), key=len)
    ours = ("model_tag", model_tag_line, "xlatune's run", "")  # blame the part the cell controls
    # (name, its arm's stem, gated, evidence run, (key, line, what it is, another way out))
    runs: list[tuple[str, str, bool, bool, tuple[str, int, str, str]]] = [
        (
            f"{BASELINE}-r{cell.baseline_repeats}" if cell.baseline_repeats > 1 else BASELINE,
            BASELINE,
            True,
            False,
            ours,
        ),
        (EVIDENCE, EVIDENCE, False, True, ours),
        (WINNER, WINNER, False, True, ours),
        *[(s.name, s.name, True, False, ours) for s in cell.stacks],
    ]
    if cell.env_file:
        runs.append((RESTORE_DEFAULT, RESTORE_DEFAULT, False, False, ours))
    for group in cell.catalog_waves:
        blame = (
            f"waves.{group.wave}.catalog",
            group.line,
            f"catalog {group.catalog}'s candidate",
            f", or leave catalog {group.catalog} out",
        )
        runs += [(c.name, c.name, True, False, blame) for c in C.get(group.catalog).candidates]
    runs += [(p.name, p.name, True, False, (*r.name_at[p.name][:2], "profile", "")) for p in cell.profiles]
    own = {p.name for p in cell.profiles}
    expected = f"a JOB_NAME of at most {G.JOB_NAME_MAX} bytes (maxtext-slurm's limit)"
    for name, arm, gated, evidence, (key, line, what, also) in runs:
        size, exp_tag, args = J.longest(cell.model_tag, name, tag, arm=arm, gated=gated, evidence=evidence)
        if size <= G.JOB_NAME_MAX:
            continue
        sweep_fits = gated and J.longest(cell.model_tag, name, tag, arm=arm)[0] <= G.JOB_NAME_MAX
        where = f" in the image gate (as {exp_tag!r}, its run on the lock's image)" if sweep_fits else ""
        r.fail(
            line,
            key,
            expected,
            f"{size} bytes for {what} {name!r}{where} "
            f"({J.parts(cell.model_tag, exp_tag, args)}): "
            f"{J.remedy(exp_tag, size - G.JOB_NAME_MAX, own, 'model_tag')}{also}",
        )
