"""The gate's repair (`--xlatune-gate-repair`): a bounded re-tune on the new image, planned (pure).

When the locked recipe regressed, lost a flag, or a locked flag is inert on the new image, the
same session measures, on the new image and against the gate's new-image baseline (the same
controls, numerics guard and confirmation as a sweep):

- the top `TOP_K` (3) settings of the previous sweep on the lock's image, by their mean TGS there
  (profiles and stacks of the primary config tag, the locked recipe left out: the gate measured it);
- what the evidence suggests: the locked recipe without the flags the new image removed (a gate
  run of it that failed with an unknown flag, on file) or that are inert there (the `inert`
  hook: flags whose compiled program did not change);
- then the winner among them once more (`repair::confirm`, the second run that confirms it; a
  profiled run is too slow to confirm anything on a loaded machine), and once with its HLO dump
  (`repair::winner`: the collective inventory the report compares with the lock's; its steps
  after the profiler's window join the winner's runs when they agree, verdicts.pooled_evidence).

The budget is stated by construction: at most TOP_K + 2 runs plus one evidence run per cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..cell.values import Cell
from ..results import JobResult, RunKind, Verdict
from ..triage.signatures import UNKNOWN_FLAG_RE, rejected_flag
from ..verdict.lock import Lock
from ..verdict.verdicts import settings_key
from .expand import RunSpec

REPAIR_WAVE = "repair"
TOP_K = 3
PRUNED_SUFFIX = "-pruned"
CONFIRM, WINNER = "confirm", "winner"  # the winner re-run plain (it confirms), then with its HLO dump


@dataclass(frozen=True)
class Candidate:
    profile: str
    xla_flags: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    overrides: tuple[tuple[str, str], ...]
    why: str  # `previous sweep: 1101.3 TGS on (default)` or what the evidence said


def _flag_name(flag: str) -> str:
    return flag.split("=", 1)[0]


def removed_flags(previous: Iterable[JobResult], image: str) -> tuple[str, ...]:
    """Flags a gate run of the locked recipe on `image` found gone (unknown-flag failures on file)."""
    found = []
    for r in previous:
        if r.kind is RunKind.GATE_RECIPE and r.image == image and r.verdict is Verdict.UNKNOWN_FLAG:
            m = UNKNOWN_FLAG_RE.search(r.reason)
            if m is not None:
                found.append(rejected_flag(m))
    return tuple(dict.fromkeys(found))


def candidates(
    previous: Sequence[JobResult], lock: Lock, primary: str, k: int = TOP_K, dropped: Sequence[str] = ()
) -> list[Candidate]:
    """The repair's candidates, best first (see the module)."""
    locked = lock.recipe(primary)
    pool = [
        r
        for r in previous
        if r.measured
        and r.tgs is not None
        and r.config_tag == primary
        and r.image == lock.image
        and r.kind in (RunKind.PROFILE, RunKind.STACK)
        and r.wave not in ("gate", REPAIR_WAVE)
    ]
    groups: dict[tuple[object, ...], list[JobResult]] = {}
    for r in pool:
        groups.setdefault(settings_key(r), []).append(r)
    ranked = sorted(groups.values(), key=lambda runs: -sum(r.tgs or 0.0 for r in runs) / len(runs))
    found: list[Candidate] = []
    for runs in ranked:
        first = runs[0]
        if locked is not None and (first.xla_flags, first.env) == (locked.xla_flags, locked.env):
            continue
        mean = sum(r.tgs or 0.0 for r in runs) / len(runs)
        found.append(
            Candidate(
                first.profile,
                first.xla_flags,
                first.env,
                first.overrides,
                f"previous sweep: {mean:.1f} TGS on {lock.image or '(default)'}",
            )
        )
        if len(found) >= k:
            break
    gone = {_flag_name(f) for f in dropped}
    if locked is not None and gone & {_flag_name(f) for f in locked.xla_flags}:
        kept = tuple(f for f in locked.xla_flags if _flag_name(f) not in gone)
        found.append(
            Candidate(
                locked.profile + PRUNED_SUFFIX,
                kept,
                locked.env,
                locked.overrides,
                f"the locked recipe without {', '.join(sorted(gone))} (removed or inert on the new image)",
            )
        )
    return found


def repair_specs(cell: Cell, found: Sequence[Candidate]) -> list[RunSpec]:
    """The repair wave: each candidate once on the new image, then the winner's evidence run."""
    tag = cell.primary_config
    specs = [
        RunSpec(
            REPAIR_WAVE,
            c.profile,
            tag.name,
            RunKind.PROFILE,
            xla_flags=c.xla_flags,
            env=c.env,
            config_overrides=tag.overrides,
            profile_overrides=c.overrides,
        )
        for c in found
    ]
    if specs:  # the winner again without the profiler (its confirmation), then with the HLO dump
        specs += [
            RunSpec(REPAIR_WAVE, CONFIRM, tag.name, RunKind.WINNER_EVIDENCE, config_overrides=tag.overrides),
            RunSpec(
                REPAIR_WAVE, WINNER, tag.name, RunKind.WINNER_EVIDENCE, evidence=True, config_overrides=tag.overrides
            ),
        ]
    return specs
