"""Cell schema, the sections: overrides, env, flags, env file, config tags, shapes, thresholds, backend."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from typing import Any

import yaml
from yaml.nodes import Node

from pytest_xlatune import safeyaml
from pytest_xlatune.cell import grammar as G
from pytest_xlatune.cell import nodes as N
from pytest_xlatune.cell.nodes import kind_of, line_of, show, sub_key
from pytest_xlatune.cell.values import (
    AXIS_KEYS,
    Backend,
    BackendKind,
    ConfigTag,
    EnvFileEntry,
    Parallelism,
    PipelineShape,
    PluginKind,
    Thresholds,
)
from pytest_xlatune.triage.playbook_overrides import PolicyError, playbook_from_mapping

ENV_FILE_KEYS = ("flag", "env", "image_default")
SHAPE_KEYS = ("microbatches", "virtual_stages")
SHAPE_MAX = 65536
THRESHOLD_KEYS = ("regression_pct", "win_pct", "bounded_pct", "bounded_profiles", "remeasure")
THRESHOLD_COUNTS = {"bounded_profiles": 1, "remeasure": 0}  # integer keys and their minimum
THRESHOLD_COUNT_MAX = 1000  # more profiles or remeasures than any sweep runs: a typo
THRESHOLD_PCT_MAX = 100.0  # a percentage of TGS: a regression past 100 % cannot happen

# Passthrough keys every job already sets (submission template, evidence run, launcher).
# A cell may not override them; the value says where the setting belongs instead.
_PROFILER = "only the evidence run profiles"
OWNED_KEYS: dict[str, str] = {
    "steps": "set it with the top-level 'steps' key",
    "per_device_batch_size": "set it with the top-level 'pdbs' key",
    "pdbs": "pdbs is xlatune's name for per_device_batch_size: set it with the top-level 'pdbs' key",
    "dataset_type": "tuning runs always use dataset_type=synthetic",
    "profiler": _PROFILER,
    "profiler_steps": _PROFILER,
    "skip_first_n_steps_for_profiler": _PROFILER,
    "base_output_directory": "the launcher sets it",
    "run_name": "the launcher sets it",
    **dict.fromkeys(AXIS_KEYS.values(), "set it with the top-level 'parallelism' key"),
}
# `_env_NAME=value` passthrough args become env vars in _train.sh, not MaxText overrides.
ENV_PASSTHROUGH_PREFIX = "_env_"
# Env names a profile may not set: the tool sets them or they have their own key.
OWNED_ENV: dict[str, str] = {
    "XLA_FLAGS": "set XLA flags in the profile's 'xla_flags' list",
    "TUNE_PROFILE": "xlatune sets it to the profile name",
}

BACKEND_KINDS = tuple(kind.value for kind in BackendKind)  # local, maxtext-slurm, sbatch
# Option -> kind of value: "path", "text", "time", "bool", "partition".
BACKEND_OPTIONS: dict[str, dict[str, str]] = {
    "local": {"python": "path"},
    "maxtext-slurm": {"checkout": "path", "time": "time", "ray": "bool", "partition": "partition"},
    "sbatch": {"command": "text", "time": "time", "partition": "partition"},
}

PARALLELISM_EXPECTED = "AXIS=N[,AXIS=N...] with AXIS in FSDP|PP|TP and N an integer >= 1"


def parse_parallelism(text: str) -> tuple[tuple[str, int], ...]:
    """Parse `PP=4,FSDP=2`; raise ValueError(found) naming the offending part."""
    axes: list[tuple[str, int]] = []
    for part in text.split(","):
        axis, eq, size = (s.strip() for s in part.partition("="))
        if not eq or axis not in AXIS_KEYS:
            raise ValueError(N.show(part.strip()) if part.strip() else "an empty axis")
        if not re.fullmatch("[0-9]{1,9}", size) or int(size) < 1:  # int() of 4301 digits raises
            raise ValueError(N.show(part.strip()))
        if any(axis == seen for seen, _ in axes):
            raise ValueError(f"{axis} given twice")
        axes.append((axis, int(size)))
    return tuple(axes)


def _pairs(
    r: N.Ctx,
    node: Node,
    key: str,
    names: G.Grammar,
    values: G.Grammar,
    owned: dict[str, str],
    what: str,
    refused_prefix: str = "",
) -> tuple[tuple[str, str], ...]:
    """A mapping of NAME: value; names in `owned` are refused, saying where they belong."""
    pairs = []
    for name, (knode, vnode) in N.mapping(r, node, key).items():
        sub = sub_key(key, name)
        if not names.matches(name):
            r.fail(knode, sub, names.expected, show(name), G.suggestion(names, name))
        if name in owned:
            r.fail(knode, sub, f"{what} xlatune does not own ({owned[name]})", show(name))
        if refused_prefix and name.startswith(refused_prefix):
            r.fail(knode, sub, "a MaxText key (set env vars in a profile's env)", show(name))
        pairs.append((name, N.render(r, vnode, sub, values)))
    return tuple(pairs)


def overrides(r: N.Ctx, node: Node, key: str) -> tuple[tuple[str, str], ...]:
    return _pairs(r, node, key, G.OVERRIDE_KEY, G.OVERRIDE_VALUE, OWNED_KEYS, "a key", ENV_PASSTHROUGH_PREFIX)


def env(r: N.Ctx, node: Node, key: str) -> tuple[tuple[str, str], ...]:
    return _pairs(r, node, key, G.ENV_NAME, G.ENV_VALUE, OWNED_ENV, "an env var")


def xla_flags(r: N.Ctx, node: Node, key: str) -> tuple[str, ...]:
    flags: list[str] = []
    first: dict[str, int] = {}
    if kind_of(node) == "str" and G.XLA_FLAG.matches(str(node.value).strip()):  # one flag, not a list
        r.fail(node, key, "a list of XLA flags", suggestion=f"[{str(node.value).strip()}]")
    for i, item in enumerate(N.sequence(r, node, key, "a list of XLA flags")):
        flag = N.string(r, item, f"{key}[{i}]", G.XLA_FLAG)
        name = G.split_xla_flag(flag)[0]
        if name in first:
            r.fail(
                item,
                f"{key}[{i}]",
                "each XLA flag once per profile (XLA keeps the last)",
                f"{name} again (first at {key}[{first[name]}])",
            )
        first[name] = i
        flags.append(flag)
    return tuple(flags)


def env_file(r: N.Ctx, node: Node, key: str) -> tuple[EnvFileEntry, ...]:
    entries: list[EnvFileEntry] = []
    first: dict[str, int] = {}
    for i, item in enumerate(N.sequence(r, node, key, "a list of env-file entries")):
        sub = f"{key}[{i}]"
        fields = N.mapping(r, item, sub, ENV_FILE_KEYS)
        forms = [form for form in ("flag", "env") if form in fields]
        if len(forms) != 1:
            r.fail(item, sub, "exactly one of 'flag' or 'env'", " and ".join(forms) or "neither")
        form = forms[0]
        if "image_default" not in fields:
            r.fail(
                item,
                sub_key(sub, "image_default"),
                "the image's default value (null for an env var the image leaves unset)",
                "no 'image_default' key",
            )
        text_node, default_node = fields[form][1], fields["image_default"][1]
        default: str | None
        text_key, default_key = sub_key(sub, form), sub_key(sub, "image_default")
        if form == "flag":
            name, value = G.split_xla_flag(N.string(r, text_node, text_key, G.XLA_FLAG))
            if kind_of(default_node) == "null":  # XLA has no "unset": last-wins takes a value
                r.fail(
                    default_node,
                    default_key,
                    "the flag's value in the image (restore_default "
                    "appends the flag at it; null unsets only an env entry)",
                )
            default = N.render(r, default_node, default_key, G.XLA_FLAG_VALUE)
        else:
            expected = f"NAME=value ({G.ENV_NAME.expected}; value {G.ENV_VALUE.expected})"
            text = N.string(r, text_node, text_key, expected=expected, max_len=None)  # bounded by the grammars
            name, eq, value = text.partition("=")
            if not (eq and G.ENV_NAME.matches(name) and G.ENV_VALUE.matches(value)):
                meant = G.suggestion(G.ENV_NAME, name) if eq and G.ENV_VALUE.matches(value.strip()) else None
                r.fail(text_node, text_key, expected, suggestion=f"{meant}={value.strip()}" if meant else None)
            default = None if kind_of(default_node) == "null" else N.render(r, default_node, default_key, G.ENV_VALUE)
        if name in first:
            r.fail(text_node, text_key, "each setting once", f"{name} again (first on line {first[name]})")
        first[name] = line_of(text_node)
        entries.append(EnvFileEntry("xla" if form == "flag" else "env", name, value, default))
    return tuple(entries)


def config_tags(r: N.Ctx, node: Node, key: str) -> tuple[ConfigTag, ...]:
    tags = []
    for name, (knode, vnode) in N.mapping(r, node, key).items():
        if not G.NAME.matches(name):
            r.fail(knode, sub_key(key, name), G.NAME.expected, show(name))
        empty = kind_of(vnode) == "null"
        tags.append(ConfigTag(name, () if empty else overrides(r, vnode, sub_key(key, name))))
    if not tags:
        r.fail(node, key, "at least one config tag (name: {overrides})", "an empty mapping")
    return tuple(tags)


def pipeline_shapes(r: N.Ctx, node: Node, key: str) -> tuple[PipelineShape, ...]:
    shapes: list[PipelineShape] = []
    for i, item in enumerate(N.sequence(r, node, key, "a list of pipeline shapes")):
        sub = f"{key}[{i}]"
        fields = N.mapping(r, item, sub, SHAPE_KEYS)
        if "microbatches" not in fields:
            r.fail(item, sub_key(sub, "microbatches"), "an integer >= 1", "no 'microbatches' key")
        # Both name the run (`mb<microbatches>_v<virtual stages>`): bounded, as a name is.
        mb = N.integer(r, fields["microbatches"][1], sub_key(sub, "microbatches"), 1, SHAPE_MAX)
        v = 1
        if "virtual_stages" in fields:
            v = N.integer(r, fields["virtual_stages"][1], sub_key(sub, "virtual_stages"), 1, SHAPE_MAX)
        shape = PipelineShape(mb, v, line=line_of(item))
        twin = next((s for s in shapes if (s.microbatches, s.virtual_stages) == (mb, v)), None)
        if twin:
            r.fail(
                item, sub, "each (microbatches, virtual_stages) once", f"{shape.name} again (first on line {twin.line})"
            )
        shapes.append(shape)
    return tuple(shapes)


def thresholds(r: N.Ctx, node: Node, key: str) -> Thresholds:
    values: dict[str, Any] = {}
    for name, (_, vnode) in N.mapping(r, node, key, THRESHOLD_KEYS).items():
        sub = sub_key(key, name)
        if name in THRESHOLD_COUNTS:
            values[name] = N.integer(r, vnode, sub, THRESHOLD_COUNTS[name], THRESHOLD_COUNT_MAX)
        else:
            values[name] = N.number(r, vnode, sub, THRESHOLD_PCT_MAX)
    return Thresholds(**values)


def backend(r: N.Ctx, node: Node, key: str) -> Backend:
    if N.kind_of(node) == "str" and str(node.value) in (*BACKEND_KINDS, *r.kinds):
        r.fail(node, key, "a mapping such as {kind: local}", suggestion=f"{{kind: {node.value}}}")
    fields = N.mapping(r, node, key)
    kind = "local"
    if "kind" in fields:
        known = (*BACKEND_KINDS, *sorted(r.kinds))
        kind_node, kinds = fields["kind"][1], f"one of {', '.join(known)}"
        kind = N.string(r, kind_node, "backend.kind", expected=kinds)
        if kind not in known:
            close = difflib.get_close_matches(kind, known, n=1)
            r.fail(kind_node, "backend.kind", kinds, suggestion=close[0] if close else None)
    if kind in r.kinds:
        return plugin_backend(r, fields, key, kind, r.kinds[kind])
    allowed = BACKEND_OPTIONS[kind]
    options = []
    for name, (knode, vnode) in fields.items():
        sub = sub_key(key, name)
        if name == "kind":
            continue
        if name not in allowed:
            close = difflib.get_close_matches(name, list(allowed), n=1)
            r.fail(
                knode,
                sub,
                f"an option of backend kind {kind}: {', '.join(allowed)}",
                f"unknown option {name!r}",
                close[0] if close else None,
            )
        options.append((name, option(r, vnode, sub, allowed[name])))
    return Backend(BackendKind(kind), tuple(sorted(options)))


def plugin_backend(r: N.Ctx, fields: N.Fields, key: str, kind: str, check: Callable[[str, str], str | None]) -> Backend:
    """A plugin kind's keys, one-line scalars as written, each checked by the plugin."""
    options = []
    for name, (_, vnode) in fields.items():
        if name == "kind":
            continue
        sub = sub_key(key, name)
        if kind_of(vnode) not in ("str", "int", "float", "bool"):
            r.fail(vnode, sub, f"a value on one line (backend kind {kind})")
        value = N.string(r, vnode, sub, expected="a value on one line") if kind_of(vnode) == "str" else str(vnode.value)
        if (expected := check(name, value)) is not None:
            r.fail(vnode, sub, expected, f"{value!r} (checked by the plugin of backend kind {kind})")
        options.append((name, value))
    return Backend(PluginKind(kind), tuple(sorted(options)))


