"""What a lock says it was measured on, and the local pre-flight's probe of an interpreter."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from pytest_xlatune.engine.gate_outputs import measured_on
from pytest_xlatune.launch.environment import parse_probe
from pytest_xlatune.store import ResultStore
from pytest_xlatune.verdict.lock import Lock, LockedRecipe, dumps, load_lock, lock_change

RECIPE = LockedRecipe(
    config_tag="default",
    profile="fast",
    xla_flags=("--xla_a=1",),
    env=(),
    overrides=(),
    tgs=1100.0,
    ci_low_pct=9.0,
    ci_high_pct=11.0,
    baseline_tgs=1000.0,
    delta_pct=10.0,
    job_ids=("6",),
)
LOCK = Lock(
    model_tag="m",
    parallelism="FSDP=8",
    image="",
    nodelist="localhost",
    date="2026-12-03",
    recipes=(RECIPE,),
    measured_on="Python 3.11.7, JAX 0.4.35 (/venv/bin/python)",
)


def test_the_lock_keeps_measured_on_and_an_older_lock_without_it_loads(tmp_path: Path) -> None:
    path = tmp_path / "c.lock.json"
    path.write_text(dumps(LOCK))
    assert load_lock(path) == LOCK
    data = json.loads(path.read_text())
    del data["measured_on"]
    path.write_text(json.dumps(data))
    assert load_lock(path).measured_on == ""


def test_the_same_recipe_on_a_new_interpreter_rewrites_the_lock_saying_why() -> None:
    newer = dataclasses.replace(LOCK, measured_on="Python 3.12.3, JAX 0.4.38 (/new/bin/python)")
    change, why = lock_change(LOCK, newer, [])
    assert change and why == (
        "the recipe on file (fast [default] +10.00 % (job 6)), now measured on "
        "Python 3.12.3, JAX 0.4.38 (/new/bin/python)"
    )
    same = (False, "the sweep found the recipe on file (fast [default] +10.00 % (job 6))")
    assert lock_change(LOCK, LOCK, []) == same


def test_measured_on_is_the_probed_interpreter_else_the_maxtext_image(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "s.jsonl")
    assert measured_on(store, "") == ""
    store.append("inventory", container_env={"path": "/ck/container_env.sh", "DOCKER_IMAGE": "rocm/jax:26.1"})
    assert measured_on(store, "") == "image rocm/jax:26.1"
    assert measured_on(store, "rocm/jax:26.2") == "image rocm/jax:26.2"  # --xlatune-image
    store.append("environment", images={"": "Python 3.11.7, JAX 0.4.35 (/venv/bin/python)"})
    assert measured_on(store, "") == "Python 3.11.7, JAX 0.4.35 (/venv/bin/python)"


def test_the_probe_answer_parses_into_one_line_problems() -> None:
    ok = parse_probe("/v/bin/python", "pytest_xlatune.workload", 0, "xlatune-probe 3.11.7 0.4.35 ok\n", "")
    assert (ok.problem, ok.measured_on) == ("", "Python 3.11.7, JAX 0.4.35 (/v/bin/python)")
    missing = parse_probe("/n/bin/python", "pytest_xlatune.workload", 0, "xlatune-probe 3.12.3 - missing\n", "")
    assert missing.problem == "/n/bin/python (Python 3.12.3) cannot import the workload module pytest_xlatune.workload"
    assert missing.measured_on == "Python 3.12.3, no JAX (/n/bin/python)"
    # PYTHONPATH lets a system python import the workload, but it has no JAX: every job would fail.
    nojax = parse_probe("/usr/bin/python3", "pytest_xlatune.workload", 0, "xlatune-probe 3.11.2 - ok\n", "")
    assert (
        nojax.problem == "/usr/bin/python3 (Python 3.11.2) has no JAX, which the workload pytest_xlatune.workload needs"
    )
    assert parse_probe("/p", "my_trainer", 0, "xlatune-probe 3.11.2 - ok\n", "").problem == ""  # not ours to judge
    gone = parse_probe("/gone/python", "m", 127, "", "bash: /gone/python: No such file or directory\n")
    assert gone.problem == "/gone/python does not start (bash: /gone/python: No such file or directory)"
    # A bare name is looked up in PATH: a file of that name in the directory pytest runs in is not
    # found (`--xlatune-image=slow-python`), and the line says how to name it.
    bare = parse_probe("slow-python", "m", 127, "", "bash: line 1: slow-python: command not found\n")
    assert bare.problem.startswith("slow-python does not start (bash: line 1: slow-python: command not found; ")
    assert "write ./slow-python for a file in this directory)" in bare.problem
