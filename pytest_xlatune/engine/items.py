"""The pytest nodes: a cell file collects into one item per run of its plan."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

from ..cell.load import CellError, load_cell
from ..cell.values import BackendKind, Cell
from ..errors import XlatuneError
from ..launch.base import LauncherError
from ..launch.devices import NoGpuHere
from ..launch.preflight import PreflightError
from ..paths import lock_path
from ..plan.expand import RunKind, RunSpec, arrange, evidence_spec
from ..plan.repair import REPAIR_WAVE
from ..plan.shape_fit import microbatch_misfit, refusal_line
from ..results import JobResult, Verdict
from ..store import StoreWriteError
from ..verdict import figures, verdicts
from ..verdict.lock import LockError
from .outcome import ItemOutcome, Measurement, Regression, RunFailed
from .prior import stored_evidence_facts
from .repair_outputs import skip_reason as repair_skip
from .session import SESSION_KEY
from .sweep import Sweep
from .watch import SweepStopped

if TYPE_CHECKING:  # types only: pytest exports no name for what repr_failure returns
    from _pytest._code.code import TerminalRepr, TracebackStyle
    from typing_extensions import Required, TypedDict, Unpack

    class NodeArgs(TypedDict, total=False):
        """What `from_parent` hands a node's constructor besides our own keywords."""

        name: Required[str]
        parent: pytest.Collector
        config: pytest.Config
        session: pytest.Session
        nodeid: str


def slot_group(cell: Cell) -> str:
    """The xdist group of a cell: its nodes (all local cells share this machine's CPUs)."""
    if cell.backend.kind is BackendKind.LOCAL:
        return "local"
    # xdist finds the group after the last "@" only when no "]" follows it: keep it plain.
    return re.sub(r"[^A-Za-z0-9_.=+-]", "_", cell.slot.text)


class Stopped(XlatuneError):
    """A stop trigger fired during this item; the message is the STOP message."""


class CellFile(pytest.File):
    """A `cells/*.yml` file; validation errors are one line naming file, line and key. It
    collects one `Wave` per wave, in run order, each holding that wave's items."""

    cell: Cell

    def collect(self) -> Iterator[Wave | Unlocked]:
        runtime = self.config.stash[SESSION_KEY]
        self.cell = load_cell(self.path, runtime.kind_checks)
        # `--dist loadgroup` groups by a `@group` suffix of the node id. xdist adds it by
        # rewriting a private attribute that pytest 9 no longer reads, so the suffix is put in
        # the item name instead (only on xdist workers running loadgroup).
        grouped = getattr(self.config.option, "loadgroup", False) or getattr(self.config, "workerinput", {}).get(
            "xlatune_loadgroup", False
        )  # plugin: -n alone
        suffix = f"@{slot_group(self.cell)}" if grouped else ""
        try:
            specs = runtime.plan_for(self.cell)
        except LockError:
            if runtime.settings.gate and not lock_path(self.cell.path).exists():
                # A sweep that found nothing better writes no lock: nothing to gate here, and the
                # other cells of `pytest cells/ --xlatune-gate` still run.
                yield Unlocked.from_parent(self, name="gate", cell=self.cell)
                return
            raise
        if misfit := microbatch_misfit(self.cell, specs, runtime.settings.workload):
            raise misfit  # refused here, not when the workload refuses the run
        if self.cell.catalog_waves:
            # Catalog candidates run in the order the stored evidence run gives (a session after
            # the evidence run); which of them are skipped is decided again at run time.
            specs = arrange(
                self.cell,
                specs,
                stored_evidence_facts(self.cell, runtime.store_for(self.cell), runtime.cell_settings(self.cell).image),
            )
        for wave, runs in itertools.groupby(specs, key=lambda spec: spec.wave):
            yield Wave.from_parent(self, name=wave, specs=tuple(runs), cell=self.cell, suffix=suffix)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, (CellError, LockError)):
            # Files under the rootdir are named as in node ids: `cells/x.yml:3: ...`.
            return str(excinfo.value).replace(f"{self.config.rootpath}{os.sep}", "")
        return super().repr_failure(excinfo)  # pytest.Collector's takes no style


class Wave(pytest.Collector):
    """One wave of a cell (`wave2`), so that `cell.yml::wave2` and `cell.yml::wave2::p[tag]`
    select like a module's class and test."""

    def __init__(self, *, specs: tuple[RunSpec, ...], cell: Cell, suffix: str, **kwargs: Unpack[NodeArgs]) -> None:
        super().__init__(**kwargs)
        self.specs, self.cell, self.suffix = specs, cell, suffix

    def collect(self) -> Iterator[CellItem]:
        for spec in self.specs:
            name = spec.name.split("::", 1)[1] + self.suffix
            # The node id as pytest parses a stored one (cache/lastfailed, --deselect): the
            # bracket is the parametrization, so --lf/--ff/--sw find these items again.
            yield CellItem.from_parent(self, name=name, nodeid=f"{self.nodeid}::{name}", spec=spec, cell=self.cell)


