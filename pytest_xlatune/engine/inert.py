"""Cutting a candidate whose compiled program equals a measured run's (evidence/inert.py decides).

At compile-done the job's program dump is fingerprinted and the fingerprint stored
(`fingerprint` record); a candidate that compiles to a measured run's program with the same
runtime settings is recorded as `inert` before its cancel is sent, so a session killed after the
cancel stores the shared result on its rerun and never submits the job again.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

from .. import records
from ..evidence.fingerprint import fingerprint, read_dump
from ..evidence.inert import PROGRAM_DIR, Settings, inert_source, inert_text
from ..judge.gate_flags import LockedFlag, locked_flags
from ..judge.lock import Lock
from ..launch.base import SubmittedJob
from ..plan.expand import RunSpec
from ..results import JobResult, RunKind
from ..store import ResultStore
from .watch import Judge, Watched

if TYPE_CHECKING:
    from .runner import JobRunner

# Runs that may be cut as inert: candidates, measured once. Repeats (of any kind: a win's
# confirmation, a control), evidence and gate runs measure again on purpose.
CANDIDATES = (RunKind.PROFILE, RunKind.RESTORE_DEFAULT, RunKind.STACK)


def program_dump(job: SubmittedJob) -> dict[str, str]:
    """The job's program dump (its evidence dump for an evidence run), {} when none is here."""
    for name in (PROGRAM_DIR, "xla_dump"):
        directory = os.path.join(job.job_dir, name)
        if job.job_dir and os.path.isdir(directory):
            return read_dump(directory)
    return {}


def fingerprints(store: ResultStore) -> dict[str, str]:
    """Job id → digest of every complete fingerprint stored."""
    return {str(e["job_id"]): str(e["digest"]) for e in store.events_of("fingerprint") if e.get("complete")}


def gate_flag_states(lock: Lock, store: ResultStore) -> tuple[LockedFlag, ...]:
    """Each locked setting on the new image, read off the store's gate runs and their program
    fingerprints (judge/gate_flags.py): the gate report lists them, the repair runs on an inert one."""
    runs = tuple(r for r in store.latest_by_key().values() if r.wave == "gate")
    prints = fingerprints(store)
    return tuple(f for recipe in lock.recipes for f in locked_flags(recipe, runs, prints))


def record_fingerprint(store: ResultStore, key: str, job: SubmittedJob) -> str:
    """Fingerprint the job's dump once and store it; its digest ("" when there is no complete one)."""
    known = fingerprints(store)
    if job.job_id in known:
        return known[job.job_id]
    files = program_dump(job)
    if not files:
        return ""
    found = fingerprint(files)
    store.write(records.Fingerprint(key=key, job_id=job.job_id, digest=found.digest, hlo_digest=found.hlo_digest,
                                    code_files=found.code_files, complete=found.complete))
    return found.digest if found.complete else ""


def settings_of(runner: JobRunner, spec: RunSpec) -> Settings:
    return Settings.build(spec.config_tag, runner.image if spec.image is None else spec.image,
                          spec.env, spec.overrides, spec.xla_flags, spec.unset_env)


def with_inert(runner: JobRunner, spec: RunSpec, key: str, job: SubmittedJob,
               stop: Judge | None) -> Judge:
    """The watcher's judge: at compile-done (or the first step) fingerprint the program and cut
    an inert candidate; on each new step, `stop` (the adaptive sweep's early stop) as before."""
    done = False
    asked_at: int | None = None
    candidate = spec.kind in CANDIDATES and not (runner.fixed_protocol or spec.evidence or spec.repeat)

    def ask(seen: Watched) -> str:
        nonlocal done, asked_at
        if not done and (seen.compiled or seen.log.last_step is not None):
            done = True
            digest = record_fingerprint(runner.store, key, job)
            measured = [r for k, r in runner.store.latest_by_key().items() if k != key and (
                not runner.remeasure or k in runner._ran_this_session)]  # --remeasure: this session's
            source = inert_source(digest, settings_of(runner, spec), measured,
                                  fingerprints(runner.store)) if candidate else None
            if source is not None:
                reason = inert_text(source.item)
                runner.store.write(records.Inert(key=key, item=spec.name, job_id=job.job_id,
                                                 source_key=source.key, source_item=source.item, reason=reason))
                return reason
        if stop is None or seen.log.last_step is None or seen.log.last_step == asked_at:
            return ""
        asked_at = seen.log.last_step
        return stop(seen)

    return ask


def inert_result(runner: JobRunner, spec: RunSpec, key: str, job_id: str = "") -> JobResult | None:
    """Store and return `spec`'s share of the run its job (`job_id`, else its pending job of an
    earlier session) compiled to, as with_inert recorded it; None when it has no such record. A
    job of ours still running is cancelled."""
    if not job_id:
        pending = runner.store.pending_submissions().get(key)
        if pending is None or runner.remeasure:  # --remeasure never re-attaches either
            return None
        job_id = str(pending["job_id"])
    record = next((e for e in reversed(runner.store.events_of("inert"))
                   if e.get("key") == key and str(e.get("job_id")) == job_id), None)
    source = runner.store.latest_by_key().get(str(record["source_key"])) if record else None
    if record is None or source is None or not source.measured:
        return None
    if job_id in runner._submitted_here and job_id in runner.poller.tracked and \
            not runner.poller.finished(job_id):
        runner.launcher.cancel(job_id)  # a killed session's job, left running: ours to cut
    runner.poller.forget(job_id)
    shared = replace(source, key=key, item=spec.name, wave=spec.wave, profile=spec.profile,
                     kind=spec.kind, xla_flags=spec.xla_flags, env=spec.env, overrides=spec.overrides,
                     resolved_from=spec.resolved_from, shared_from=source.item, inert=True,
                     reason=str(record["reason"]), retries=())
    runner.store.add_result(shared)
    return shared
