"""The cell as frozen values: what `cell.load_cell` returns and `plan.expand` consumes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

# Every job gets this MaxText argument (the skill: a heartbeat timeout kills long compiles); a
# cell may not set it.
HEARTBEAT_KEY, HEARTBEAT_VALUE = "jax_distributed_heartbeat_timeout_seconds", "99999"
HEARTBEAT_ARG = f"{HEARTBEAT_KEY}={HEARTBEAT_VALUE}"

# MaxText passthrough keys per parallelism axis (xla-tuning skill, "Submission template").
AXIS_KEYS: dict[str, str] = {
    "FSDP": "dcn_fsdp_parallelism",
    "PP": "dcn_pipeline_parallelism",
    "TP": "ici_tensor_parallelism",
}

DEFAULT_STEPS = 15

# Names of the runs plan.expand adds itself; a profile may not take one (nor stack_topN).
BASELINE, RESTORE_DEFAULT, EVIDENCE, BEST, WINNER = "baseline", "restore_default", "evidence", "best", "winner"
RESERVED_NAMES = (BASELINE, RESTORE_DEFAULT, EVIDENCE, BEST, WINNER)
STACK_PREFIX = "stack_top"  # + the number of winners combined


class BackendKind(Enum):
    """Where a cell's jobs run."""

    LOCAL = "local"
    MAXTEXT_SLURM = "maxtext-slurm"
    SBATCH = "sbatch"


@dataclass(frozen=True)
class PluginKind:
    """A backend kind a plugin added (hook pytest_xlatune_backend_kinds): `.value` is its name."""

    value: str


@dataclass(frozen=True)
class Parallelism:
    """Axes in the order written, e.g. (("PP", 4), ("FSDP", 2))."""

    axes: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return math.prod(size for _, size in self.axes)

    def size(self, axis: str) -> int:
        return dict(self.axes).get(axis, 1)

    @property
    def text(self) -> str:
        return ",".join(f"{name}={size}" for name, size in self.axes)

    def overrides(self) -> tuple[tuple[str, str], ...]:
        """MaxText passthrough overrides; unnamed DCN axes are pinned to 1 as the skill does."""
        pinned = {"dcn_fsdp_parallelism": "1", "dcn_pipeline_parallelism": "1"}
        for axis, size in self.axes:
            pinned[AXIS_KEYS[axis]] = str(size)
        return tuple(pinned.items())


@dataclass(frozen=True)
class ClusterSlot:
    """Exactly one of: an explicit nodelist, partition+nodes, or nodes alone."""

    nodelist: str | None = None
    partition: str | None = None
    nodes: int | None = None

    @property
    def text(self) -> str:
        if self.nodelist:
            return f"nodelist={self.nodelist}"
        if self.partition:
            return f"partition={self.partition}+nodes={self.nodes}"
        return f"nodes={self.nodes}"


@dataclass(frozen=True)
class EnvFileEntry:
    """One setting deployed by configs/<MODEL_TAG>.env.sh and its image default.

    `kind` is "xla" (an XLA flag `--xla_x=value`) or "env" (an env var NAME=value).
    `image_default` None for an env var means unset; restore_default then leaves it out.
    """

    kind: str
    name: str
    value: str
    image_default: str | None

    @property
    def deployed(self) -> str:
        return f"{self.name}={self.value}"


@dataclass(frozen=True)
class Profile:
    """A named flag set; XLA flags are appended (last wins), env vars exported after NCCL's."""

    name: str
    wave: int
    xla_flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    overrides: tuple[tuple[str, str], ...] = ()
    line: int = 0


@dataclass(frozen=True)
class CatalogWave:
    """Candidates of a flag catalog (catalog.yml) run as one wave; `max` caps those that run."""

    wave: int
    catalog: str
    max: int | None = None
    line: int = 0


@dataclass(frozen=True)
class Stack:
    """A run of the top-k winning profiles of waves 2..`wave`, combined (resolved at run time)."""

    wave: int
    top: int = 2
    line: int = 0

    @property
    def name(self) -> str:
        return f"{STACK_PREFIX}{self.top}"


@dataclass(frozen=True)
class PipelineShape:
    """Wave 5: microbatches × virtual stages (V) per pipeline stage."""

    microbatches: int
    virtual_stages: int = 1
    line: int = 0

    @property
    def name(self) -> str:
        return f"mb{self.microbatches}_v{self.virtual_stages}"


@dataclass(frozen=True)
class ConfigTag:
    """A comparable model configuration (e.g. MoE sparse vs dense) as passthrough overrides."""

    name: str
    overrides: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Thresholds:
    regression_pct: float = 1.0
    win_pct: float = 5.0
    bounded_profiles: int = 25
    bounded_pct: float = 2.0
    remeasure: int = 2  # extra runs of an ambiguous cross-config check before deciding


@dataclass(frozen=True)
class Backend:
    """How jobs run. `options`: the kind's keys (a plugin kind's as written, checked by its plugin)."""

    kind: BackendKind | PluginKind = BackendKind.LOCAL
    options: tuple[tuple[str, str], ...] = ()

    def option(self, key: str, default: str | None = None) -> str | None:
        return dict(self.options).get(key, default)


@dataclass(frozen=True)
class Cell:
    path: Path
    model_tag: str
    slot: ClusterSlot
    parallelism: Parallelism
    pdbs: int | None = None
    steps: int = DEFAULT_STEPS
    baseline_repeats: int = 2
    config_tags: tuple[ConfigTag, ...] = (ConfigTag("default"),)
    overrides: tuple[tuple[str, str], ...] = ()
    env_file: tuple[EnvFileEntry, ...] = ()
    profiles: tuple[Profile, ...] = ()
    catalog_waves: tuple[CatalogWave, ...] = ()
    stacks: tuple[Stack, ...] = ()
    pipeline_shapes: tuple[PipelineShape, ...] = ()
    thresholds: Thresholds = field(default_factory=Thresholds)
    backend: Backend = field(default_factory=Backend)
    image: str = ""
    hardware: str = ""
    policy: str = ""  # playbook overrides as JSON text (validated by the loader)

    @property
    def primary_config(self) -> ConfigTag:
        return self.config_tags[0]

    def profile(self, name: str) -> Profile | None:
        return next((p for p in self.profiles if p.name == name), None)

    @property
    def decoder_layers(self) -> int | None:
        """The model's layer count when the overrides set it (`num_decoder_layers`, else
        `base_num_decoder_layers`): what a pipeline shape's virtual stages are computed from."""
        overrides = dict(self.overrides)
        layers = overrides.get("num_decoder_layers") or overrides.get("base_num_decoder_layers") or ""
        return int(layers) if layers.isdigit() else None
