"""The JOB_NAME table of issue 10, on the real upstream maxtext-slurm checkout (no Slurm needed).

For every upstream config × FSDP=8, FSDP=2, PP=8, TP=8, PP=4,FSDP=2 × pdbs on/off × the skill's
MoE config-tag overrides, the tool's own request builder (cell → plan → compose → launcher)
makes every submission the sweep may make (baselines, restore_default, evidence, catalog
candidates, pipeline shapes, cross-config, winner evidence, a stack, and the image gate of a lock
on that stack: baselines, recipe and their old-image controls); the real
`utils/parse_job_args.sh` of the snapshot then derives each JOB_NAME and must accept it.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_xlatune.cell.grammar import JOB_NAME_MAX
from pytest_xlatune.cell.load import load_cell
from pytest_xlatune.launch.base import JobRequest
from pytest_xlatune.launch.maxtext.launcher import MaxTextSlurmLauncher
from pytest_xlatune.launch.preflight import PreflightError
from pytest_xlatune.launch.slurm_jobs import SlurmPlacement
from pytest_xlatune.plan.expand import RunKind, RunSpec, expand, expand_gate
from pytest_xlatune.plan.request import job_request, possible_requests
from pytest_xlatune.slurm.client import SlurmClient
from pytest_xlatune.transport.base import LocalTransport
from tests.integration.upstream import upstream_checkout

PARALLELISMS = {"FSDP=8": "fsdp", "FSDP=2": "fsdp", "PP=8": "pp", "TP=8": "tp", "PP=4,FSDP=2": "hybrid"}
OLD_IMAGE = "registry.example.com/rocm/jax-maxtext:2026.01-old"
MOE_TAGS = (
    "config_tags:\n  moe: {sparse_matmul: true, use_turbo_grouped_gemm: true, use_deepep_dispatch: true}\n"
    "  dense: {sparse_matmul: false}\n"
)


def cell_text(model: str, parallelism: str, pdbs: bool, checkout: Path) -> str:
    shapes = (
        "pipeline_shapes:\n  - {microbatches: 16, virtual_stages: 2}\noverrides: {num_decoder_layers: 64}\n"
        if "PP" in parallelism
        else ""
    )
    return (
        f"model_tag: {model}\nnodelist: node[01-08]\nparallelism: {parallelism}\n"
        + ("pdbs: 2\n" if pdbs else "")
        + MOE_TAGS
        + shapes
        + "env_file:\n  - {flag: --xla_gpu_all_gather_combine_threshold_bytes=1073741824, image_default: '0'}\n"
        + f"waves:\n  2: {{catalog: {PARALLELISMS[parallelism]}}}\n"
        + "  3:\n    - {name: ag_combine_1g_remat_full, xla_flags: [--xla_gpu_enable_pipelined_all_gather=true],"
        + " overrides: {remat_policy: full}}\n  4: {stack: 3}\n"
        + f"backend: {{kind: maxtext-slurm, checkout: {checkout}, partition: mi355}}\n"
    )


def job_names(checkout: Path, argvs: list[list[str]]) -> list[str]:
    """JOB_NAME as the snapshot's own utils/parse_job_args.sh derives it, for each submit argv."""
    script = (
        'SCRIPT_DIR="$1"; shift\nwhile IFS= read -r line; do\n  eval "set -- $line"\n'
        '  ( source "$SCRIPT_DIR/utils/parse_job_args.sh" >/dev/null 2>&1 && echo "$JOB_NAME" || echo "REFUSED" )\n'
        "done\n"
    )
    lines = "".join(shlex.join(argv[argv.index("./submit.sh") + 1 :]) + "\n" for argv in argvs)
    proc = subprocess.run(
        ["bash", "-c", script, "_", str(checkout)], input=lines, capture_output=True, text=True, check=True, timeout=600
    )
    return proc.stdout.splitlines()


