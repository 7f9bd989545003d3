"""Evidence runs, the baseline ↔ winner comparison and pipeline shapes, as report rows (pure).

Artifacts are read elsewhere (evidence.artifacts.load, called by report.files); here the
parsed evidence only becomes what the templates print: inventory rows, profile breakdowns,
the collective diff sentences, and the wave-5 table of predicted bubble next to measured TGS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..cell.values import Cell
from ..evidence.artifacts import RunEvidence
from ..evidence.collective_table import describe_diff, diff
from ..plan.expand import RunKind, predicted_bubble
from ..results import JobResult, delta_pct
from ..verdict import figures, stats

TOP_OPS = 5
BUCKETS = ("compute", "collectives", "idle")


@dataclass(frozen=True)
class EvidenceView:
    """One evidence run: its result, and what its artifacts show (None: not loaded)."""

    role: str  # baseline | winner
    result: JobResult
    evidence: RunEvidence | None

    @property
    def ran(self) -> str:
        """The profile the run measured: baseline-deployed, or the winner it re-ran."""
        return "baseline-deployed" if self.role == "baseline" else (self.result.resolved_from or "?")

    @property
    def buckets(self) -> tuple[tuple[str, float, float], ...]:
        """(bucket, ms per device per step, share) for compute, collectives, idle."""
        p = self.evidence.profile if self.evidence else None
        if p is None:
            return ()
        return tuple(
            (name, ms, ms / p.step_ms if p.step_ms else 0.0)
            for name, ms in zip(BUCKETS, (p.compute_ms, p.collective_ms, p.idle_ms))
        )

    @property
    def top_ops(self) -> tuple[object, ...]:
        p = self.evidence.profile if self.evidence else None
        return p.top_ops[:TOP_OPS] if p else ()


@dataclass(frozen=True)
class Why:
    """Baseline evidence vs winner evidence: what changed in the HLO and in the profile."""

    base: EvidenceView
    winner: EvidenceView
    diff_lines: tuple[str, ...]  # describe_diff sentences; () when an inventory is missing
    collectives_changed: bool | None  # None: an HLO inventory is missing
    buckets: tuple[tuple[str, float, float], ...]  # (bucket, baseline ms, winner ms)

    @property
    def step_ms(self) -> tuple[float, float] | None:
        a = self.base.evidence.profile if self.base.evidence else None
        b = self.winner.evidence.profile if self.winner.evidence else None
        return (a.step_ms, b.step_ms) if a and b else None

    @property
    def sped_up(self) -> bool | None:
        """Whether the winner's profiled steps are shorter; None without both profiles."""
        return None if self.step_ms is None else self.step_ms[1] < self.step_ms[0]

    @property
    def largest_saving(self) -> tuple[str, float] | None:
        """The bucket that lost the most time in the winner's profiled steps (ms, negative)."""
        savings = [(name, b - a) for name, a, b in self.buckets if b < a]
        return min(savings, key=lambda kv: kv[1], default=None) if self.sped_up else None


@dataclass(frozen=True)
class ShapeRow:
    profile: str
    microbatches: int
    virtual_stages: int
    bubble: float  # predicted fraction
    tgs: float  # the figure of the shape's settings (every run of them), as in the leaderboard
    delta_pct: float | None
    job_ids: str  # the runs behind `tgs`
    ci_low: float | None = None  # the 95 % interval of `delta_pct` and its verdict, as the leaderboard's
    ci_high: float | None = None
    judged: str = ""
    direction: str = ""
    runs: tuple[float, ...] = ()  # the steady TGS of every run behind `tgs`


@dataclass(frozen=True)
class Inversion:
    """A shape with the smaller predicted bubble that measured slower than another one."""

    predicted: ShapeRow  # the smaller bubble
    measured: ShapeRow  # the faster one
    gap_pct: float  # how much slower `predicted` is, in % of `measured`'s TGS
    within_noise: bool  # the 95 % interval of the gap (one run each, run-to-run noise) holds 0

    @property
    def cause(self) -> str:
        """What the smaller bubble was bought with: more `microbatches`, more `passes` (V), `both`."""
        more_mb = self.predicted.microbatches > self.measured.microbatches
        more_v = self.predicted.virtual_stages > self.measured.virtual_stages
        return "both" if more_mb and more_v else "passes" if more_v else "microbatches"


@dataclass(frozen=True)
class Pipeline:
    """Wave 5: measured shapes, smallest predicted bubble (fastest predicted) first."""

    stages: int
    rows: tuple[ShapeRow, ...]
    inversions: tuple[Inversion, ...]
    # pairs in the predicted order (smaller bubble, then larger) whose TGS differ only within the
    # run-to-run noise (or an unstable shape's, or with no noise known): they confirm nothing
    unresolved: tuple[tuple[ShapeRow, ShapeRow], ...] = ()
    resolved: int = 0  # pairs in the predicted order beyond the noise

    @property
    def matches(self) -> bool:
        """Every pair of shapes measured in the predicted order, each beyond the noise."""
        return not self.inversions and not self.unresolved and self.resolved > 0

    @property
    def within_noise(self) -> bool:
        """No pair measured out of the predicted order, but none beyond the noise either."""
        return not self.inversions and bool(self.unresolved) and not self.resolved

    @property
    def partly(self) -> bool:
        """No pair measured out of the predicted order; some differ beyond the noise, some not."""
        return not self.inversions and bool(self.unresolved) and self.resolved > 0

    @property
    def matches_beyond_noise(self) -> bool:
        """Every inversion is within the noise."""
        return all(i.within_noise for i in self.inversions)


