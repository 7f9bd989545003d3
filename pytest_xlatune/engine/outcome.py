"""What one item of a cell came to, and the one place its `xlatune_*` user properties are spelled
(the terminal line, junit, the HTML rows and the session's bookkeeping read them back)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import XlatuneError
from ..plan.expand import RunSpec
from ..report.final import figure_properties
from ..results import JobResult, Verdict
from ..verdict import figures

Properties = list[tuple[str, object]]


class RunFailed(XlatuneError):
    """A job ended without a measurement; carries the result for a readable failure. `stored`:
    the result of a job of an earlier session, reused (not run again) in this one."""

    def __init__(self, result: JobResult, stored: bool = False) -> None:
        super().__init__(result.reason)
        self.result = result
        self.stored = stored


class Regression(XlatuneError):
    """A cross-config re-run regressed its config tag, or a new image the locked recipe, beyond
    the tolerance."""


@dataclass(frozen=True)
class Measurement:
    """The run an item measured (or reused): its result, as pooled into the report, and what the
    item judged of it."""

    result: JobResult
    spec: RunSpec  # the run as resolved (flags filled in)
    reused: bool  # from the store, not run in this session
    figure: figures.Figure | None  # the figure of these settings so far (None: no TGS)
    numerics: str = ""  # where the loss departed from the baseline's ("": it followed, or unknown)
    needs: str = ""  # what the Δ % or the catalog order needs from runs not in the store

    def properties(self) -> Properties:
        result, spec = self.result, self.spec
        return [
            *([("xlatune_needs", self.needs)] if self.needs else []),
            *figure_properties(self.figure),
            ("xlatune_job_tgs", result.own_tgs),
            ("xlatune_job_id", result.job_id),
            ("xlatune_verdict", result.verdict.value),
            ("xlatune_reused", self.reused),
            ("xlatune_shared", result.shared_from),
            ("xlatune_compile_cache", result.compile_cache),
            ("xlatune_inert", result.reason if result.inert else ""),
            ("xlatune_stopped", result.reason if result.verdict is Verdict.STOPPED_EARLY and not result.inert else ""),
            ("xlatune_profile", spec.profile),
            ("xlatune_wave", spec.wave),
            ("xlatune_config_tag", spec.config_tag),
            ("xlatune_numerics", self.numerics),
        ]


@dataclass(frozen=True)
class ItemOutcome:
    """An item's outcome so far: its cell and run first (so that every report, a skip too, names
    them), then the measurement once there is one, then how a failure was taken."""

    cell: Path
    item: str  # the run's name in the cell (`wave2::p[tag]`)
    measurement: Measurement | None = None
    advisory: bool = False  # --xlatune-gate-advisory: a failure reported as xfail
    sweep_stop: bool = False  # the sweep stopped here: no lock from it
    # What its gate printed as a warning (a pass despite the odds, numerics changed under warn),
    # without the item's name: junit, the gate report and the HTML say it in the same words.
    warnings: tuple[str, ...] = ()

    def measured(self, measurement: Measurement) -> ItemOutcome:
        return replace(self, measurement=measurement)

    def taken_as_advisory(self) -> ItemOutcome:
        return replace(self, advisory=True)

    def stopped_sweep(self) -> ItemOutcome:
        return replace(self, sweep_stop=True)

    def warned(self, warnings: tuple[str, ...]) -> ItemOutcome:
        return replace(self, warnings=warnings)

    def user_properties(self) -> Properties:
        """The item's `xlatune_*` user properties, in the order reports have always had them."""
        return [
            ("xlatune_cell", str(self.cell)),
            ("xlatune_item", self.item),
            *(self.measurement.properties() if self.measurement else []),
            *([("xlatune_gate_advisory", True)] if self.advisory else []),
            *([("xlatune_sweep_stop", True)] if self.sweep_stop else []),
            *([(WARNING_KEY, "\n".join(self.warnings))] if self.warnings else []),
        ]


WARNING_KEY = "xlatune_warning"  # the gate's warnings of an item, one a line


def warnings_of(properties: Properties) -> tuple[str, ...]:
    """The gate's warnings an item's properties carry (none: ())."""
    text = str(dict(properties).get(WARNING_KEY) or "")
    return tuple(text.splitlines())
