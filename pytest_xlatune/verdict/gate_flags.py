"""Each locked flag on the gate's new image (pure): removed, inert or still effective.

Read off the gate's own runs on the new image: the locked recipe's job (XLA rejects a removed
flag as unknown, and the job stops there) and the fingerprints of the recipe's and the baseline's
compiled programs (evidence/inert.py). A recipe that compiles to the baseline's program makes
each of its XLA flags inert there (a default now, or no effect). Settings that act at run time
(environment variables, the runtime-only XLA flags) are never judged from the program.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from ..evidence.inert import RUNTIME_XLA_FLAGS
from ..results import JobResult, RunKind, Verdict
from ..triage.signatures import UNKNOWN_FLAG_RE, rejected_flag
from .lock import LockedRecipe

__all__ = ["FlagState", "LockedFlag", "locked_flags"]


class FlagState(Enum):
    REMOVED = "removed"
    INERT = "inert"
    EFFECTIVE = "still effective"
    RUNTIME = "runtime setting"
    NOT_JUDGED = "not judged"


@dataclass(frozen=True)
class LockedFlag:
    config_tag: str
    setting: str  # --xla_foo=1, or NAME=value for an environment variable
    state: FlagState
    why: str

    def text(self) -> str:
        return f"`{self.setting}` [{self.config_tag}]: {self.state.value}: {self.why}"


def _new_image_runs(runs: Sequence[JobResult], tag: str, kind: RunKind) -> list[JobResult]:
    return [r for r in runs if r.config_tag == tag and r.kind is kind and r.wave == "gate"]


def locked_flags(
    recipe: LockedRecipe, runs: Sequence[JobResult], fingerprints: Mapping[str, str]
) -> tuple[LockedFlag, ...]:
    """How each setting of a locked recipe fares on the new image, from the gate runs there
    (`runs`: their latest results; `fingerprints`: job id → complete program fingerprint)."""
    tag = recipe.config_tag
    found = _new_image_runs(runs, tag, RunKind.GATE_RECIPE)
    recipe_run = found[-1] if found else None
    baseline = next(
        (fingerprints[r.job_id] for r in _new_image_runs(runs, tag, RunKind.BASELINE) if r.job_id in fingerprints), ""
    )
    program = fingerprints.get(recipe_run.job_id, "") if recipe_run is not None else ""
    # The flag XLA's parser refused, read as the repair reads it (its reason quotes the line):
    # unknown, or a value it cannot read (the image changed the flag's type or values).
    rejected, rejected_as = "", "an unknown flag"
    if recipe_run is not None and recipe_run.verdict is Verdict.UNKNOWN_FLAG:
        m = UNKNOWN_FLAG_RE.search(recipe_run.reason)
        rejected = rejected_flag(m) if m else ""
        rejected_as = "a value it cannot read" if m and m.group("valued") else rejected_as
    xla = [f for f in recipe.xla_flags if f.split("=", 1)[0] not in RUNTIME_XLA_FLAGS]
    out = []
    for flag in recipe.xla_flags:
        name = flag.split("=", 1)[0]
        if name in RUNTIME_XLA_FLAGS:
            state, why = FlagState.RUNTIME, "acts when the program runs: never judged from the program"
        elif recipe_run is not None and recipe_run.verdict is Verdict.UNKNOWN_FLAG:
            state, why = (
                (FlagState.REMOVED, f"XLA rejects it as {rejected_as} (job {recipe_run.job_id})")
                if name == rejected
                else (FlagState.NOT_JUDGED, f"the job stopped at the unknown flag {rejected or '?'}")
            )
        elif not program or not baseline:
            state, why = FlagState.NOT_JUDGED, "no program dump of the recipe and the baseline on the new image"
        elif program == baseline:
            state, why = (
                FlagState.INERT,
                ("the recipe compiles to the baseline's program on the new image (a default now, or no effect)"),
            )
        elif len(xla) == 1:
            state, why = FlagState.EFFECTIVE, "the recipe's program differs from the baseline's"
        else:
            state, why = (
                FlagState.EFFECTIVE,
                ("the recipe's program differs from the baseline's (its flags together: not compiled one by one)"),
            )
        out.append(LockedFlag(tag, flag, state, why))
    out += [
        LockedFlag(tag, f"{name}={value}", FlagState.RUNTIME, "an environment variable: never judged from the program")
        for name, value in recipe.env
    ]
    return tuple(out)