class Unlocked(pytest.Item):
    """Under --xlatune-gate, a cell without a lock: one skipped item saying so (a sweep that found
    nothing better writes no lock), so the other cells of `pytest cells/ --xlatune-gate` run."""

    def __init__(self, *, cell: Cell, **kwargs: Unpack[NodeArgs]) -> None:
        super().__init__(**kwargs)
        self.cell = cell

    def runtest(self) -> None:
        root = self.config.rootpath

        def shown(path: Path) -> Path:
            return path.relative_to(root) if path.is_relative_to(root) else path

        _skip(
            f"{shown(lock_path(self.cell.path))}: no recipe lock, nothing to gate (a finished sweep writes "
            f"one when it finds a recipe better than the baseline: run pytest {shown(self.cell.path)} first)"
        )

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"cell: {self.cell.path.name} (no lock)"


def stored_failure_line(result: JobResult, nodeid: str, now: float) -> str:
    """What a failure reused from the store says first: which job, how long ago, how to rerun."""
    ended = result.ended_at or result.finished_at or result.submitted_at
    age = f", {_age(now - ended)} ago" if ended else ""
    return (
        f"stored failure (job {result.job_id}{age}, from an earlier session; not run again): "
        f"run its job again with pytest --lf, or pytest {shlex.quote(nodeid)} --xlatune-remeasure"
    )


