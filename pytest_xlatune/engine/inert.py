"""Cutting a candidate whose compiled program equals a measured run's (evidence/inert.py decides).

At compile-done the job's program dump is fingerprinted and the fingerprint stored
(`fingerprint` record); a candidate that compiles to a measured run's program with the same
runtime settings is recorded as `inert` before its cancel is sent, so a session killed after the
cancel stores the shared result on its rerun and never submits the job again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import records
from ..evidence.fingerprint import fingerprint
from ..evidence.inert import Settings, inert_source, inert_text
from ..launch.base import Launcher, ProgramDumps, SubmittedJob
from ..plan.expand import RunSpec
from ..results import JobResult, RunKind, Verdict
from ..store import ResultStore
from ..verdict.gate_flags import LockedFlag, locked_flags
from ..verdict.lock import Lock
from .job_result import shared_result
from .watch import Judge, Watched

if TYPE_CHECKING:
    from ..cell.values import Cell
    from .runner import JobRunner
    from .session import Session

# Runs that may be cut as inert: candidates, measured once. Repeats (of any kind: a win's
# confirmation, a control), evidence and gate runs measure again on purpose.
CANDIDATES = (RunKind.PROFILE, RunKind.RESTORE_DEFAULT, RunKind.STACK)


def program_dump(launcher: Launcher, job: SubmittedJob, stepped: bool) -> dict[str, str]:
    """The job's program dump as its launcher reads it back (launch/base.ProgramDumps), {} for
    none: a launcher that cannot read one never has a candidate cut."""
    return launcher.program_dump(job, stepped=stepped) if isinstance(launcher, ProgramDumps) else {}


def fingerprints(store: ResultStore) -> dict[str, str]:
    """Job id → digest of every complete fingerprint stored."""
    return {str(e["job_id"]): str(e["digest"]) for e in store.events_of("fingerprint") if e.get("complete")}


def gate_flag_states(lock: Lock, store: ResultStore, runs: Sequence[JobResult]) -> tuple[LockedFlag, ...]:
    """Each locked setting on the new image, read off this gate's runs (`runs`: an earlier gate's,
    of another image maybe, are none of them) and their program fingerprints
    (verdict/gate_flags.py): the gate report lists them, the repair runs on an inert one."""
    prints = fingerprints(store)
    return tuple(f for recipe in lock.recipes for f in locked_flags(recipe, runs, prints))


def gate_runs(runtime: Session, cell: Cell) -> tuple[JobResult, ...]:
    """This gate's runs of the cell: those its sweep ran, or (no sweep here: an xdist controller,
    or a pre-flight that refused the cell) those that ended after the session began. An earlier
    gate's runs, latest in the store until run again and maybe of another image, are not its own."""
    sweep = runtime.sweeps.get(cell.path)
    return tuple(
        r
        for r in runtime.store_for(cell).latest_by_key().values()
        if r.wave == "gate"
        and (sweep.runner.ran_in_session(r.key) if sweep is not None else r.finished_at >= runtime.started_at)
    )


def record_fingerprint(
    store: ResultStore, key: str, job: SubmittedJob, launcher: Launcher, stepped: bool = True
) -> str | None:
    """Fingerprint the job's dump once and store it; its digest ("" when it is not complete),
    None when no dump could be read (yet: `stepped`, see ProgramDumps)."""
    known = fingerprints(store)
    if job.job_id in known:
        return known[job.job_id]
    files = program_dump(launcher, job, stepped)
    if not files:
        return None
    found = fingerprint(files)
    store.write(
        records.FingerprintTaken(
            key=key,
            job_id=job.job_id,
            digest=found.digest,
            hlo_digest=found.hlo_digest,
            code_files=found.code_files,
            complete=found.complete,
        )
    )
    return found.digest if found.complete else ""


def settings_of(runner: JobRunner, spec: RunSpec) -> Settings:
    return Settings.build(
        spec.config_tag,
        runner.image if spec.image is None else spec.image,
        spec.env,
        spec.overrides,
        spec.xla_flags,
        spec.unset_env,
    )


