"""The compilation cache on the local backend with the real JAX workload: a repeat of the same
settings loads what the first run compiled (JAX logs the hit, its compile is shorter), and the
store says which cache each run used. (Which runs get which cache: tests/unit/launch/test_compile_cache.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.jax

ARGS = ["-v", "-p", "no:cacheprovider", "--xlatune-poll-interval=0.2"]
CELL = """\
model_tag: cachereal
nodes: 1
parallelism: FSDP=2
pdbs: 1
steps: 10
baseline_repeats: 2
overrides: {emb_dim: 32, mlp_dim: 64, num_decoder_layers: 2, max_target_length: 32}
"""
COMPILED = re.compile(r"^xlatune: compiled train_step \(([\d.]+) s\)$", re.MULTILINE)
HIT = "Persistent compilation cache hit for 'jit_train_step'"


def stored(store: Path) -> dict[str, dict[str, Any]]:
    lines = (store / "cachereal.jsonl").read_text().splitlines()
    return {e["item"]: e for e in map(json.loads, lines) if e["event"] == "result"}


def compile_phase(log: str) -> float:
    """What the workload says its train step's compile took (or its load from the cache)."""
    return float(COMPILED.findall(log)[0])


def test_a_repeat_of_the_same_settings_loads_the_first_runs_executable(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAX_LOG_COMPILES", "1")  # JAX then logs each persistent-cache hit
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    pytester.makefile(".yml", cachereal=CELL)
    first = pytester.runpytest("cachereal.yml", *ARGS, "-k", "baseline and not r2")
    first.assert_outcomes(passed=1, deselected=2)
    run1 = stored(pytester.path / ".xlatune")["wave1::baseline[default]"]
    cache = Path(run1["compile_cache"])
    assert cache.parent.parent == pytester.path / ".xlatune" / "jax-cache" and cache.parent.name == "cachereal"
    entries = sorted(p.name for p in cache.iterdir())
    assert any(name.startswith("jit_train_step-") for name in entries), entries

    second = pytester.runpytest("cachereal.yml", *ARGS, "-k", "baseline")
    second.assert_outcomes(passed=2, deselected=1)  # the first reused, its repeat run now
    run2 = stored(pytester.path / ".xlatune")["wave1::baseline-r2[default]"]
    assert run2["compile_cache"] == run1["compile_cache"] and run2["job_id"] != run1["job_id"]
    log1, log2 = Path(run1["log_path"]).read_text(), Path(run2["log_path"]).read_text()
    assert HIT not in log1 and HIT in log2
    assert compile_phase(log2) < compile_phase(log1)
