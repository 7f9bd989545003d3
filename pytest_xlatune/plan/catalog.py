"""Which candidates of a flag catalog (cell/catalog.py) run, and their order from Wave 1.5 evidence (pure).

A catalog wave (`waves: {2: {catalog: fsdp, max: 6}}`) becomes one item per candidate, named
statically from the catalog. Which of them run, and in what order, follows the evidence run:

- with no evidence yet, catalog order, and the first `max` run;
- with evidence, candidates acting on a collective kind come first, the kind with the most bytes
  in the compiled train step first; then candidates acting on any collective; then compute and
  memory ones (compute first instead when the profile shows more compute than collective time);
- a candidate whose mechanism is absent from the evidence HLO (a collective-permute flag without
  collective-permute) is skipped, with that reason; `max` counts only candidates that apply.

The adaptive sweep also orders by the same evidence within the session that ran it (`hints`):
every candidate whose settings have a known mechanism (cell/catalog.mechanisms_of), catalog or
not, gets a small expected gain by its place in that order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..cell.catalog import ALWAYS, ANY_COLLECTIVE, KINDS
from ..evidence.artifacts import EvidenceFacts as EvidenceFacts  # re-exported for plan/ users


def irrelevant(mechanism: str, facts: EvidenceFacts) -> str:
    """Why a mechanism does not apply to the evidence run's HLO; "" when it does."""
    present = dict(facts.bytes_by_kind)
    if mechanism in KINDS and mechanism not in present:
        return (
            f"mechanism-irrelevant: acts on {mechanism}, and the evidence HLO (job {facts.job_id}) has no {mechanism}"
        )
    if mechanism == ANY_COLLECTIVE and not present:
        return f"mechanism-irrelevant: acts on collectives, and the evidence HLO (job {facts.job_id}) has none"
    return ""


# The evidence run's weight in the expected gain (%) of a candidate acting on what leads the
# step: the next place gets half, the third a third... Half of what one sweep of the same
# parallelism family that measured +1 % adds (+0.5 %), so measured effects outweigh it.
EVIDENCE_HINT_PCT = 0.25


def hints(
    mechanisms: Mapping[str, Sequence[str]], facts: EvidenceFacts, win_pct: float | None = None
) -> list[tuple[str, float, str]]:
    """(candidate, expected gain %, why) from the evidence run, for the adaptive sweep's order
    (adaptive.order.Prior.with_hints): the candidates acting on what comes first in the module's
    order get +EVIDENCE_HINT_PCT, the next place half of it, and so on; one whose every mechanism
    the evidence HLO lacks gets −EVIDENCE_HINT_PCT (it runs last: a listed candidate is never
    skipped for it). One acting on collectives only, when the profile's collective time is less
    than `win_pct` % of its busy time (no collective flag can then win by removing it all), gets
    −EVIDENCE_HINT_PCT / 2. Candidates with no known mechanism get nothing."""
    best: dict[str, tuple[tuple[int, int], str]] = {}
    out: list[tuple[str, float, str]] = []
    share = collective_share(facts)
    for name, found in mechanisms.items():
        relevant = [m for m in found if not irrelevant(m, facts)]
        if relevant and share is not None and win_pct is not None and share < win_pct and not set(relevant) & {*ALWAYS}:
            out.append(
                (
                    name,
                    -EVIDENCE_HINT_PCT / 2,
                    f"acts on {relevant[0]}, and collectives are {share:.1f} % of the evidence profile's busy "
                    f"time (job {facts.job_id}): less than the +{win_pct:g} % a win needs",
                )
            )
        elif relevant:
            best[name] = min((_group(m, facts), m) for m in relevant)
        elif found:
            out.append((name, -EVIDENCE_HINT_PCT, irrelevant(found[0], facts)))
    places = sorted({group for group, _ in best.values()})
    for name, (group, mechanism) in best.items():
        place = places.index(group)
        out.append((name, EVIDENCE_HINT_PCT / (place + 1), _why(mechanism, place, facts)))
    return sorted(out)


def collective_share(facts: EvidenceFacts) -> float | None:
    """The profile's collective time as % of its compute and collective time (an upper bound on
    what removing every collective could gain); None without a profile."""
    if facts.compute_ms is None or facts.collective_ms is None or facts.compute_ms + facts.collective_ms <= 0:
        return None
    return 100.0 * facts.collective_ms / (facts.compute_ms + facts.collective_ms)


def _why(mechanism: str, place: int, facts: EvidenceFacts) -> str:
    order = facts.kinds_by_bytes
    if mechanism in order:
        rank = order.index(mechanism)
        what = "the collective with the most bytes" if rank == 0 else f"collective {rank + 1} of {len(order)} by bytes"
        said = f"acts on {mechanism}, {what} in the evidence HLO (job {facts.job_id})"
    elif mechanism == ANY_COLLECTIVE:
        said = f"acts on collectives, present in the evidence HLO (job {facts.job_id})"
    elif facts.compute_ms is not None and facts.collective_ms is not None:
        more = "more" if facts.compute_ms > facts.collective_ms else "less"
        said = (
            f"acts on {mechanism}; the evidence profile (job {facts.job_id}) shows {more} compute than collective time"
        )
    else:
        said = f"acts on {mechanism}"
    return f"{said} (place {place + 1})"


def _group(mechanism: str, facts: EvidenceFacts) -> tuple[int, int]:
    compute_first = (
        facts.compute_ms is not None and facts.collective_ms is not None and facts.compute_ms > facts.collective_ms
    )
    if mechanism in ALWAYS:
        return (0 if compute_first else 2, 0)
    if mechanism == ANY_COLLECTIVE:
        return (1 if not compute_first else 2, 0)
    order = facts.kinds_by_bytes
    return (1 if compute_first else 0, order.index(mechanism) if mechanism in order else len(order))


def decide(
    mechanisms: Sequence[str],
    catalog: str,
    limit: int | None,
    facts: EvidenceFacts | None,
    gains: Sequence[float] | None = None,
) -> list[tuple[int, str]]:
    """(index into `mechanisms`, skip reason or "") for every candidate: those that run, in run
    order, then those beyond `max`, then the irrelevant ones. `gains`: each candidate's expected
    gain (%) as the adaptive planner orders them (other sweeps' effects and the evidence's hints,
    adaptive.order): `max` keeps the likeliest winners it would try first, ties in evidence order."""
    if facts is None:
        order = list(range(len(mechanisms)))
        reasons = dict.fromkeys(order, "")
        basis = "catalog order: no evidence run to order by yet"
    else:
        order = sorted(range(len(mechanisms)), key=lambda i: _group(mechanisms[i], facts))
        reasons = {i: irrelevant(mechanisms[i], facts) for i in order}
        basis = f"ordered by the evidence of job {facts.job_id}"
    if gains is not None and any(gains):
        order = sorted(order, key=lambda i: -gains[i])  # stable: ties keep the order above
        basis = f"ordered by expected gain, then {basis.replace('ordered by ', '')}"
    out, running = [], 0
    for i in order:
        reason = reasons[i]
        if not reason and limit is not None and running >= limit:
            reason = f"beyond max {limit} of catalog {catalog} ({basis})"
        running += not reason
        out.append((i, reason))
    # Stable: those that run, then those beyond `max`, then the mechanism-irrelevant ones.
    return sorted(out, key=lambda pair: 2 if reasons[pair[0]] else bool(pair[1]))