def with_inert(runner: JobRunner, spec: RunSpec, key: str, job: SubmittedJob, stop: Judge | None) -> Judge:
    """The watcher's judge: at compile-done (or the first step) fingerprint the program and cut
    an inert candidate; on each new step, `stop` (the adaptive sweep's early stop) as before. A
    dump not readable at the compile line is looked for once more at the first step."""
    done = False
    asked_at: int | None = None
    candidate = spec.kind in CANDIDATES and not (runner.fixed_protocol or spec.evidence or spec.repeat)

    def ask(seen: Watched) -> str:
        nonlocal done, asked_at
        stepped = seen.log.last_step is not None
        if not done and (seen.compiled or stepped):
            digest = record_fingerprint(runner.store, key, job, runner.launcher, stepped)
            done = digest is not None or stepped
            measured = [
                r
                for k, r in runner.store.latest_by_key().items()
                if k != key and (not runner.remeasure or k in runner._ran_this_session)
            ]  # --remeasure: this session's
            source = (
                inert_source(digest, settings_of(runner, spec), measured, fingerprints(runner.store))
                if candidate and digest
                else None
            )
            if source is not None:
                reason = inert_text(source.item)
                runner.store.write(
                    records.Inert(
                        key=key,
                        item=spec.name,
                        job_id=job.job_id,
                        source_key=source.key,
                        source_item=source.item,
                        reason=reason,
                    )
                )
                return reason
        if stop is None or seen.log.last_step is None or seen.log.last_step == asked_at:
            return ""
        asked_at = seen.log.last_step
        return stop(seen)

    return ask


def inert_result(runner: JobRunner, spec: RunSpec, key: str, job_id: str = "") -> JobResult | None:
    """Store and return `spec`'s share of the run its job (`job_id`, else its pending job of an
    earlier session) compiled to, as with_inert recorded it; None when it has no such record. A
    job of ours still running is cancelled; the cut job of a killed session is stored
    (store_lost_cuts)."""
    pending = None
    if not job_id:
        pending = runner.store.pending_submissions().get(key)
        if pending is None or runner.remeasure:  # --remeasure never re-attaches either
            return None
        job_id = str(pending["job_id"])
    record = next(
        (
            e
            for e in reversed(runner.store.events_of("inert"))
            if e.get("key") == key and str(e.get("job_id")) == job_id
        ),
        None,
    )
    source = runner.store.latest_by_key().get(str(record["source_key"])) if record else None
    if record is None or source is None or not source.measured:
        return None
    if job_id in runner._submitted_here and job_id in runner.poller.tracked and not runner.poller.finished(job_id):
        runner.launcher.cancel(job_id)  # a killed session's job, left running: ours to cut
    runner.poller.forget(job_id)
    shared = shared_result(source, key, spec, inert=True, reason=str(record["reason"]))
    runner.store.add_result(shared)
    if pending is not None:
        store_lost_cuts(runner)
    return shared


def store_lost_cuts(runner: JobRunner) -> None:
    """Store the cut job of each inert share whose job has no record yet, as a cancelled attempt:
    the session that cut it was killed before storing it (its cost is unknown: that session did
    not see the job end). So a kill -9 right after a cut loses no job from the sweep's cost."""
    known = {r.job_id for r in runner.store.jobs()}
    latest = runner.store.latest_by_key()
    submitted = {str(e["job_id"]): e for e in runner.store.events_of("submitted")}
    for cut in runner.store.events_of("inert"):
        job_id, shared = str(cut["job_id"]), latest.get(str(cut["key"]))
        if job_id in known or shared is None or not shared.inert:
            continue
        job = submitted.get(job_id, {})
        runner.store.write(
            records.Attempt(
                JobResult(
                    key=shared.key,
                    item=shared.item,
                    wave=shared.wave,
                    profile=shared.profile,
                    config_tag=shared.config_tag,
                    kind=shared.kind,
                    job_id=job_id,
                    verdict=Verdict.CANCELLED,
                    reason=shared.reason,
                    xla_flags=shared.xla_flags,
                    env=shared.env,
                    overrides=shared.overrides,
                    nodelist=shared.nodelist,
                    image=shared.image,
                    backend=runner.launcher.name,
                    log_path=str(job.get("log_path", "")),
                    resolved_from=shared.resolved_from,
                    submitted_at=float(job.get("time", 0.0)),
                    finished_at=runner.clock(),
                    nodes=runner.nodes,
                    compile_cache=str(job.get("compile_cache", "")),
                )
            )
        )
        known.add(job_id)
