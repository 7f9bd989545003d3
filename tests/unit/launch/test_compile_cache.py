"""The JAX compilation cache of a run: one directory per effective settings (adaptive.cache), none
for evidence runs, for runs that name their own, or under the fixed protocol; what the local and
sbatch launchers export for it (jaxcache.py)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_xlatune.adaptive.cache import cache_dir, request_for
from pytest_xlatune.cell.load import load_cell
from pytest_xlatune.cell.values import Cell, EnvFileEntry
from pytest_xlatune.engine.sweep import Sweep
from pytest_xlatune.launch.base import JobRequest
from pytest_xlatune.launch.local import LocalLauncher, compose_environment
from pytest_xlatune.launch.sbatch import render_script
from pytest_xlatune.plan.expand import RunKind, RunSpec, expand, expand_gate
from pytest_xlatune.plan.request import job_request
from pytest_xlatune.store import ResultStore
from tests.unit.engine.test_poller import ScriptedLauncher

DEMO = Path(__file__).resolve().parents[3] / "cells" / "demo_fsdp8.yml"
THRESHOLDS = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}


@pytest.fixture(scope="module")
def demo() -> Cell:
    return load_cell(DEMO)


def dirs(cell: Cell, image: str = "") -> dict[str, str]:
    return {spec.profile: cache_dir(cell, spec, image) for spec in expand(cell)}


def profile(name: str, **settings: object) -> RunSpec:
    return RunSpec("wave2", name, "default", RunKind.PROFILE, **settings)  # type: ignore[arg-type]


# ---- which directory -------------------------------------------------------------------------


def test_runs_of_the_same_effective_settings_share_one_directory(demo: Cell) -> None:
    d = dirs(demo)
    assert re.fullmatch(r"demo_fsdp8/[0-9a-f]{12}", d["baseline"])
    assert d["baseline"] == d["baseline-r2"]  # the baseline repeat
    baseline = next(s for s in expand(demo) if s.profile == "baseline")
    assert cache_dir(demo, baseline.remeasured(3)) == d["baseline"]  # a control, a confirming run
    assert d["opt_o2"] == d["restore_default"]  # -O2 appended after the env file's -O0 either way
    assert d["o2_no_fastmath"] != d["opt_o2"]


@pytest.mark.parametrize("a, b", [
    (profile("x", xla_flags=("--xla_a=1",)), profile("y", xla_flags=("--xla_a=2",))),  # a flag's value
    (profile("x", xla_flags=("--xla_a=1",)), profile("y", xla_flags=("--xla_a=1", "--xla_b=1"))),  # one more
    (profile("x", env=(("NCCL_X", "1"),)), profile("y", env=(("NCCL_X", "2"),))),  # an env var
    (profile("x"), profile("y", profile_overrides=(("remat_policy", "full"),))),  # a MaxText override
    (profile("x", env=(("NCCL_X", "1"),)), profile("y", profile_overrides=(("_env_NCCL_X", "2"),))),
])  # fmt: skip
def test_any_differing_setting_gives_another_directory(demo: Cell, a: RunSpec, b: RunSpec) -> None:
    assert cache_dir(demo, a) != cache_dir(demo, b)
    assert cache_dir(demo, a) == cache_dir(demo, replace(a, profile="renamed"))  # only settings count


def test_images_and_models_never_share_a_directory(demo: Cell) -> None:
    spec = profile("x", xla_flags=("--xla_a=1",))
    assert cache_dir(demo, spec, "/venvs/new") != cache_dir(demo, spec, "/venvs/old")
    assert cache_dir(demo, spec) != cache_dir(replace(demo, model_tag="other"), spec)
    # The gate's old-image control runs the baseline's settings on the lock's image: its own cache.
    gate = expand_gate(demo, {"default": ("opt_o1", ("--xla_a=1",), (), (), ())}, old_image="/venvs/old")
    old, new = (next(s for s in gate if s.kind is kind) for kind in (RunKind.GATE_OLD_BASELINE, RunKind.BASELINE))
    assert cache_dir(demo, old, "/venvs/new") == cache_dir(demo, new, "/venvs/old")
    assert cache_dir(demo, old, "/venvs/new") != cache_dir(demo, new, "/venvs/new")


def test_evidence_runs_get_none(demo: Cell) -> None:
    specs = expand(demo)
    evidence = next(s for s in specs if s.kind is RunKind.EVIDENCE)
    winner = next(s for s in specs if s.kind is RunKind.WINNER_EVIDENCE)
    source = next(s for s in specs if s.profile == "opt_o2")
    assert cache_dir(demo, evidence) == "" and cache_dir(demo, winner.resolve(source)) == ""
    assert cache_dir(demo, source) != ""  # the same settings outside the evidence run


@pytest.mark.parametrize("where", ["env file", "profile env", "_env_ argument", "enable switch", "maxtext key"])
def test_a_run_whose_own_settings_name_a_cache_gets_none(demo: Cell, where: str) -> None:
    cell, spec = demo, profile("x")
    if where == "env file":
        mine = EnvFileEntry("env", "JAX_COMPILATION_CACHE_DIR", "/mine", None)
        cell = replace(demo, env_file=(*demo.env_file, mine))
    elif where == "profile env":
        spec = profile("x", env=(("JAX_COMPILATION_CACHE_DIR", "/mine"),))
    elif where == "_env_ argument":
        spec = profile("x", profile_overrides=(("_env_JAX_COMPILATION_CACHE_DIR", "/mine"),))
    elif where == "enable switch":
        spec = profile("x", env=(("JAX_ENABLE_COMPILATION_CACHE", "false"),))
    else:
        cell = replace(demo, overrides=(*demo.overrides, ("jax_cache_dir", "/mine")))
    assert cache_dir(cell, spec) == ""
    request = request_for(cell, spec)
    assert request == job_request(cell, spec)  # the user's setting, untouched


def test_the_fixed_protocol_gives_no_run_a_cache(demo: Cell) -> None:
    for spec in expand(demo):
        assert request_for(demo, spec, cache=False) == job_request(demo, spec)
    baseline = expand(demo)[0]
    assert request_for(demo, baseline).compile_cache == cache_dir(demo, baseline) != ""


@pytest.mark.parametrize("fixed", [False, True])
def test_the_sweep_submits_each_run_with_its_cache(demo: Cell, tmp_path: Path, fixed: bool) -> None:
    launcher = ScriptedLauncher(polls_to_finish=1)
    specs = expand(demo)
    sweep = Sweep(
        cell=demo,
        specs=specs,
        store=ResultStore(tmp_path / "s.jsonl"),
        launcher=launcher,
        nodelist="n",
        poll_interval=0.0,
        sleep=lambda s: None,
        fixed_protocol=fixed,
    )
    for spec in specs[:2]:  # the baseline and its repeat
        sweep.run(spec)
    caches = [r.compile_cache for r in launcher.submitted]
    assert caches == (["", ""] if fixed else [cache_dir(demo, specs[0])] * 2)
    submitting = [e for e in sweep.store.events() if e["event"] == "submitting"]
    assert [e.get("compile_cache", "") for e in submitting] == caches


# ---- what the local and sbatch launchers export ----------------------------------------------

REQUEST = JobRequest("demo-baseline-default", "baseline", ("steps=15",), compile_cache="demo_fsdp8/0123456789ab")


def test_local_jobs_get_the_cache_under_the_launchers_root(tmp_path: Path) -> None:
    env = compose_environment({"PATH": "/bin"}, REQUEST, None, tmp_path / "jax-cache")
    assert env["JAX_COMPILATION_CACHE_DIR"] == f"{tmp_path}/jax-cache/demo_fsdp8/0123456789ab"
    assert THRESHOLDS.items() <= env.items() and "JAX_ENABLE_COMPILATION_CACHE" not in env
    plain = compose_environment({"PATH": "/bin"}, replace(REQUEST, compile_cache=""), None, tmp_path)
    assert not any(name.startswith("JAX_") and name != "JAX_PLATFORMS" for name in plain)


def test_a_cache_in_the_local_jobs_environment_wins(tmp_path: Path) -> None:
    env = compose_environment({"JAX_COMPILATION_CACHE_DIR": "/mine"}, REQUEST, None, tmp_path)
    assert env["JAX_COMPILATION_CACHE_DIR"] == "/mine" and "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in env
    launcher = LocalLauncher(tmp_path / "jobs", 1, module="this", cache_root=tmp_path / "c")
    try:
        job = launcher.submit(REQUEST)
        assert job.compile_cache == str(tmp_path / "c" / "demo_fsdp8" / "0123456789ab")
    finally:
        launcher.close()


def test_a_local_evidence_run_turns_the_cache_off(tmp_path: Path) -> None:
    evidence = replace(REQUEST, evidence=True, compile_cache="")
    for base in ({}, {"JAX_COMPILATION_CACHE_DIR": "/mine"}):  # also when the user names one
        env = compose_environment(base, evidence, tmp_path / "dump", tmp_path)
        assert env["JAX_ENABLE_COMPILATION_CACHE"] == "false"


def test_the_sbatch_script_exports_the_cache_and_gives_maxtext_the_same_dir() -> None:
    directory = "/shared/my work/jax-cache/demo_fsdp8/0123456789ab"
    script = render_script(REQUEST, ["python3", "-m", "MaxText.train", "base.yml"], "/shared/o", directory)
    assert "export JAX_COMPILATION_CACHE_DIR='/shared/my work/jax-cache/demo_fsdp8/0123456789ab'\n" in script
    assert all(f"export {name}={value}\n" in script for name, value in THRESHOLDS.items())
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    assert "steps=15 'jax_cache_dir=/shared/my work/jax-cache/demo_fsdp8/0123456789ab' " in srun
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    evidence = render_script(replace(REQUEST, evidence=True, compile_cache=""), ["t"], "/o", "")
    assert "export JAX_ENABLE_COMPILATION_CACHE=false\n" in evidence and "jax_cache" not in evidence.lower()
    assert "JAX_" not in render_script(replace(REQUEST, compile_cache=""), ["t"], "/o", "")


def test_the_workload_takes_maxtexts_jax_cache_dir_key() -> None:
    from pytest_xlatune.workload.args import parse_args

    assert parse_args(["jax_cache_dir=/c"]).jax_cache_dir == "/c" and not parse_args(["jax_cache_dir=/c"]).ignored


def test_a_run_that_dumps_on_its_own_keeps_its_dump(tmp_path: Path) -> None:
    """The program dump of inert-flag fingerprints is added only when the run does not dump
    already: appended after the run's --xla_dump_to it would win (last wins) and move its dump."""
    own = replace(REQUEST, xla_flags=(*REQUEST.xla_flags, f"--xla_dump_to={tmp_path}/mine"))
    env = compose_environment({"PATH": "/bin"}, own, None, program_dir=tmp_path / "program")
    assert f"--xla_dump_to={tmp_path}/mine" in env["XLA_FLAGS"] and "program" not in env["XLA_FLAGS"]
    plain = compose_environment({"PATH": "/bin"}, REQUEST, None, program_dir=tmp_path / "program")
    assert plain["XLA_FLAGS"].split()[-3] == f"--xla_dump_to={tmp_path / 'program'}"