def option(r: N.Ctx, node: Node, key: str, kind: str) -> str:
    if kind == "bool":
        if kind_of(node) != "bool":
            r.fail(node, key, "true or false")
        return "true" if N.construct(r, node, key, "true or false") else "false"
    if kind == "time":
        # Unquoted 45:00 is a YAML 1.1 base-60 integer (2700); the text as written is wanted.
        if kind_of(node) not in ("str", "int") or not G.SLURM_TIME.matches(str(node.value)):
            r.fail(node, key, G.SLURM_TIME_EXPECTED)
        return str(node.value)
    if kind == "partition":
        return N.string(r, node, key, G.PARTITION)
    what = "a path" if kind == "path" else "text"
    return N.string(r, node, key, expected=f"{what} on one line")


def parallelism(r: N.Ctx, node: Node, key: str) -> Parallelism:
    text = N.string(r, node, key, expected=PARALLELISM_EXPECTED)
    try:
        return Parallelism(parse_parallelism(text))
    except ValueError as exc:
        meant = re.sub(r"\s+", "", text).upper().replace(":", "=")
        try:
            parse_parallelism(meant)
        except ValueError:
            meant = ""
        r.fail(node, key, PARALLELISM_EXPECTED, str(exc), meant or None)


def policy(r: N.Ctx, node: Node, key: str) -> str:
    """Playbook overrides (see triage/playbook.py), validated here, kept as JSON text."""
    expected = "playbook overrides (docs/reference/failures.md)"
    try:
        raw = safeyaml.construct(node)
    except yaml.MarkedYAMLError as exc:  # `!!int abc`, an unhashable key: at its line
        mark = exc.problem_mark or exc.context_mark
        r.fail(mark.line + 1 if mark else node, key, expected, safeyaml.problem(exc))
    try:
        playbook_from_mapping(raw, source=key)
    except PolicyError as error:
        r.fail(node, key, expected, str(error))
    return json.dumps(raw, sort_keys=True)