def test_every_submission_of_every_upstream_config_fits_job_name(tmp_path: Path) -> None:
    checkout = upstream_checkout(tmp_path)
    models = sorted(p.name.removesuffix(".gpu.yml") for p in (checkout / "configs").glob("*.gpu.yml"))
    assert len(models) == 17
    transport = LocalTransport()
    argvs: dict[tuple[str, ...], str] = {}
    kinds: set[str] = set()
    for model in models:
        for parallelism in PARALLELISMS:
            for pdbs in (False, True):
                path = tmp_path / f"{model}-{len(argvs)}.yml"
                path.write_text(cell_text(model, parallelism, pdbs, checkout))
                cell = load_cell(path)
                specs = expand(cell)
                launcher = MaxTextSlurmLauncher(
                    transport,
                    SlurmClient(transport),
                    str(checkout),
                    SlurmPlacement("node[01-08]", 8, "mi355"),
                    model,
                    sweep_id="table.1",
                    cell=str(path),
                )
                launcher.prepare()
                try:
                    kinded = [(r, _kind(r, specs)) for r in possible_requests(cell, specs)]
                    stack = next(s for s in specs if s.kind is RunKind.STACK)
                    sources = [s for s in specs if s.kind is RunKind.PROFILE][:3]
                    combined = stack.combine(sources)
                    kinded.append((job_request(cell, combined), "stack"))
                    # The image gate of a lock whose recipe is that stack, each run beside its
                    # control on the lock's image.
                    recipe = (combined.profile, combined.xla_flags, combined.env, combined.profile_overrides, ())
                    gate = expand_gate(cell, {t.name: recipe for t in cell.config_tags}, old_image=OLD_IMAGE)
                    kinded += [(job_request(cell, g), g.kind.value) for g in gate]
                    launcher.check_requests([r for r, _ in kinded])  # the pre-flight: raises if one cannot fit
                    for request, kind in kinded:
                        kinds.add(kind)
                        argvs[tuple(launcher.argv_for(request))] = f"{model} {parallelism} pdbs={pdbs} {kind}"
                finally:
                    launcher.close()
    assert kinds >= {
        "baseline",
        "restore_default",
        "evidence",
        "profile",
        "pipeline_shape",
        "cross_config",
        "winner_evidence",
        "stack",
        "gate_recipe",
        "gate_old_baseline",
        "gate_old_recipe",
    }
    names = job_names(checkout, [list(a) for a in argvs])
    assert len(names) == len(argvs)
    refused = [where for name, where in zip(names, argvs.values()) if name == "REFUSED"]
    assert not refused
    longest = max(len(n.encode()) for n in names)
    print(f"JOB_NAME table: {len(argvs)} distinct submissions, longest {longest} bytes: {max(names, key=len)}")
    assert longest <= JOB_NAME_MAX
    assert all(n.startswith("JAX-") and "-_env_TUNE_PROFILE_" in n for n in names)


def _kind(request: JobRequest, specs: list[RunSpec]) -> str:
    spec = next((s for s in specs if s.profile == request.profile and s.config_tag == request.config_tag), None)
    return spec.kind.value if spec is not None else "stack"


REAL_CELLS = sorted(
    p for p in (Path(__file__).resolve().parents[2] / "cells").glob("*.yml") if "kind: maxtext-slurm" in p.read_text()
)


@pytest.mark.parametrize("cell_file", REAL_CELLS, ids=[p.name for p in REAL_CELLS])
def test_example_real_cluster_cells_pass_preflight_against_upstream_as_they_are(
    tmp_path: Path, cell_file: Path
) -> None:
    """Only `backend.checkout` (and the nodelist, not contacted here) is the user's."""
    cell = load_cell(cell_file)
    checkout = upstream_checkout(tmp_path)
    transport = LocalTransport()
    launcher = MaxTextSlurmLauncher(
        transport,
        SlurmClient(transport),
        str(checkout),
        SlurmPlacement(cell.slot.nodelist, 8, None),
        cell.model_tag,
        sweep_id="example.1",
        cell=str(cell_file),
    )
    before = (checkout / "train_env.sh").read_bytes()
    config = checkout / "configs" / f"{cell.model_tag}.gpu.yml"
    if not config.exists():  # a model upstream lacks (qwen3-32b): pre-flight says what to add, from where
        with pytest.raises(
            PreflightError,
            match=rf"add configs/{re.escape(cell.model_tag)}\.gpu\.yml, "
            r"starting from (configs/\S+\.gpu\.yml)",
        ) as refused:
            launcher.prepare()
        nearest = re.search(r"starting from (configs/\S+\.gpu\.yml)", str(refused.value))
        assert nearest is not None
        shutil.copy(checkout / nearest.group(1), config)  # what the user does, as the message says
    launcher.prepare()
    launcher.check_requests(possible_requests(cell, expand(cell)))
    assert launcher.model_name == cell.model_tag  # an upstream config, by its exact name
    launcher.close()
    assert (checkout / "train_env.sh").read_bytes() == before