def evidence_views(
    results: Sequence[JobResult],
    loaded: Mapping[str, RunEvidence] | None,
    jobs: Sequence[JobResult] = (),
    winner: str | None = None,
) -> list[EvidenceView]:
    """The baseline evidence run, then the winner's, each with its artifacts when loaded. Every
    stored job counts (`jobs`: a winner's evidence run the current plan no longer names is still
    its evidence): a measured run first, then one that re-ran `winner`, then the latest."""
    views = []
    for kind, role in ((RunKind.EVIDENCE, "baseline"), (RunKind.WINNER_EVIDENCE, "winner")):
        found = [r for r in (*results, *jobs) if r.kind is kind]
        result = max(
            found,
            default=None,
            key=lambda r: (r.measured, winner is not None and r.resolved_from == winner, r.finished_at),
        )
        if result is not None:
            views.append(EvidenceView(role, result, (loaded or {}).get(result.job_id)))
    return views


def why(views: Sequence[EvidenceView]) -> Why | None:
    """The comparison of the two evidence runs; None unless both ran."""
    base = next((v for v in views if v.role == "baseline"), None)
    winner = next((v for v in views if v.role == "winner"), None)
    if base is None or winner is None:
        return None
    a = base.evidence.inventory if base.evidence else None
    b = winner.evidence.inventory if winner.evidence else None
    rows = diff(a, b) if a is not None and b is not None else None
    buckets = (
        tuple((name, x[1], y[1]) for name, x, y in zip(BUCKETS, base.buckets, winner.buckets))
        if base.buckets and winner.buckets
        else ()
    )
    return Why(
        base,
        winner,
        tuple(describe_diff(rows)) if rows is not None else (),
        None if rows is None else any(r.changed for r in rows),
        buckets,
    )


def _beyond_noise(a: ShapeRow, b: ShapeRow, noise: stats.Noise | None) -> bool:
    """Whether `a` and `b` differ beyond the run-to-run noise (never for an unstable shape)."""
    if noise is None or "unstable" in (a.direction, b.direction):
        return False
    c = stats.compare(a.runs or (a.tgs,), b.runs or (b.tgs,), noise)
    return c.verdict is not stats.Direction.WITHIN_NOISE


def _judged(c: stats.Comparison | None) -> tuple[float | None, float | None, str, str]:
    """A shape's interval and verdict, as the leaderboard gives them (none when not compared)."""
    return (None, None, "", "") if c is None else (c.ci_low_pct, c.ci_high_pct, stats.words(c), stats.direction(c))


def pipeline(
    cell: Cell, measured: Sequence[JobResult], baseline: float | None, noise: stats.Noise | None = None
) -> Pipeline | None:
    """Predicted bubble next to measured TGS for every measured wave-5 shape; None without any."""
    stages = cell.parallelism.size("PP")
    shapes = {s.name: s for s in cell.pipeline_shapes}
    rows: list[ShapeRow] = []
    for r in measured:
        if r.kind is not RunKind.PIPELINE_SHAPE or r.profile not in shapes or r.config_tag != cell.primary_config.name:
            continue
        if any(row.profile == r.profile for row in rows):
            continue  # one row per shape: its figure holds every run of it
        shape = shapes[r.profile]
        # The figure every output shows (figures.py): the mean of every run of these settings.
        fig = figures.figure(r, measured)
        tgs = fig.tgs if fig else r.tgs or 0.0
        rows.append(
            ShapeRow(
                r.profile,
                shape.microbatches,
                shape.virtual_stages,
                predicted_bubble(stages, shape.microbatches, shape.virtual_stages),
                tgs,
                fig.delta_pct if fig and fig.comparison else delta_pct(tgs, baseline),
                " ".join(fig.job_ids) if fig else r.job_id,
                *_judged(fig.comparison if fig else None),
                tuple(v for _, v in fig.runs) if fig else (),
            )
        )
    if not rows:
        return None
    rows.sort(key=lambda row: (row.bubble, row.profile))
    inversions, unresolved, resolved = [], [], 0
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            if a.bubble == b.bubble:
                continue  # no predicted order between them
            beyond = _beyond_noise(a, b, noise)
            if a.tgs < b.tgs:
                inversions.append(Inversion(a, b, (1 - a.tgs / b.tgs) * 100, noise is not None and not beyond))
            elif beyond:
                resolved += 1
            else:
                unresolved.append((a, b))
    return Pipeline(stages, tuple(rows), tuple(inversions), tuple(unresolved), resolved)
