"""Property: any bytes in a cell file give either runs (load + expand) or one CellError line,
never another exception. Random and mutated YAML, with a fixed, derandomized example budget so
it takes seconds in CI; one pytester session collects a directory of the nastiest cases."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_xlatune.cell.load import CellError, load_cell
from pytest_xlatune.plan.expand import expand
from pytest_xlatune.triage.playbook_overrides import PolicyError, playbook_from_text

ROOT = Path(__file__).resolve().parents[3]
SEEDS = [
    (ROOT / "tests" / "data" / "cells" / "hybrid_pp4_fsdp2.yml").read_text(),
    "model_tag: demo\nnodes: 1\nparallelism: FSDP=8\nconfig_tags:\n  sparse: {}\nwaves:\n  2:\n"
    "    - name: fast\n      xla_flags: [--xla_gpu_enable_latency_hiding_scheduler=true]\n"
    "policy:\n  rccl_init_flake: {retries: 3}\n",
]
# Pieces that have broken YAML readers: anchors and aliases, merge keys, tags, tabs, flow
# brackets, document markers, control and bidi characters, huge and odd numbers, BOMs, NULs.
FRAGMENTS = [
    "&a ",
    "*a",
    "<<: *a\n",
    "!!python/object/apply:os.system [id]",
    "!env ",
    "\t",
    "[",
    "]",
    "{",
    "}",
    "---\n",
    "...\n",
    "\x1b]0;t\x07",
    "\u202e",
    "\x00",
    "\ufeff",
    "1e400",
    "-.inf",
    ".nan",
    "0x1F",
    "~",
    "? ",
    ": ",
    "- ",
    "|\n  x\n",
    ">-\n",
    "'",
    '"',
    "#",
    "%YAML 1.1\n",
    "9" * 400,
    "é",
    "\r\n",
    "<img src=x>",
    "\\",
    "2024-01-01",
    "yes",
    "null",
]
SETTINGS = settings(
    max_examples=100,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _mutated() -> st.SearchStrategy[str]:
    @st.composite
    def build(draw: st.DrawFn) -> str:
        text = draw(st.sampled_from(SEEDS))
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(text)))
            end = min(len(text), at + draw(st.integers(0, 12)))
            piece = draw(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)))
            text = text[:at] + piece + text[end:]
        return text

    return build()


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10) | st.integers(), inner, max_size=4)
    ),
    max_leaves=12,
)
_KEYS = st.sampled_from(
    [
        "model_tag",
        "nodes",
        "nodelist",
        "partition",
        "parallelism",
        "pdbs",
        "steps",
        "baseline_repeats",
        "config_tags",
        "env_file",
        "waves",
        "pipeline_shapes",
        "thresholds",
        "backend",
        "image",
        "hardware",
        "policy",
        "overrides",
        "schema",
    ]
)


def _structured() -> st.SearchStrategy[str]:
    """Documents with the cell's keys and random values of any shape."""
    return st.dictionaries(_KEYS, _VALUES, max_size=8).map(
        lambda d: yaml.safe_dump({"model_tag": "demo", "nodes": 1, "parallelism": "FSDP=8", **d})
    )


def check(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cell.yml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        cell = load_cell(path)
    except CellError as error:
        message = str(error)
        assert "\n" not in message and message.startswith(f"{path}:"), message
        assert "Traceback" not in message
        return
    assert expand(cell), "a valid cell plans at least its baseline"


@SETTINGS
@given(text=_mutated())
@example(text=SEEDS[1].replace("{retries: 3}", "&a {retries: 3}\n  coord_timeout: *a"))
@example(text="a: &a [x, x]\nb: [*a, *a]\n")
def test_mutated_cells_load_or_fail_on_one_line(tmp_path: Path, text: str) -> None:
    check(tmp_path, text)


@SETTINGS
@given(text=_structured())
def test_structured_random_cells_load_or_fail_on_one_line(tmp_path: Path, text: str) -> None:
    check(tmp_path, text)


_POLICY_KEYS = st.sampled_from(
    [
        "rccl_init_flake",
        "coord_timeout",
        "oom",
        "max_retries_per_job",
        "resume_permitted",
        "max_failed_nodes_per_wave",
        "retries",
        "action",
        "exhausted",
        "stop_on",
        "stop_after",
        "cancel_on_sight",
        "wait_s",
        "recovery",
    ]
)
_POLICY_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_POLICY_KEYS, inner, max_size=3)),
    max_leaves=8,
)


@SETTINGS
@given(data=st.dictionaries(_POLICY_KEYS, _POLICY_VALUES, max_size=4), flow=st.booleans())
def test_policy_text_parses_or_fails_on_one_line(data: dict[str, object], flow: bool) -> None:
    """--xlatune-policy / a cell's policy: a Playbook or one PolicyError line, whatever the values."""
    text = yaml.safe_dump(data, default_flow_style=flow)
    try:
        playbook_from_text(text)
    except PolicyError as error:
        assert "\n" not in str(error), str(error)


NASTY = {
    "alias_bomb": "model_tag: demo\nnodes: 1\nparallelism: FSDP=8\npolicy:\n  a: &a [x, x, x, x, x, x, x, x, x]\n"
    "  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n  c: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
    "escape_codes": 'model_tag: demo\nnodes: 1\nparallelism: FSDP=8\nhardware: "\\e]0;title\\a"\n',
    "binary": "\x00\x01\x02model_tag",
    "tabs": "model_tag: demo\n\tnodes: 1\n",
    "python_tag": "model_tag: !!python/object/apply:os.system [id]\n",
}


def test_collection_of_nasty_cells_is_one_error_line_each(pytester: pytest.Pytester) -> None:
    for name, text in NASTY.items():
        (pytester.path / f"{name}.yml").write_text(text)
    result = pytester.runpytest(*[f"{name}.yml" for name in NASTY], "--collect-only", "-p", "no:cacheprovider")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "INTERNALERROR" not in output and "Traceback" not in output
    result.stdout.fnmatch_lines([f"*{len(NASTY)} errors*"])
    for name in NASTY:
        errors = [line for line in result.stdout.lines if line.startswith(f"{name}.yml:")]
        assert len(errors) == 1, (name, result.stdout.lines)
    assert "\x1b" not in output
