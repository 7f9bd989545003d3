"""Effective-settings keys and plan items from a cell's runs (pure): what a run really runs,
resolved the way XLA and the scripts do, so identical runs are recognised before they run.

The request is built by `plan.request.job_request` (the code that builds every job), then resolved:
XLA flags last-wins over the env file's deployed flags followed by the run's own (for local and
sbatch jobs the request already starts with the env file's flags, and repeating them changes
nothing under last-wins; maxtext-slurm jobs inherit them from configs/<MODEL_TAG>.env.sh); env
vars as the scripts export them — the env file's, then the run's unsets and values, then any
`_env_NAME=value` passthrough argument, which upstream's _train.sh exports last; MaxText
arguments last-wins by key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..cell.values import Cell
from ..plan.expand import RunKind, RunSpec
from ..plan.request import job_request
from .values import PlanItem, Role

Pairs = tuple[tuple[str, str], ...]
ENV_ARG = "_env_"

# How each kind of run takes part in an adaptive sweep (the rest arrive in phase B).
ROLES = {
    RunKind.BASELINE: Role.BASELINE,
    RunKind.EVIDENCE: Role.EVIDENCE,
    RunKind.RESTORE_DEFAULT: Role.PROFILE,
    RunKind.PROFILE: Role.PROFILE,
    RunKind.PIPELINE_SHAPE: Role.PROFILE,
    RunKind.WINNER_EVIDENCE: Role.WINNER_EVIDENCE,
}


@dataclass(frozen=True)
class EffectiveKey:
    """What a job effectively runs; two runs with equal keys measure the same thing."""

    xla_flags: Pairs  # (name, value), resolved last-wins, sorted by name
    env: Pairs  # (name, value) exported, sorted by name
    args: Pairs  # MaxText key=value, resolved last-wins, sorted by key
    evidence: bool
    image: str = ""


def last_wins(assignments: Iterable[str]) -> dict[str, str]:
    """`name=value` assignments where a later one replaces an earlier one of the same name."""
    resolved: dict[str, str] = {}
    for text in assignments:
        name, _, value = text.partition("=")
        resolved[name] = value
    return resolved


def effective_key(cell: Cell, spec: RunSpec, image: str = "") -> EffectiveKey:
    """The settings `spec` runs with on `cell` (see the module docstring for the order)."""
    request = job_request(cell, spec)
    deployed = tuple(e.deployed for e in cell.env_file if e.kind == "xla")
    flags = last_wins(deployed + request.xla_flags)
    env = {e.name: e.value for e in cell.env_file if e.kind == "env"}
    for name in request.unset_env:
        env.pop(name, None)
    env.update(request.env)
    args = last_wins(request.passthrough)
    for name in [a for a in args if a.startswith(ENV_ARG)]:
        env[name[len(ENV_ARG) :]] = args.pop(name)
    return EffectiveKey(
        tuple(sorted(flags.items())), tuple(sorted(env.items())), tuple(sorted(args.items())), request.evidence, image
    )


def plan_items(cell: Cell, specs: Sequence[RunSpec], image: str = "") -> tuple[PlanItem, ...]:
    """The plan items of one config tag's runs, in their order (stacks, cross-config and gate
    runs are not planned adaptively yet, and are refused)."""
    items = []
    for spec in specs:
        role = ROLES.get(spec.kind)
        if role is None:
            raise ValueError(
                f"{spec.name}: {spec.kind.value} runs are not planned adaptively "
                f"(expected one of {', '.join(k.value for k in ROLES)})"
            )
        key: object = (
            effective_key(cell, spec, image) if role is not Role.WINNER_EVIDENCE else ("winner_evidence", spec.name)
        )
        count = len(spec.xla_flags) + len(spec.env) + len(spec.unset_env) + len(spec.profile_overrides)
        items.append(PlanItem(spec.name, key, role, frozenset(spec.settings()), count))
    return tuple(items)