def _age(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _skip(reason: str) -> NoReturn:
    """Skip the running item; `-rs` shows the item's place in the cell, not this file's."""
    raise pytest.skip.Exception(reason, _use_item_location=True)


class CellItem(pytest.Item):
    """One run of the sweep: measures TGS, or asserts a recipe does not regress a config tag."""

    def __init__(self, *, spec: RunSpec, cell: Cell, **kwargs: Unpack[NodeArgs]) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.cell = cell
        self.outcome = ItemOutcome(cell.path, spec.name)
        self.add_marker(pytest.mark.xlatune)
        # Under `-n N --dist loadgroup` items of one slot stay on one worker, in order, so two
        # cells on the same nodes never run at once; cells on disjoint nodelists run in parallel.
        self.add_marker(pytest.mark.xdist_group(name=slot_group(cell)))

    def runtest(self) -> None:
        # First, so that every report of this item (also a skip) names its cell and run.
        self._show(ItemOutcome(self.cell.path, self.spec.name))
        try:
            self._run()
        except (Regression, RunFailed) as error:
            settings = self.config.stash[SESSION_KEY].settings
            if not (settings.gate and settings.gate_advisory):
                raise
            # --xlatune-gate-advisory: reported (x, and in <MODEL_TAG>-gate.md), never failed.
            self._show(self.outcome.taken_as_advisory())
            text = (
                str(error)
                if isinstance(error, Regression)
                else f"job {error.result.job_id} ({error.result.verdict.value}): {error.result.reason}"
            )
            pytest.xfail(f"advisory gate: {text}")
        except SweepStopped as stop:
            runtime = self.config.stash[SESSION_KEY]
            self._show(self.outcome.stopped_sweep())  # no lock from this sweep
            raise Stopped(runtime.stop(self.cell, stop, self.session)) from None
        except StoreWriteError as error:  # never report a run whose record is not on disk
            runtime = self.config.stash[SESSION_KEY]
            self._show(self.outcome.stopped_sweep())
            raise Stopped(runtime.store_failed(error, self.session)) from None

    def _show(self, outcome: ItemOutcome) -> None:
        """Keep the outcome so far; every report of this item carries its properties."""
        self.outcome = outcome
        self.user_properties[:] = [
            p for p in self.user_properties if not p[0].startswith("xlatune_")
        ] + outcome.user_properties()

    def _run(self) -> None:
        runtime = self.config.stash[SESSION_KEY]
        try:
            sweep = runtime.sweep_for(self.cell, self.nodeid)
        except NoGpuHere as error:
            _skip(str(error))
        if reason := sweep.skip_reason(self.spec) or (
            self.spec.wave == REPAIR_WAVE and repair_skip(runtime, self.cell)
        ):
            _skip(reason)
        if sweep.adaptive is not None and (reason := sweep.adaptive.before(self.spec)):
            _skip(reason)  # a stop condition or the budget ended the search before this item
        spec, reason = sweep.resolution(self.spec)
        if spec is None:  # what to run next, only when something is left to measure
            _skip(
                f"{reason} (measure waves 2-4 first: pytest {self._file_id()} -k 'wave2 or wave3 or wave4')"
                if sweep.unmeasured(self.spec)
                else reason
            )
        needs = self._needs(sweep, spec)
        if spec.kind is RunKind.CROSS_CONFIG and needs:
            _skip(f"cannot check the recipe on [{spec.config_tag}]: {needs}")
        ran = sweep.run(spec)
        if sweep.adaptive is not None:
            sweep.adaptive.after(self.spec)
        result = next((r for r in sweep.results() if r.key == ran.result.key), ran.result)
        departed = ""
        # The figure of these settings so far (every run of them, pooled: figures.py); the
        # terminal summary, junit and the reports show it again once later runs have joined it.
        found = figures.figure(result, sweep.results_here()) if result.tgs is not None else None
        if spec.kind not in figures.UNCOMPARED and result.tgs is not None:
            departed = verdicts.numerics_check(result, sweep.results()).where()
        self._show(self.outcome.measured(Measurement(result, spec, ran.reused, found, departed, needs)))
        if result.verdict is Verdict.INFRA_FLAKE:
            _skip(f"dropped as infra-flake: {result.reason} (jobs: {'; '.join(result.retries)}; last {result.job_id})")
        if result.verdict is Verdict.OOM:
            pytest.xfail(f"job {result.job_id}: {result.reason} (OOM is never retried)")
        if spec.kind is RunKind.GATE_RECIPE and result.verdict is Verdict.UNKNOWN_FLAG:
            raise Regression(
                f"locked recipe {spec.profile!r} [{spec.config_tag}]: a locked flag "
                f"no longer exists in image {sweep.image or '(default)'} — {result.reason}"
                f" (job {result.job_id}); not a performance regression: re-tune the recipe"
            )
        if not result.measured:  # "stored" only for a failure no run of this session produced
            raise RunFailed(result, stored=ran.reused and not sweep.runner.ran_in_session(ran.result.key))
        if spec.kind not in (RunKind.CROSS_CONFIG, RunKind.GATE_RECIPE):
            return
        said: list[str] = []  # the gate's warnings: the terminal now, junit and the reports later

        def warn(line: str) -> None:
            if line not in said:  # a re-measured gate says the same numerics warning again
                said.append(line)
                runtime.warn(f"{spec.name}: {line}")

        try:
            if spec.kind is RunKind.CROSS_CONFIG:
                sweep.gate_cross_config(spec, [result], warn)
            else:
                sweep.gate_image(spec, [result], runtime.lock_for(self.cell), warn)
        finally:  # its re-measurements joined its figure: the mean the gate judged, shown as such
            if self.outcome.measurement is not None and result.tgs is not None:
                found = figures.figure(result, sweep.results_here())
                self._show(self.outcome.measured(replace(self.outcome.measurement, figure=found)))
            self._show(self.outcome.warned(tuple(said)))

    def _file_id(self) -> str:
        return self.nodeid.split("::", 1)[0]

    def _needs(self, sweep: Sweep, spec: RunSpec) -> str:
        """What this run needs from runs not in the store (and not selected before it), with the
        commands that measure them; "" when the store has them. Never runs them itself."""

        def ids(kind: RunKind) -> str:
            return " ".join(
                shlex.quote(f"{self._file_id()}::{s.name}")
                for s in sweep.specs
                if s.kind is kind and s.config_tag == spec.config_tag
            )

        needs = []
        if spec.catalog and sweep.stored(evidence_spec(self.cell)) is None:
            needs.append(
                "catalog order and relevance need the wave1.5 evidence run, and the store "
                f"has none: pytest {ids(RunKind.EVIDENCE)}"
            )
        if spec.kind not in (RunKind.GATE_RECIPE, *figures.UNCOMPARED) and not verdicts.baseline_values(
            sweep.results(), spec.config_tag
        ):
            needs.append(
                f"a Δ % needs a measured baseline-deployed [{spec.config_tag}], and the "
                f"store has none: pytest {ids(RunKind.BASELINE)}"
            )
        return "; ".join(needs)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        error = excinfo.value
        if isinstance(error, RunFailed):
            result = error.result
            lines = [f"job {result.job_id} ({result.verdict.value}): {result.reason}", f"log: {result.log_path}"]
            if key := refusal_line(self.cell, self.spec, result.reason, self._file_id()):
                lines.insert(1, key)
            if error.stored:  # never mistaken for a run of this session
                lines.insert(0, stored_failure_line(result, self.nodeid, time.time()))
            if result.log_tail:
                lines += ["--- log tail ---", result.log_tail.rstrip()]
            return "\n".join(lines)
        if isinstance(error, (Regression, PreflightError, Stopped)):
            return str(error)
        if isinstance(error, LauncherError):  # e.g. sbatch refused the job: its words, no traceback
            return f"the job could not be submitted: {error}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, max(self.spec.line - 1, 0), f"cell: {self.spec.name}"
