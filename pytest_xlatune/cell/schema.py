"""Cell schema version 1: tables (keys, owned keys, backend options) and typed YAML node reads."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, SequenceNode

from pytest_xlatune.cell import grammar as G
from pytest_xlatune.cell.model import AXIS_KEYS

SCHEMA_VERSION = 1

TOP_KEYS = (
    "schema", "model_tag", "nodelist", "partition", "nodes", "parallelism", "pdbs", "steps",
    "baseline_repeats", "overrides", "config_tags", "env_file", "waves", "pipeline_shapes",
    "thresholds", "backend", "image", "hardware", "policy",
)
PROFILE_KEYS = ("name", "xla_flags", "env", "overrides")
ENV_FILE_KEYS = ("flag", "env", "image_default")
SHAPE_KEYS = ("microbatches", "virtual_stages")
THRESHOLD_KEYS = ("regression_pct", "win_pct", "bounded_pct", "bounded_profiles", "remeasure")
THRESHOLD_COUNTS = {"bounded_profiles": 1, "remeasure": 0}  # integer keys and their minimum

WAVES = (2, 3, 4)
WAVES_EXPECTED = "a wave number 2, 3 or 4 (wave 5 is pipeline_shapes)"
# A wave is a list of profiles, or a mapping of these keys (at least one of profiles/catalog/stack).
WAVE_KEYS = ("profiles", "catalog", "max", "stack")
WAVE_EXPECTED = "a list of profiles, or a mapping of profiles, catalog, max, stack"
STACK_EXPECTED = "true or an integer >= 2 (how many winning profiles to combine)"

MIN_STEPS = 10
STEPS_EXPECTED = f"an integer >= {MIN_STEPS} (the steady state is taken from steps 5-14)"
MAX_BASELINE_REPEATS = 5

# Run names plan.py gives to the jobs it adds itself; a profile may not take one.
RESERVED_NAMES = ("baseline", "restore_default", "evidence", "best", "winner")
RESERVED_PATTERN = re.compile(r"stack_top[0-9]+")  # the stack run's name

# Passthrough keys every job already sets (submission template, evidence run, launcher).
# A cell may not override them; the value says where the setting belongs instead.
_PROFILER = "only the evidence run profiles"
OWNED_KEYS: dict[str, str] = {
    "steps": "set it with the top-level 'steps' key",
    "per_device_batch_size": "set it with the top-level 'pdbs' key",
    "dataset_type": "tuning runs always use dataset_type=synthetic",
    "profiler": _PROFILER,
    "profiler_steps": _PROFILER,
    "skip_first_n_steps_for_profiler": _PROFILER,
    "base_output_directory": "the launcher sets it",
    "run_name": "the launcher sets it",
    **{key: "set it with the top-level 'parallelism' key" for key in AXIS_KEYS.values()},
}
# `_env_NAME=value` passthrough args become env vars in _train.sh, not MaxText overrides.
ENV_PASSTHROUGH_PREFIX = "_env_"
# Env names a profile may not set: the tool sets them or they have their own key.
OWNED_ENV: dict[str, str] = {
    "XLA_FLAGS": "set XLA flags in the profile's 'xla_flags' list",
    "TUNE_PROFILE": "xlatune sets it to the profile name",
}

BACKEND_KINDS = ("local", "maxtext-slurm", "sbatch")
# Option -> kind of value: "path", "text", "time", "bool", "partition".
BACKEND_OPTIONS: dict[str, dict[str, str]] = {
    "local": {"python": "path"},
    "maxtext-slurm": {"checkout": "path", "time": "time", "ray": "bool", "partition": "partition"},
    "sbatch": {"command": "text", "time": "time", "partition": "partition"},
}
TIME_EXPECTED = "a Slurm time limit HH:MM:SS, MM:SS or minutes"
_TIME = re.compile(r"[0-9]+|[0-9]+:[0-5][0-9]|[0-9]+:[0-5][0-9]:[0-5][0-9]")

PARALLELISM_EXPECTED = "AXIS=N[,AXIS=N...] with AXIS in FSDP|PP|TP and N an integer >= 1"



def is_slurm_time(text: str) -> bool:
    """Tell whether `text` is a time limit this tool passes to --time."""
    return _TIME.fullmatch(text) is not None


def parse_parallelism(text: str) -> tuple[tuple[str, int], ...]:
    """Parse `PP=4,FSDP=2`; raise ValueError(found) naming the offending part."""
    axes: list[tuple[str, int]] = []
    for part in text.split(","):
        axis, eq, size = (s.strip() for s in part.partition("="))
        if not eq or axis not in AXIS_KEYS:
            raise ValueError(f"{part.strip()!r}" if part.strip() else "an empty axis")
        if not re.fullmatch("[0-9]+", size) or int(size) < 1:
            raise ValueError(f"{part.strip()!r}")
        if any(axis == seen for seen, _ in axes):
            raise ValueError(f"{axis} given twice")
        axes.append((axis, int(size)))
    return tuple(axes)


_TAG = "tag:yaml.org,2002:"
_KINDS = {_TAG + kind: kind for kind in ("str", "int", "float", "bool", "null", "map", "seq")}
_KINDS[_TAG + "timestamp"] = "str"  # an unquoted date such as 2024-01-01: keep the text as written
_KIND_NAMES = {"int": "an integer", "float": "a number", "bool": "a boolean"}
Fields = dict[str, tuple[Node, Node]]


def line_of(node: Node) -> int:
    """Return the 1-based line where a node starts."""
    return int(node.start_mark.line) + 1


def kind_of(node: Node) -> str:
    """Return str|int|float|bool|null|map|seq, or "tag" for anything outside plain YAML."""
    return _KINDS.get(node.tag, "tag")


def sub_key(key: str, name: str) -> str:
    """Join a key path: "" + "steps" -> "steps", "backend" + "time" -> "backend.time"."""
    return f"{key}.{name}" if key else name


def show(text: str) -> str:
    """Quote a found text for a one-line message (repr escapes newlines)."""
    return repr(text if len(text) <= 60 else text[:57] + "...")


def describe(node: Node) -> str:
    """Show what a node holds, for the "found" part of a message."""
    kind = kind_of(node)
    if kind == "map":
        return "a mapping"
    if kind == "seq":
        return "a list"
    if kind == "null":
        return "null"
    if kind == "str":
        return show(node.value)
    return f"{node.value} ({_KIND_NAMES.get(kind, kind)})"


def _one_line(text: str) -> bool:
    return all(ch >= " " and ch != "\x7f" for ch in text)


class NodeReader:
    """Typed reads of a composed YAML node tree; the subclass decides what a failure raises."""

    def fail(
        self, at: Node | int, key: str, expected: str, found: str | None = None,
        suggestion: str | None = None,
    ) -> NoReturn:
        """Raise the error for `key` at a node (or a line); `found` defaults to the node shown."""
        raise NotImplementedError

    def check_tags(self, node: Node, key: str, seen: set[int]) -> None:
        """Reject any tag outside plain YAML (`!!python/object`, `!custom`, `<<` merges)."""
        if id(node) in seen:  # aliases share nodes; recursive aliases would loop
            return
        seen.add(id(node))
        if kind_of(node) == "tag":
            tag = node.tag.replace(_TAG, "!!")
            found = "a '<<' merge key" if tag == "!!merge" else f"the tag {tag}"
            self.fail(node, key, "plain YAML values (no tags or merge keys)", found)
        if isinstance(node, MappingNode):
            for knode, vnode in node.value:
                self.check_tags(knode, sub_key(key, str(knode.value)), seen)
                self.check_tags(vnode, sub_key(key, str(knode.value)), seen)
        elif isinstance(node, SequenceNode):
            for i, item in enumerate(node.value):
                self.check_tags(item, f"{key}[{i}]", seen)

    def mapping(
        self, node: Node, key: str, allowed: Sequence[str] | None = None,
        key_kinds: tuple[str, ...] = ("str",), key_expected: str = "a string key",
    ) -> Fields:
        if kind_of(node) != "map":
            self.fail(node, key, "a mapping")
        fields: Fields = {}
        for knode, vnode in node.value:
            if kind_of(knode) not in key_kinds:
                self.fail(knode, key, key_expected)
            name = str(knode.value)
            if allowed is not None and name not in allowed:
                close = difflib.get_close_matches(name, allowed, n=1)
                self.fail(knode, sub_key(key, name), f"one of {', '.join(allowed)}",
                          f"unknown key {name!r}", close[0] if close else None)
            if name in fields:
                first = line_of(fields[name][0])
                self.fail(knode, sub_key(key, name), "each key once",
                          f"{name!r} again (first on line {first})")
            fields[name] = (knode, vnode)
        return fields

    def sequence(self, node: Node, key: str, expected: str = "a list") -> list[Node]:
        if kind_of(node) != "seq":
            self.fail(node, key, expected)
        return list(node.value)

    def construct(self, node: Node, key: str, expected: str) -> Any:
        try:
            return SafeConstructor().construct_object(node)
        except Exception:  # e.g. `!!int abc`: the explicit tag does not fit the text
            self.fail(node, key, expected)

    def string(self, node: Node, key: str, grammar: G.Grammar | None = None,
               expected: str = "text on one line") -> str:
        expected = grammar.expected if grammar else expected
        if kind_of(node) != "str":
            self.fail(node, key, expected)
        text = str(node.value)
        if not (grammar.matches(text) if grammar else text and _one_line(text)):
            self.fail(node, key, expected)
        return text

    def integer(self, node: Node, key: str, low: int, high: int | None = None,
                expected: str | None = None) -> int:
        if expected is None:
            expected = f"an integer from {low} to {high}" if high else f"an integer >= {low}"
        if kind_of(node) != "int":
            self.fail(node, key, expected)
        value = int(self.construct(node, key, expected))
        if value < low or (high is not None and value > high):
            self.fail(node, key, expected)
        return value

    def number(self, node: Node, key: str) -> float:
        expected = "a number > 0"
        if kind_of(node) not in ("int", "float"):
            self.fail(node, key, expected)
        value = float(self.construct(node, key, expected))
        if not (value > 0 and math.isfinite(value)):
            self.fail(node, key, expected)
        return value

    def render(self, node: Node, key: str, grammar: G.Grammar) -> str:
        """Render a scalar as command-line text: numbers as written, booleans as true/false."""
        kind = kind_of(node)
        expected = f"a string, number or boolean ({grammar.expected})"
        if kind == "bool":
            text = "true" if self.construct(node, key, expected) else "false"
        elif kind in ("str", "int", "float"):
            text = str(node.value)
        else:
            self.fail(node, key, expected)
        if not grammar.matches(text):
            self.fail(node, key, grammar.expected)
        return text
