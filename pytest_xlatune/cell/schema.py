"""Cell schema version 1: the one table of top-level keys (reader, required or not, what it sets)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from yaml.nodes import Node

from pytest_xlatune.cell import grammar as G
from pytest_xlatune.cell import nodes as N
from pytest_xlatune.cell import sections, waves
from pytest_xlatune.cell.nodes import kind_of

SCHEMA_VERSION = 1
MIN_STEPS = 10
STEPS_EXPECTED = f"an integer from {MIN_STEPS} to 10000000 (the steady state is taken from steps 5-14)"
MAX_BASELINE_REPEATS = 5
# Upper bounds no real cell reaches; past them a number is a typo, not a run to plan.
MAX_NODES = 100_000
MAX_PDBS = 65_536
MAX_STEPS = 10_000_000
LABEL_MAX = 200

Read = Callable[[N.Ctx, Node, str], Any]


@dataclass(frozen=True)
class Key:
    """One top-level cell key: how its node is read, and the expectation named when it is missing
    (None: optional). A new key is a row here plus its Cell field (plan.expand.run_key when it
    changes what a run measures)."""

    name: str
    read: Read
    doc: str
    required: str | None = None


def _schema(r: N.Ctx, node: Node, key: str) -> None:
    N.integer(r, node, key, SCHEMA_VERSION, SCHEMA_VERSION, expected=f"schema version {SCHEMA_VERSION}")


def _text(grammar: G.Grammar) -> Read:
    return lambda r, node, key: N.string(r, node, key, grammar)


def _nodelist(r: N.Ctx, node: Node, key: str) -> str:
    text = N.string(r, node, key, G.NODELIST)
    if backwards := G.backwards_range(text):
        r.fail(node, key, G.NODELIST_LOW_HIGH, f"{text!r} (the range {backwards} runs backwards)")
    return text


def _image(r: N.Ctx, node: Node, key: str) -> str:
    return "" if kind_of(node) == "null" else N.string(r, node, key, G.CONTAINER_IMAGE)


def _label(r: N.Ctx, node: Node, key: str) -> str:
    return "" if kind_of(node) == "null" else N.string(r, node, key, max_len=LABEL_MAX)


KEYS: tuple[Key, ...] = (
    Key("schema", _schema, "the schema version (1)"),
    Key("model_tag", _text(G.MODEL_TAG), "configs/<model_tag>.gpu.yml", required=G.MODEL_TAG.expected),
    Key("nodelist", _nodelist, "cluster slot: fixed nodes"),
    Key("partition", _text(G.PARTITION), "cluster slot: partition (with nodes)"),
    Key("nodes", lambda r, n, k: N.integer(r, n, k, 1, MAX_NODES), "cluster slot: node count"),
    Key("parallelism", sections.parallelism, "mesh axes, e.g. FSDP=8", required=sections.PARALLELISM_EXPECTED),
    Key(
        "pdbs",
        lambda r, n, k: None if kind_of(n) == "null" else N.integer(r, n, k, 1, MAX_PDBS),
        "per_device_batch_size",
    ),
    Key("steps", lambda r, n, k: N.integer(r, n, k, MIN_STEPS, MAX_STEPS, STEPS_EXPECTED), "training steps per run"),
    Key(
        "baseline_repeats", lambda r, n, k: N.integer(r, n, k, 1, MAX_BASELINE_REPEATS), "baseline runs per config tag"
    ),
    Key("overrides", sections.overrides, "MaxText overrides for every run"),
    Key("config_tags", sections.config_tags, "named override sets (wave 6 cross-checks)"),
    Key("env_file", sections.env_file, "the env file's settings (wave 1 restore_default)"),
    Key("waves", waves.waves, "waves 2-4: profiles, catalogs, stacks"),
    Key("pipeline_shapes", sections.pipeline_shapes, "wave 5: microbatches x virtual stages"),
    Key("thresholds", sections.thresholds, "win / regression / bounded percentages"),
    Key("backend", sections.backend, "local | maxtext-slurm | sbatch and its options"),
    Key("image", _image, "container image (maxtext-slurm) or Python interpreter (local, sbatch)"),
    Key("hardware", _label, "hardware label for the report"),
    Key("policy", sections.policy, "playbook overrides, e.g. {rccl_init_flake: {retries: 3}}"),
)
TOP_KEYS = tuple(key.name for key in KEYS)
BY_NAME = {key.name: key for key in KEYS}
