"""Likely winners first (pure): the order the adaptive sweep tries its candidates in.

Each candidate's expected gain (%) comes from what other sweeps in the store measured of the
same profile — a prior across sweeps — and from hints of the cell's evidence run. Effects often
flip sign between parallelisms, so the prior is per parallelism family and weak: the mean of the
same family's measured effects shrunk by n / (n + SHRINK), plus OTHER_WEIGHT × the other
families' (shrunk the same way); an evidence hint adds its own gain. Candidates are tried by
expected gain, highest first; equal gains (no prior: all 0) keep list order, so a sweep without a
prior runs in list order exactly as before. The order changes only *when* a candidate runs,
never what a verdict needs: every rule (judge, rules) is order-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SHRINK = 1.0  # one measured sweep counts half: n / (n + 1)
OTHER_WEIGHT = 0.25  # another parallelism family's effect, a quarter (sign flips are common)


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
    def of(cls, seen: Iterable[tuple[str, str, float]], family: str,
           hints: Iterable[tuple[str, float, str]] = ()) -> Prior:
        """From (candidate, parallelism family, measured effect %) of other sweeps, and evidence
        hints (candidate, gain %, why)."""
        same: dict[str, list[float]] = {}
        other: dict[str, list[float]] = {}
        for name, fam, effect in seen:
            (same if fam == family else other).setdefault(name, []).append(effect)
        extra: dict[str, list[tuple[float, str]]] = {}
        for name, pct, why in hints:
            extra.setdefault(name, []).append((pct, why))
        gains = []
        for name in sorted({*same, *other, *extra}):
            pct, whys = 0.0, []
            for values, weight, label in ((same.get(name, []), 1.0, family), (other.get(name, []), OTHER_WEIGHT,
                                                                               "other families")):
                if values:
                    mean = sum(values) / len(values)
                    part = weight * mean * len(values) / (len(values) + SHRINK)
                    pct += part
                    whys.append(f"{mean:+.1f} % in {len(values)} {label} sweep(s) → {part:+.2f}")
            for hint, why in extra.get(name, []):
                pct += hint
                whys.append(f"evidence: {why} → {hint:+.2f}")
            gains.append(Gain(name, pct, "; ".join(whys)))
        return cls(tuple(gains))


def ranked(names: Sequence[str], prior: Prior) -> list[Gain]:
    """`names` by expected gain, highest first; ties keep their list order."""
    index = {n: i for i, n in enumerate(names)}
    return sorted((prior.gain(n) for n in names), key=lambda g: (-g.pct, index[g.name]))
