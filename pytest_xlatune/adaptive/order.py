"""Likely winners first (pure): the order the adaptive sweep tries its candidates in.

Each candidate's expected gain (%) comes from what other sweeps in the store measured of the
same profile — a prior across sweeps — and from hints of the cell's evidence run. Effects often
flip sign between parallelisms, so the prior is per parallelism family and weak: the mean of the
same family's measured effects shrunk by n / (n + SHRINK), plus OTHER_WEIGHT × the other
families' (shrunk the same way); an evidence hint adds its own gain. Candidates are tried by
expected gain, highest first; equal gains (no prior: all 0) keep list order, so a sweep without a
prior runs in list order exactly as before. The order changes only *when* a candidate runs,
never what a verdict needs: every rule (judge, rules) is order-free.

Other sweeps' effects are matched to this cell's candidates by their settings (XLA flags and env
vars: `prior_settings`; overrides carry the config tag's too, so they are left out), not by name,
so a renamed profile still counts and a same-named one with other flags does not. A sweep's
family is the set of its parallelism axes over 1 (`family`); a store that never recorded its
parallelism is UNKNOWN, which weighs as another family's.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..plan.expand import RunKind
from ..results import JobResult

SHRINK = 1.0  # one measured sweep counts half: n / (n + 1)
OTHER_WEIGHT = 0.25  # another parallelism family's effect, a quarter (sign flips are common)
UNKNOWN = "unknown"  # the family of a store that never recorded its parallelism

Settings = tuple[str, ...]  # a candidate's settings, sorted: flags, then env:NAME=V
Seen = tuple[Settings, str, float]  # (settings, parallelism family, measured effect %)


@dataclass(frozen=True)
class Gain:
    """One candidate's expected gain (%) and where it came from."""

    name: str
    pct: float
    why: str


@dataclass(frozen=True)
class Prior:
    """Expected gains by candidate name (absent: 0, no evidence either way)."""

    gains: tuple[Gain, ...] = ()

    def gain(self, name: str) -> Gain:
        return next((g for g in self.gains if g.name == name), Gain(name, 0.0, "no prior"))

    @classmethod
    def of(cls, seen: Iterable[tuple[str, str, float]], family: str) -> Prior:
        """From (candidate, parallelism family, measured effect %) of other sweeps."""
        same: dict[str, list[float]] = {}
        other: dict[str, list[float]] = {}
        for name, fam, effect in seen:
            (same if fam == family else other).setdefault(name, []).append(effect)
        gains = []
        for name in sorted({*same, *other}):
            pct, whys = 0.0, []
            for values, weight, own in ((same.get(name, []), 1.0, True), (other.get(name, []), OTHER_WEIGHT, False)):
                if values:
                    mean = sum(values) / len(values)
                    part = weight * mean * len(values) / (len(values) + SHRINK)
                    pct += part
                    where = f"{family} sweep(s)" if own else "sweep(s) of other parallelism families"
                    whys.append(f"{mean:+.1f} % in {len(values)} {where} → {part:+.2f}")
            gains.append(Gain(name, pct, "; ".join(whys)))
        return cls(tuple(gains))

    def with_hints(self, hints: Iterable[tuple[str, float, str]]) -> Prior:
        """This prior plus the evidence run's hints (candidate, gain %, why), added to the gains
        (plan.catalog.hints: known once the cell's evidence run has ended)."""
        gains = {g.name: g for g in self.gains}
        for name, pct, why in hints:
            was = gains.get(name, Gain(name, 0.0, ""))
            gains[name] = Gain(name, was.pct + pct, "; ".join(filter(None, (was.why, f"evidence: {why} → {pct:+.2f}"))))
        return Prior(tuple(gains[n] for n in sorted(gains)))

    @classmethod
    def across(cls, candidates: Mapping[str, Settings], seen: Iterable[Seen], family: str) -> Prior:
        """The prior of this cell's candidates (name → settings) from other sweeps' effects."""
        by_settings: dict[Settings, list[str]] = {}
        for name, settings in candidates.items():
            by_settings.setdefault(settings, []).append(name)
        return cls.of(
            [(name, fam, pct) for settings, fam, pct in seen for name in by_settings.get(settings, [])], family
        )


def family(parallelism: str) -> str:
    """'FSDP=8,TP=2' → 'FSDP+TP': the axes over 1, sorted ('single' when none); UNKNOWN when the
    text is empty or not axis=size pairs."""
    axes = []
    for part in parallelism.split(","):
        name, _, size = part.strip().partition("=")
        if not name or not size.strip().isdigit():
            return UNKNOWN
        if int(size) > 1:
            axes.append(name.strip())
    return "+".join(sorted(axes)) or "single"


def prior_settings(xla_flags: Iterable[str], env: Iterable[tuple[str, str]]) -> Settings:
    """A candidate's settings as other sweeps' effects are matched by (flags and env, sorted);
    grouping one sweep's identical runs is verdict.verdicts.settings_key."""
    return (*sorted(xla_flags), *sorted(f"env:{k}={v}" for k, v in env))


def effects(results: Iterable[JobResult], fam: str) -> list[Seen]:
    """One sweep's effect (%) of each measured candidate's settings: the mean of its runs (the
    latest result of each run key; a share of another run's job is that run) against the mean of
    its own config tag's measured baselines. One entry per settings: one sweep counts once."""
    base: dict[str, list[float]] = {}
    runs: dict[tuple[str, Settings], list[float]] = {}
    for r in results:
        if not r.measured or r.tgs is None or r.shared_from:
            continue
        if r.kind is RunKind.BASELINE:
            base.setdefault(r.config_tag, []).append(r.tgs)
        elif r.kind is RunKind.PROFILE and (r.xla_flags or r.env):
            runs.setdefault((r.config_tag, prior_settings(r.xla_flags, r.env)), []).append(r.tgs)
    return [
        (settings, fam, (statistics.fmean(tgs) / statistics.fmean(base[tag]) - 1.0) * 100.0)
        for (tag, settings), tgs in runs.items()
        if base.get(tag)
    ]


def order_line(names: Sequence[str], prior: Prior) -> str:
    """One line: the planned order and why, when it differs from list order ("" when not)."""
    order = ranked(names, prior)
    if [g.name for g in order] == list(names):
        return ""
    ahead = [g for i, g in enumerate(order) if names.index(g.name) > i]
    return f"candidates in planned order {', '.join(g.name for g in order)}; ahead of list order: " + "; ".join(
        f"{g.name} {g.pct:+.2f} % ({g.why})" for g in ahead
    )


def ranked(names: Sequence[str], prior: Prior) -> list[Gain]:
    """`names` by expected gain, highest first; ties keep their list order."""
    index = {n: i for i, n in enumerate(names)}
    return sorted((prior.gain(n) for n in names), key=lambda g: (-g.pct, index[g.name]))
