"""Inert flags: a candidate whose compiled program and runtime settings equal a measured run's.

Every job dumps its train step's optimized module (HLO text and the backend's generated code,
``PROGRAM_DUMP_FLAGS``); the tool fingerprints it (evidence/fingerprint.py) as soon as the job
says the compile is done (``COMPILED_LINE``, or its first step line). A candidate whose
fingerprint equals a measured run's, with the same runtime settings, measures nothing new: its
job is cut after the compile and it shares that run's result, named ``inert here: compiles to
`baseline`'s program``.

Runtime settings are never judged from the program: the environment (NCCL variables and all),
the passthrough overrides, the image, the config tag, unset variables and the XLA flags that act
when the program runs rather than on what is compiled (``RUNTIME_XLA_FLAGS``) must be equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..results import JobResult, RunKind

__all__ = [
    "COMPILED_LINE",
    "PROGRAM_DIR",
    "RUNTIME_XLA_FLAGS",
    "Settings",
    "inert_lines",
    "inert_source",
    "inert_text",
    "program_dump_flags",
]

# Printed by the embedded workload once train_step is compiled (and dumped).
COMPILED_LINE = "xlatune: compiled train_step"
# A job's program dump, under its job directory (an evidence run's full dump is xla_dump).
PROGRAM_DIR = "program"

# XLA flags read by the runtime (collective timeouts, NCCL communicator set-up, thread pools):
# two runs that differ in one of them may run the same program differently.
RUNTIME_XLA_FLAGS = (
    "--xla_gpu_nccl_termination_timeout_seconds",
    "--xla_gpu_enable_nccl_comm_splitting",
    "--xla_gpu_nccl_collective_max_nchannels",
    "--xla_gpu_nccl_p2p_max_nchannels",
    "--xla_gpu_executable_terminate_timeout",
    "--xla_gpu_executable_warn_stuck_timeout",
    "--xla_gpu_first_collective_call_terminate_timeout",
    "--xla_gpu_first_collective_call_warn_stuck_timeout",
    "--xla_gpu_collectives_use_persistent_cliques",
    "--xla_cpu_collective_timeout_seconds",
    # XLA:CPU's thunk runtime: whether its Eigen calls (dots, convolutions) use the intra-op
    # thread pool is decided when they run; the dumped HLO and kernels are the same either way.
    "--xla_cpu_multi_thread_eigen",
)


# Measured with the profiler on: their TGS is not the program's alone.
_PROFILED = (RunKind.EVIDENCE, RunKind.WINNER_EVIDENCE)


def program_dump_flags(directory: str) -> list[str]:
    """The XLA flags that dump only the train step's optimized module, as text, to `directory`."""
    return [f"--xla_dump_to={directory}", "--xla_dump_hlo_as_text", "--xla_dump_hlo_module_re=.*train_step.*"]


def _runtime_flags(flags: Iterable[str]) -> tuple[str, ...]:
    """The runtime-only XLA flags among `flags`, the last setting of each (last wins)."""
    found: dict[str, str] = {}
    for flag in flags:
        name = flag.split("=", 1)[0]
        if name in RUNTIME_XLA_FLAGS:
            found[name] = flag
    return tuple(sorted(found.values()))


@dataclass(frozen=True)
class Settings:
    """What a run sets besides the program: all of it must match for a flag to be inert."""

    config_tag: str
    image: str
    env: tuple[tuple[str, str], ...]
    overrides: tuple[tuple[str, str], ...]
    runtime_flags: tuple[str, ...]
    unset_env: tuple[str, ...] = ()

    @classmethod
    def of(cls, result: JobResult) -> Settings:
        return cls(
            result.config_tag,
            result.image,
            tuple(sorted(result.env)),
            tuple(sorted(result.overrides)),
            _runtime_flags(result.xla_flags),
            tuple(sorted(result.unset_env)),
        )

    @classmethod
    def build(
        cls,
        config_tag: str,
        image: str,
        env: Iterable[tuple[str, str]],
        overrides: Iterable[tuple[str, str]],
        xla_flags: Iterable[str],
        unset_env: Iterable[str] = (),
    ) -> Settings:
        return cls(
            config_tag,
            image,
            tuple(sorted(env)),
            tuple(sorted(overrides)),
            _runtime_flags(xla_flags),
            tuple(sorted(unset_env)),
        )


def inert_source(
    digest: str, settings: Settings, results: Sequence[JobResult], fingerprints: Mapping[str, str]
) -> JobResult | None:
    """The measured run (its own job, no profiler; a partial steady state when the adaptive
    sweep stopped it early) that compiled to `digest` with the same runtime settings, a
    baseline run first; None when there is none. `fingerprints`: job id →
    digest of a complete fingerprint (evidence/fingerprint.Fingerprint.complete)."""
    if not digest or settings.unset_env:
        return None
    found = [
        r
        for r in results
        if r.measured
        and not r.shared_from
        and r.kind not in _PROFILED
        and fingerprints.get(r.job_id) == digest
        and Settings.of(r) == settings
    ]
    found.sort(key=lambda r: (r.kind is not RunKind.BASELINE, r.submitted_at))
    return found[0] if found else None


def inert_text(source_item: str) -> str:
    """The one wording of an inert run, everywhere (terminal, junit, HTML, markdown)."""
    return f"inert here: compiles to `{source_item}`'s program"


def inert_lines(results: Iterable[JobResult]) -> tuple[str, ...]:
    """The report's line listing the inert runs of a cell, () for none."""
    results = list(results)
    flags_of = {r.item: r.xla_flags for r in results if not r.shared_from}
    inert = sorted(
        {
            (r.item, r.shared_from, " ".join(f for f in r.xla_flags if f not in flags_of.get(r.shared_from, ())))
            for r in results
            if r.inert
        }
    )
    if not inert:
        return ()
    return (
        "inert flags: "
        + "; ".join(f"{item} ({flags or 'the same flags'}): {inert_text(source)}" for item, source, flags in inert),
    )
