"""Inert flags on the real embedded workload (XLA:CPU): a flag set to its default value compiles to
the baseline's program, so its job is cut right after the compile, before any training step, and
the terminal summary and junit list it. (The decision: tests/unit/test_inert.py.)"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_xlatune.evidence.inert import COMPILED_LINE

pytestmark = pytest.mark.jax

ARGS = ["-v", "-p", "no:cacheprovider", "--xlatune-poll-interval=0.2"]
# vec256 is XLA:CPU's default vector width (-O1, which changes the generated code of most
# kernels, is not inert: tests/integration/test_fingerprint_real.py).
CELL = """\
model_tag: inertreal
nodes: 1
parallelism: FSDP=8
pdbs: 1
steps: 200                      # ~8 s of steps after the compile line: the watcher sees it first
baseline_repeats: 1
overrides: {emb_dim: 64, mlp_dim: 128, num_decoder_layers: 2, max_target_length: 64}
waves:
  2:
    - {name: vec256, xla_flags: [--xla_cpu_prefer_vector_width=256]}
    - {name: opt_o1, xla_flags: [--xla_backend_optimization_level=1]}   # not run here
"""


def stored(store: Path) -> dict[str, dict[str, Any]]:
    lines = (store / "inertreal.jsonl").read_text().splitlines()
    return {e["item"]: e for e in map(json.loads, lines) if e["event"] == "result"}


def test_a_flag_at_its_default_is_cut_after_its_compile_and_listed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    pytester.makefile(".yml", inertreal=CELL)
    result = pytester.runpytest("inertreal.yml", *ARGS, "-k", "baseline or vec256", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2, deselected=3)
    store = pytester.path / ".xlatune"
    results = stored(store)
    base, vec = results["wave1::baseline[default]"], results["wave2::vec256[default]"]
    why = "inert here: compiles to `wave1::baseline[default]`'s program"
    assert vec["inert"] and vec["shared_from"] == base["item"] and vec["reason"] == why
    assert vec["tgs"] == base["tgs"] and not base["inert"]
    events = [json.loads(line) for line in (store / "inertreal.jsonl").read_text().splitlines()]
    cut = next(e["job_id"] for e in events if e["event"] == "inert")
    log = next(store.rglob(f"{cut}-*.log")).read_text()
    assert COMPILED_LINE in log and "completed step: 199," not in log  # cut before its last step
    said = why.replace("[", "[[]")  # fnmatch: a bracket is a character class
    result.stdout.fnmatch_lines(
        [
            f"*wave2::vec256[[]default[]] PASSED * ({said})*",
            f"xlatune: inertreal.yml: inert flags: wave2::vec256[[]default[]] "
            f"(--xla_cpu_prefer_vector_width=256): {said}",
        ]
    )
    props = {
        p.get("name"): p.get("value")
        for case in ET.parse(pytester.path / "junit.xml").iter("testcase")
        if case.get("name") == "vec256[default]"
        for p in case.iter("property")
    }
    assert props["xlatune_inert"] == why
