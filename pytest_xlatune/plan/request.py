"""RunSpec + Cell → JobRequest: the MaxText passthrough args and the flags a job gets (pure)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..cell.values import HEARTBEAT_KEY, HEARTBEAT_VALUE, BackendKind, Cell
from ..evidence.nccl_applied import debug_env
from ..jobs import JobRequest
from .expand import RunKind, RunSpec

HEARTBEAT = (HEARTBEAT_KEY, HEARTBEAT_VALUE)
# Profiler on steps 5-8; steady state then uses steps 9-14 (xla-tuning skill).
PROFILER_ARGS = (("profiler", "xplane"), ("skip_first_n_steps_for_profiler", "5"), ("profiler_steps", "4"))


def passthrough(cell: Cell, spec: RunSpec) -> tuple[str, ...]:
    """`key=value` args for every tuning submission: synthetic data, fixed steps, the cell's shape."""
    pairs: dict[str, str] = {"steps": str(cell.steps), "dataset_type": "synthetic"}
    if cell.pdbs is not None:
        pairs["per_device_batch_size"] = str(cell.pdbs)
    pairs.update(cell.parallelism.overrides())
    pairs.update(cell.overrides)
    pairs.update(spec.overrides)
    if spec.evidence:
        pairs.update(PROFILER_ARGS)
    if cell.backend.kind is not BackendKind.LOCAL:
        pairs.update([HEARTBEAT])
    return tuple(f"{key}={value}" for key, value in pairs.items())


def job_request(cell: Cell, spec: RunSpec) -> JobRequest:
    """The launcher input. Local and sbatch jobs get the env file's settings composed in here;
    maxtext-slurm jobs inherit them from configs/<MODEL_TAG>.env.sh and get TUNE_PROFILE instead."""
    env_flags: tuple[str, ...] = ()
    env_vars: tuple[tuple[str, str], ...] = ()
    if cell.backend.kind is not BackendKind.MAXTEXT_SLURM:
        env_flags = tuple(e.deployed for e in cell.env_file if e.kind == "xla")
        env_vars = tuple((e.name, e.value) for e in cell.env_file if e.kind == "env")
    env = dict(env_vars)
    for name in spec.unset_env:
        env.pop(name, None)
    env.update(spec.env)
    env.update(debug_env(env.items()))  # NCCL_DEBUG=INFO where a run sets NCCL_ALGO/PROTO/channels
    return JobRequest(
        job_name=f"{cell.model_tag}-{spec.profile}-{spec.config_tag}",
        profile=spec.profile,
        passthrough=passthrough(cell, spec),
        xla_flags=env_flags + spec.xla_flags,
        env=tuple(env.items()),
        unset_env=spec.unset_env,
        evidence=spec.evidence,
        config_tag=spec.config_tag,
        resolved_from=spec.resolved_from,
        image=spec.image,
    )


def possible_specs(specs: Sequence[RunSpec]) -> Iterator[RunSpec]:
    """Every run a sweep of these specs may submit: a run resolved from results (the winner's
    evidence run, a wave-6 cross-check) once per profile it could take its flags from. Stacks are
    left out (their flags are the winners', their names the cell's)."""
    sources = [s for s in specs if s.kind is RunKind.PROFILE]
    for spec in specs:
        if spec.kind in (RunKind.WINNER_EVIDENCE, RunKind.CROSS_CONFIG) and spec.needs_resolution:
            yield from (spec.resolve(source) for source in sources)
        elif spec.kind is not RunKind.STACK:
            yield spec


def possible_requests(cell: Cell, specs: Sequence[RunSpec]) -> Iterator[JobRequest]:
    """The job requests of `possible_specs`."""
    return (job_request(cell, spec) for spec in possible_specs(specs))


def tokens_per_device_step(cell: Cell, spec: RunSpec) -> float | None:
    """Tokens one device trains on per step (pdbs × max_target_length), from the job's own args;
    the embedded workload's defaults fill what the cell leaves out. None when it is not known
    (a MaxText job whose sequence length comes from its gpu.yml). Derives TGS for MaxText eras
    that print no Tokens/s/device."""
    pairs = dict(arg.split("=", 1) for arg in passthrough(cell, spec))
    if cell.backend.kind is BackendKind.LOCAL:
        from ..workload.args import Config  # the local backend's trainer; its defaults apply

        pairs.setdefault("per_device_batch_size", str(Config.per_device_batch_size))
        pairs.setdefault("max_target_length", str(Config.max_target_length))
    try:  # MaxText counts every micro-batch of an accumulated step (calculate_tokens_training_per_device)
        tokens = (
            float(pairs["per_device_batch_size"])
            * float(pairs["max_target_length"])
            * float(pairs.get("gradient_accumulation_steps", "1"))
        )
    except (KeyError, ValueError):
        return None
    return tokens if tokens > 0 else None
