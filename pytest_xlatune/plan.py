"""Expand a cell into the ordered runs of a sweep (pure; ids are stable across runs)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from enum import Enum

from .model import Cell, ConfigTag, EnvFileEntry

Pairs = tuple[tuple[str, str], ...]

BASELINE = "baseline"
RESTORE_DEFAULT = "restore_default"
EVIDENCE = "evidence"
BEST = "best"


class RunKind(Enum):
    """What a run measures; decides how its result is judged."""

    BASELINE = "baseline"
    RESTORE_DEFAULT = "restore_default"
    EVIDENCE = "evidence"
    PROFILE = "profile"
    PIPELINE_SHAPE = "pipeline_shape"
    CROSS_CONFIG = "cross_config"
    GATE_RECIPE = "gate_recipe"


@dataclass(frozen=True)
class RunSpec:
    """One job of the sweep: what to append on top of the deployed environment.

    `xla_flags` are appended after the env file's flags (XLA flags are last-wins), `env`
    is exported after everything else, `unset_env` names env-file vars restored to unset.
    A CROSS_CONFIG run has no flags until `resolve` fills them from the best profile.
    """

    wave: str
    profile: str
    config_tag: str
    kind: RunKind
    xla_flags: tuple[str, ...] = ()
    env: Pairs = ()
    unset_env: tuple[str, ...] = ()
    config_overrides: Pairs = ()
    profile_overrides: Pairs = ()
    evidence: bool = False
    resolved_from: str = ""
    repeat: int = 0  # re-measurements of the same run get their own key (and job)
    line: int = 0

    @property
    def overrides(self) -> Pairs:
        """Passthrough overrides: the config tag's, then the profile's (later keys win)."""
        merged = dict(self.config_overrides)
        merged.update(self.profile_overrides)
        return tuple(merged.items())

    @property
    def name(self) -> str:
        """The pytest item name, e.g. `wave2::ag_combine_1g[sparse]`."""
        return f"{self.wave}::{self.profile}[{self.config_tag}]"

    @property
    def exploratory(self) -> bool:
        """Runs a stop condition may skip (waves 2-5); baselines and cross-checks always run."""
        return self.kind in (RunKind.PROFILE, RunKind.PIPELINE_SHAPE)

    @property
    def needs_resolution(self) -> bool:
        return self.kind is RunKind.CROSS_CONFIG and not self.resolved_from

    def remeasured(self, repeat: int) -> RunSpec:
        """The same run measured again (a new job, stored under its own key)."""
        return replace(self, repeat=repeat)

    def resolve(self, source: RunSpec) -> RunSpec:
        """Give a cross-config run the flags of `source` (the best profile of the primary tag)."""
        return replace(
            self,
            xla_flags=source.xla_flags,
            env=source.env,
            unset_env=source.unset_env,
            profile_overrides=source.profile_overrides,
            resolved_from=source.profile,
        )


def run_key(cell: Cell, spec: RunSpec, nodelist: str, image: str = "") -> str:
    """Identity of a measurement: same key ⇒ a stored result can be reused."""
    payload = {
        "model_tag": cell.model_tag,
        "parallelism": cell.parallelism.text,
        "pdbs": cell.pdbs,
        "steps": cell.steps,
        "overrides": cell.overrides,
        "env_file": [(e.kind, e.name, e.value) for e in cell.env_file],
        "backend": cell.backend.kind.value,
        "nodelist": nodelist,
        "name": spec.name,
        "xla_flags": spec.xla_flags,
        "env": spec.env,
        "unset_env": spec.unset_env,
        "overrides_spec": spec.overrides,
        "evidence": spec.evidence,
    }
    if spec.repeat:
        payload["repeat"] = spec.repeat
    if image:
        payload["image"] = image
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def restore_default_changes(entries: tuple[EnvFileEntry, ...]) -> tuple[tuple[str, ...], Pairs, tuple[str, ...]]:
    """Flags appended back at image defaults, env vars reset, env vars unset."""
    flags = tuple(f"{e.name}={e.image_default}" for e in entries if e.kind == "xla")
    env = tuple((e.name, e.image_default) for e in entries if e.kind == "env" and e.image_default is not None)
    unset = tuple(e.name for e in entries if e.kind == "env" and e.image_default is None)
    return flags, env, unset


def expand(cell: Cell) -> list[RunSpec]:
    """All runs of the cell in submission order: wave 1, 1.5, 2-4, 5, 6."""
    specs: list[RunSpec] = []
    for tag in cell.config_tags:
        specs.extend(_wave1(cell, tag))
    specs.append(RunSpec("wave1.5", EVIDENCE, cell.primary_config.name, RunKind.EVIDENCE,
                         config_overrides=cell.primary_config.overrides, evidence=True))
    primary = cell.primary_config
    for profile in sorted(cell.profiles, key=lambda p: p.wave):
        specs.append(RunSpec(
            f"wave{profile.wave}", profile.name, primary.name, RunKind.PROFILE,
            xla_flags=profile.xla_flags, env=profile.env,
            config_overrides=primary.overrides, profile_overrides=profile.overrides, line=profile.line,
        ))
    if cell.parallelism.size("PP") > 1:
        specs.extend(_wave5(cell, primary))
    for tag in cell.config_tags[1:]:
        specs.append(RunSpec("wave6", BEST, tag.name, RunKind.CROSS_CONFIG,
                             config_overrides=tag.overrides))
    return specs


def _wave1(cell: Cell, tag: ConfigTag) -> list[RunSpec]:
    runs = [RunSpec("wave1", BASELINE, tag.name, RunKind.BASELINE, config_overrides=tag.overrides)]
    runs += [
        RunSpec("wave1", f"{BASELINE}-r{n}", tag.name, RunKind.BASELINE, config_overrides=tag.overrides)
        for n in range(2, cell.baseline_repeats + 1)
    ]
    if cell.env_file:
        flags, env, unset = restore_default_changes(cell.env_file)
        runs.append(RunSpec("wave1", RESTORE_DEFAULT, tag.name, RunKind.RESTORE_DEFAULT,
                            xla_flags=flags, env=env, unset_env=unset, config_overrides=tag.overrides))
    return runs


def _wave5(cell: Cell, tag: ConfigTag) -> list[RunSpec]:
    layers = dict(cell.overrides).get("num_decoder_layers") or dict(cell.overrides).get("base_num_decoder_layers")
    stages = cell.parallelism.size("PP")
    runs = []
    for shape in cell.pipeline_shapes:
        extra: list[tuple[str, str]] = [("num_pipeline_microbatches", str(shape.microbatches))]
        if shape.virtual_stages > 1 and layers and layers.isdigit():
            per_stage = int(layers) // (stages * shape.virtual_stages)
            extra.append(("num_layers_per_pipeline_stage", str(max(per_stage, 1))))
        runs.append(RunSpec("wave5", shape.name, tag.name, RunKind.PIPELINE_SHAPE,
                            config_overrides=tag.overrides, profile_overrides=tuple(extra),
                            line=shape.line))
    return runs


def predicted_bubble(stages: int, microbatches: int, virtual_stages: int = 1) -> float:
    """Pipeline bubble fraction (stages − 1) / (microbatches × V + stages − 1)."""
    return (stages - 1) / (microbatches * virtual_stages + stages - 1)


def expand_gate(cell: Cell, recipes: dict[str, tuple[str, tuple[str, ...], Pairs, Pairs]]) -> list[RunSpec]:
    """Image-upgrade gate: per locked config tag, the baseline repeats then the locked recipe.

    `recipes` maps config tag → (profile name, xla flags, env, profile overrides) from the lock.
    """
    specs: list[RunSpec] = []
    for tag in cell.config_tags:
        if tag.name not in recipes:
            continue
        profile, flags, env, overrides = recipes[tag.name]
        specs.append(RunSpec("gate", BASELINE, tag.name, RunKind.BASELINE, config_overrides=tag.overrides))
        specs += [RunSpec("gate", f"{BASELINE}-r{n}", tag.name, RunKind.BASELINE,
                          config_overrides=tag.overrides)
                  for n in range(2, cell.baseline_repeats + 1)]
        specs.append(RunSpec("gate", profile, tag.name, RunKind.GATE_RECIPE, xla_flags=flags, env=env,
                             config_overrides=tag.overrides, profile_overrides=overrides))
    return specs
