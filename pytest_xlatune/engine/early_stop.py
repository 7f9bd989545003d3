"""Early stop of an adaptive candidate: the judge the watcher asks on every steady step of its
job (engine/watch.py). It rebuilds the sweep's state with the running job in it and asks
`planner.decide` whether to stop it; in the numerics guard's fail mode a loss that left every
baseline repeat's stops it too. A stop is recorded (`early_stop`) before its cancel is sent, so a
killed session's rerun stores it and never runs the job again. The Driver (engine/adaptive.py)
hands its judge to the runner."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..adaptive import planner
from ..adaptive.values import Observation, Role, RunState, StopEarly
from ..launch.base import SubmittedJob
from ..plan.expand import RunSpec
from ..plan.request import tokens_per_device_step
from ..results import JobResult
from ..verdict import numerics, verdicts
from ..verdict.numerics import Numerics
from ..verdict.steady import steady_state
from .watch import Judge, Watched

if TYPE_CHECKING:  # a type only: engine/adaptive.py imports this module
    from .adaptive import Driver


def stop_judge(driver: Driver, spec: RunSpec, key: str, job: SubmittedJob) -> Judge | None:
    """Whether the planner stops this candidate's job now; the stop is recorded before the
    cancel is sent (a killed session's rerun stores it, never runs the job again)."""
    found = driver.roles.get(key)
    if found is None or found[1] is not Role.PROFILE:
        return None
    item = driver.plan.item(found[0])
    recorded = driver.sweep.stopped_early(job.job_id)
    tokens = tokens_per_device_step(driver.sweep.cell, spec)

    def ask(seen: Watched) -> str:
        if recorded:
            return recorded
        steady = steady_state(seen.log.steps, profiler_on=False, tokens_per_step=tokens)
        if steady is None or len(steady.tgs_values) < driver.plan.rules.futility_from:
            return ""
        latest = driver.sweep.store.latest_by_key()  # one store read per look
        if why := _numerics_stop(driver, spec, key, seen, list(latest.values())):
            driver.sweep.store.append(
                "early_stop", job_id=job.job_id, key=key, item=spec.name, kind="numerics", reason=why
            )
            return why
        now = driver.sweep.clock()
        started = driver.sweep.poller.ran(job.job_id)[0] or now
        run = Observation(
            job.job_id,
            item.name,
            item.key,
            Role.PROFILE,
            started,
            started,
            None,
            steady.tgs_values,
            RunState.RUNNING,
            max(1, driver.sweep.nodes),
        )
        for action in planner.decide(driver.state(now, running=run, latest=latest), now):
            if isinstance(action, StopEarly) and action.run == job.job_id:
                driver.sweep.store.append(
                    "early_stop",
                    job_id=job.job_id,
                    key=key,
                    item=spec.name,
                    kind=action.kind.value,
                    reason=action.reason,
                )
                return action.reason
        return ""

    return ask


def _numerics_stop(driver: Driver, spec: RunSpec, key: str, seen: Watched, stored: Sequence[JobResult]) -> str:
    """Why a running candidate cannot be the recipe whatever its speed: its loss left every
    baseline repeat's (the guard in fail mode); "" while it follows them or in warn mode."""
    if driver.sweep.numerics is not numerics.Mode.FAIL:
        return ""
    main, extra = numerics.trajectories(seen.log.steps)
    losses = {numerics.MAIN: main, **dict(extra)} if main else {}
    check = verdicts.trajectory_check(losses, spec.config_tag, driver.sweep.image, stored, key)
    return "numerics changed: it cannot be the recipe" if check.verdict is Numerics.CHANGED else ""
