"""Expand a cell into the ordered runs of a sweep (pure; ids are stable across runs)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from ..cell import catalog as table
from ..cell.jobnames import OLD_IMAGE_SUFFIX
from ..cell.values import BASELINE, BEST, EVIDENCE, RESTORE_DEFAULT, WINNER, Cell, ConfigTag, EnvFileEntry
from ..results import RunKind as RunKind  # re-exported: plan/ and its users import it from here
from . import catalog

Pairs = tuple[tuple[str, str], ...]

WINNER_EVIDENCE_WAVE = "evidence2"


# Runs whose flags come from other runs' results, at run time; resolved in this order.
RESOLVED_KINDS = (RunKind.STACK, RunKind.WINNER_EVIDENCE, RunKind.CROSS_CONFIG)


@dataclass(frozen=True)
class RunSpec:
    """One job of the sweep: what to append on top of the deployed environment.

    `xla_flags` are appended after the env file's flags (XLA flags are last-wins), `env`
    is exported after everything else, `unset_env` names env-file vars restored to unset.
    CROSS_CONFIG, WINNER_EVIDENCE and STACK runs have no flags until `resolve` (or `combine`)
    fills them from other runs' results. A catalog candidate knows its catalog and the mechanism
    it acts on, which decide (from the evidence run) its order and whether it is skipped.
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
    catalog: str = ""
    mechanism: str = ""
    top: int = 0  # STACK: how many winners to combine
    image: str | None = None  # the gate's old-image controls: the lock's image ("" = none), not the session's

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
        return self.kind in (RunKind.PROFILE, RunKind.PIPELINE_SHAPE, RunKind.STACK)

    @property
    def needs_resolution(self) -> bool:
        return self.kind in RESOLVED_KINDS and not self.resolved_from

    @property
    def wave_number(self) -> int:
        """2 for `wave2` (0 for waves without a number)."""
        digits = self.wave.removeprefix("wave")
        return int(digits) if digits.isdigit() else 0

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

    def combine(self, sources: list[RunSpec]) -> RunSpec:
        """Give a stack run the flags, env and overrides of all `sources` (disjoint settings)."""
        return replace(
            self,
            xla_flags=tuple(f for s in sources for f in s.xla_flags),
            env=tuple(e for s in sources for e in s.env),
            unset_env=tuple(u for s in sources for u in s.unset_env),
            profile_overrides=tuple(o for s in sources for o in s.profile_overrides),
            resolved_from="+".join(s.profile for s in sources),
        )

    def settings(self) -> set[str]:
        """Names this run sets (flag names, env vars, override keys): stacked runs must not share one."""
        return (
            {f.split("=", 1)[0] for f in self.xla_flags}
            | {f"env:{k}" for k, _ in self.env}
            | {f"env:{k}" for k in self.unset_env}
            | {f"key:{k}" for k, _ in self.profile_overrides}
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
    if spec.image is not None:  # an old-image control belongs to the gate of one new image
        payload["image"], payload["control_for"] = spec.image, image
    elif image:
        payload["image"] = image
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def restore_default_changes(entries: tuple[EnvFileEntry, ...]) -> tuple[tuple[str, ...], Pairs, tuple[str, ...]]:
    """Flags appended back at image defaults, env vars reset, env vars unset."""
    flags = tuple(f"{e.name}={e.image_default}" for e in entries if e.kind == "xla")
    env = tuple((e.name, e.image_default) for e in entries if e.kind == "env" and e.image_default is not None)
    unset = tuple(e.name for e in entries if e.kind == "env" and e.image_default is None)
    return flags, env, unset


def evidence_spec(cell: Cell) -> RunSpec:
    """Wave 1.5: baseline-deployed of the primary tag with the profiler and an HLO dump."""
    return RunSpec(
        "wave1.5",
        EVIDENCE,
        cell.primary_config.name,
        RunKind.EVIDENCE,
        config_overrides=cell.primary_config.overrides,
        evidence=True,
    )


def expand(cell: Cell) -> list[RunSpec]:
    """All runs of the cell in submission order: wave 1, 1.5, 2-4 (hand-written profiles, catalog
    candidates in catalog order, the stack), the winner's evidence run, 5, 6."""
    specs: list[RunSpec] = []
    for tag in cell.config_tags:
        specs.extend(_wave1(cell, tag))
    specs.append(evidence_spec(cell))
    primary = cell.primary_config
    for wave in (2, 3, 4):
        specs.extend(_flag_wave(cell, primary, wave))
    if any(s.kind in (RunKind.PROFILE, RunKind.STACK) for s in specs):
        specs.append(
            RunSpec(
                WINNER_EVIDENCE_WAVE,
                WINNER,
                primary.name,
                RunKind.WINNER_EVIDENCE,
                config_overrides=primary.overrides,
                evidence=True,
            )
        )
    if cell.parallelism.size("PP") > 1:
        specs.extend(_wave5(cell, primary))
    for tag in cell.config_tags[1:]:
        specs.append(RunSpec("wave6", BEST, tag.name, RunKind.CROSS_CONFIG, config_overrides=tag.overrides))
    return specs


def _flag_wave(cell: Cell, primary: ConfigTag, wave: int) -> list[RunSpec]:
    runs = [
        RunSpec(
            f"wave{wave}",
            p.name,
            primary.name,
            RunKind.PROFILE,
            xla_flags=p.xla_flags,
            env=p.env,
            config_overrides=primary.overrides,
            profile_overrides=p.overrides,
            line=p.line,
        )
        for p in cell.profiles
        if p.wave == wave
    ]
    for group in (g for g in cell.catalog_waves if g.wave == wave):
        runs += [
            RunSpec(
                f"wave{wave}",
                c.name,
                primary.name,
                RunKind.PROFILE,
                xla_flags=c.xla_flags,
                env=c.env,
                config_overrides=primary.overrides,
                line=group.line,
                catalog=group.catalog,
                mechanism=c.mechanism,
            )
            for c in table.get(group.catalog).candidates
        ]
    runs += [
        RunSpec(
            f"wave{wave}",
            s.name,
            primary.name,
            RunKind.STACK,
            config_overrides=primary.overrides,
            line=s.line,
            top=s.top,
        )
        for s in cell.stacks
        if s.wave == wave
    ]
    return runs


def catalog_decisions(
    cell: Cell,
    specs: list[RunSpec],
    facts: catalog.EvidenceFacts | None,
    gain: Callable[[str], float] | None = None,
) -> dict[str, tuple[int, str]]:
    """Run name → (position in its catalog wave, skip reason or "") for every catalog candidate;
    `gain`: a run's expected gain (%) as the adaptive planner orders it (catalog.decide)."""
    out: dict[str, tuple[int, str]] = {}
    for group in cell.catalog_waves:
        members = [s for s in specs if s.catalog == group.catalog and s.wave_number == group.wave]
        gains = [gain(s.name) for s in members] if gain is not None else None
        decided = catalog.decide([s.mechanism for s in members], group.catalog, group.max, facts, gains)
        for rank, (index, reason) in enumerate(decided):
            out[members[index].name] = (rank, reason)
    return out


def arrange(cell: Cell, specs: list[RunSpec], facts: catalog.EvidenceFacts | None) -> list[RunSpec]:
    """The runs with each catalog wave's candidates in the order the evidence gives (pure)."""
    decisions = catalog_decisions(cell, specs, facts)
    out: list[RunSpec] = []
    for spec in specs:
        if spec.name not in decisions:
            out.append(spec)
        elif not any(s.catalog == spec.catalog and s.wave == spec.wave for s in out):
            group = [s for s in specs if s.catalog == spec.catalog and s.wave == spec.wave]
            out += sorted(group, key=lambda s: decisions[s.name][0])
    return out


def _wave1(cell: Cell, tag: ConfigTag) -> list[RunSpec]:
    runs = [RunSpec("wave1", BASELINE, tag.name, RunKind.BASELINE, config_overrides=tag.overrides)]
    runs += [
        RunSpec("wave1", f"{BASELINE}-r{n}", tag.name, RunKind.BASELINE, config_overrides=tag.overrides)
        for n in range(2, cell.baseline_repeats + 1)
    ]
    if cell.env_file:
        flags, env, unset = restore_default_changes(cell.env_file)
        runs.append(
            RunSpec(
                "wave1",
                RESTORE_DEFAULT,
                tag.name,
                RunKind.RESTORE_DEFAULT,
                xla_flags=flags,
                env=env,
                unset_env=unset,
                config_overrides=tag.overrides,
            )
        )
    return runs


def _wave5(cell: Cell, tag: ConfigTag) -> list[RunSpec]:
    layers, stages = cell.decoder_layers, cell.parallelism.size("PP")
    runs = []
    for shape in cell.pipeline_shapes:
        extra: list[tuple[str, str]] = [("num_pipeline_microbatches", str(shape.microbatches))]
        if shape.virtual_stages > 1 and layers:
            per_stage = layers // (stages * shape.virtual_stages)
            extra.append(("num_layers_per_pipeline_stage", str(max(per_stage, 1))))
        runs.append(
            RunSpec(
                "wave5",
                shape.name,
                tag.name,
                RunKind.PIPELINE_SHAPE,
                config_overrides=tag.overrides,
                profile_overrides=tuple(extra),
                line=shape.line,
            )
        )
    return runs


def predicted_bubble(stages: int, microbatches: int, virtual_stages: int = 1) -> float:
    """Pipeline bubble fraction (stages − 1) / (microbatches × V + stages − 1)."""
    return (stages - 1) / (microbatches * virtual_stages + stages - 1)


def expand_gate(
    cell: Cell,
    recipes: Mapping[str, tuple[str, tuple[str, ...], Pairs, Pairs, tuple[str, ...]]],
    old_image: str | None = None,
) -> list[RunSpec]:
    """Image-upgrade gate: per locked config tag, the baseline repeats then the locked recipe.

    `recipes` maps config tag → (profile name, xla flags, env, profile overrides, unset env)
    from the lock.
    With `old_image` (the lock's image; "" = none) each run is preceded by the same run on the
    old image (`<profile>-oldimage`): old, new, old, new…, so every new-image run has its
    control next to it in time.
    """
    specs: list[RunSpec] = []
    for tag in cell.config_tags:
        if tag.name not in recipes:
            continue
        profile, flags, env, overrides, unset = recipes[tag.name]
        runs = [RunSpec("gate", BASELINE, tag.name, RunKind.BASELINE, config_overrides=tag.overrides)]
        runs += [
            RunSpec("gate", f"{BASELINE}-r{n}", tag.name, RunKind.BASELINE, config_overrides=tag.overrides)
            for n in range(2, cell.baseline_repeats + 1)
        ]
        runs.append(
            RunSpec(
                "gate",
                profile,
                tag.name,
                RunKind.GATE_RECIPE,
                xla_flags=flags,
                env=env,
                unset_env=unset,
                config_overrides=tag.overrides,
                profile_overrides=overrides,
            )
        )
        for run in runs:
            if old_image is not None:
                specs.append(old_image_control(run, old_image))
            specs.append(run)
    return specs


def old_image_control(run: RunSpec, old_image: str) -> RunSpec:
    """The gate run `run` on the lock's image: its same-window control."""
    kind = RunKind.GATE_OLD_RECIPE if run.kind is RunKind.GATE_RECIPE else RunKind.GATE_OLD_BASELINE
    return replace(run, profile=run.profile + OLD_IMAGE_SUFFIX, kind=kind, image=old_image)
