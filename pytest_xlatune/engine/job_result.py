"""A watched job's ending read into its `Diagnosis` (triage/) and its stored `JobResult`: the
steady-state measurement, the losses, the evidence copied here, the cost in node-minutes."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..evidence.nccl_applied import not_applied
from ..launch.base import SubmittedJob
from ..plan.expand import RunSpec
from ..plan.request import tokens_per_device_step
from ..results import JobResult, Verdict, node_minutes
from ..triage.diagnosis import Diagnosis, Evidence, diagnose
from ..verdict import numerics
from ..verdict.steady import last_loss, steady_state
from .watch import Watched

if TYPE_CHECKING:  # a type only: engine/runner.py imports this module
    from .runner import JobRunner


def diagnose_watched(seen: Watched, steps: int) -> Diagnosis:
    """How the watched job ended, from its log, exit code and scheduler state (triage/)."""
    return diagnose(
        Evidence.from_log(
            seen.log,
            steps,
            exit_code=seen.progress.exit_code,
            cancelled_by_us=bool(seen.cancelled_for),
            scheduler_state=seen.progress.state,
            hang_phase=seen.hang_phase,
        )
    )


def _log_source(runner: JobRunner, job: SubmittedJob) -> str:
    """The file whose lines were parsed (maxtext-slurm: maybe a renamed file or a Ray worker
    log), else the path known at submission."""
    return (runner.log_source(job) if runner.log_source else None) or job.log_path


def job_result(
    runner: JobRunner,
    spec: RunSpec,
    key: str,
    job: SubmittedJob,
    seen: Watched,
    diagnosis: Diagnosis,
    submitted_at: float,
    retries: tuple[str, ...],
) -> JobResult:
    """The run's result as stored: `diagnosis`'s verdict (no steps when the steady window has no
    TGS), the steady-state figures, the losses, the evidence fetched here, the job's cost."""
    verdict, reason = diagnosis.verdict, diagnosis.reason
    steady = steady_state(
        seen.log.steps, profiler_on=spec.evidence, tokens_per_step=tokens_per_device_step(runner.cell, spec)
    )
    if verdict.measured and (steady is None or steady.tgs is None):
        verdict, reason = (
            Verdict.NO_STEPS,
            "no Tokens/s/device in the steady-state window"
            + (
                f" ({len(seen.log.steps)} steps completed; their lines carry no seconds either)"
                if steady is None
                else f" (mean step {steady.step_seconds:.3f} s; tokens per device "
                "per step unknown: set pdbs and overrides.max_target_length to derive TGS)"
            ),
        )
    ended = seen.ended_at if seen.ended_at is not None else runner.clock()
    started = seen.started_at if seen.started_at is not None else ended
    artifacts = runner.launcher.artifacts(job)
    losses, extra_losses = numerics.trajectories(seen.log.steps)
    if spec.evidence and artifacts and runner.fetch_artifacts is not None:
        artifacts, problems = runner.fetch_artifacts(artifacts, job.job_id)
        for problem in problems:
            (runner.warn or runner.report)(f"{spec.name} job {job.job_id}: evidence not copied here: {problem}")
    return JobResult(
        key=key,
        item=spec.name,
        wave=spec.wave,
        profile=spec.profile,
        config_tag=spec.config_tag,
        kind=spec.kind,
        job_id=job.job_id,
        verdict=verdict,
        reason=reason,
        xla_flags=spec.xla_flags,
        env=spec.env,
        overrides=spec.overrides,
        unset_env=spec.unset_env,
        nodelist=runner.nodelist,
        image=runner.image if spec.image is None else spec.image,
        backend=runner.launcher.name,
        tgs=steady.tgs if steady else None,
        tgs_derived=bool(steady and steady.derived),
        step_seconds=steady.step_seconds if steady else None,
        last_loss=last_loss(seen.log.steps),
        losses=losses,
        extra_losses=extra_losses,
        tgs_values=steady.tgs_values if steady else (),
        steps_used=steady.steps_used if steady else (),
        step_count=len(seen.log.steps),
        log_path=_log_source(runner, job),
        log_tail="" if verdict.measured else seen.log.tail_text(),
        artifacts=tuple(sorted(artifacts.items())),
        resolved_from=spec.resolved_from,
        exit_code=seen.progress.exit_code,
        submitted_at=submitted_at,
        finished_at=runner.clock(),
        retries=retries,
        nodes=runner.nodes,
        started_at=started,
        ended_at=ended,
        node_minutes=node_minutes(runner.nodes, started, ended),
        compile_cache=job.compile_cache,
        not_applied=not_applied(spec.env, seen.log.library_lines) if verdict.measured else "",
    )


def shared_result(
    source: JobResult, key: str, spec: RunSpec, *, inert: bool | None = None, reason: str | None = None
) -> JobResult:
    """`source`'s measurement stored as `spec`'s run (a duplicate of identical settings, or an
    inert candidate whose program is the source's): the spec's own names and settings, the
    source's job and figures, no retries of its own; `inert` and `reason` as given, else the
    source's."""
    return replace(
        source,
        key=key,
        item=spec.name,
        wave=spec.wave,
        profile=spec.profile,
        kind=spec.kind,
        xla_flags=spec.xla_flags,
        env=spec.env,
        overrides=spec.overrides,
        unset_env=spec.unset_env,
        resolved_from=spec.resolved_from,
        shared_from=source.item,
        inert=source.inert if inert is None else inert,
        reason=source.reason if reason is None else reason,
        retries=(),
    )
