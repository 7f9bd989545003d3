"""Hand-made cells and JobResults for report tests (golden files, chart, sections, export).

Numbers are chosen so the verdicts are unambiguous under the pooled 0.8 % noise prior:
±4 % and beyond is better/worse, within ±1 % is within noise.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from pytest_xlatune.cell.values import (
    Backend,
    BackendKind,
    Cell,
    ClusterSlot,
    ConfigTag,
    EnvFileEntry,
    Parallelism,
    PipelineShape,
)
from pytest_xlatune.evidence import hlo
from pytest_xlatune.evidence.artifacts import RunEvidence, op_kinds
from pytest_xlatune.evidence.collective_table import inventory
from pytest_xlatune.evidence.profile import summarize
from pytest_xlatune.report.data import ReportData, build
from pytest_xlatune.results import JobResult, Spent, Verdict

DATE = dt.date(2026, 5, 1)
T0 = 1_777_600_000.0  # 2026-05-01T01:46:40Z
AG_1G = "--xla_gpu_all_gather_combine_threshold_bytes=1073741824"
AG_DEFAULT = "--xla_gpu_all_gather_combine_threshold_bytes=8589934592"


def cell(
    parallelism: tuple[tuple[str, int], ...] = (("FSDP", 8),), *, env_file: bool = True, name: str = "golden_fsdp8"
) -> Cell:
    return Cell(
        path=Path(f"cells/{name}.yml"),
        model_tag="golden",
        slot=ClusterSlot(nodelist="chi[2766,2800,2810,2832]"),
        parallelism=Parallelism(parallelism),
        pdbs=4,
        config_tags=(ConfigTag("sparse"), ConfigTag("dense", (("sparse_matmul", "false"),))),
        env_file=(EnvFileEntry("xla", "--xla_gpu_all_gather_combine_threshold_bytes", "1073741824", "8589934592"),)
        if env_file
        else (),
        backend=Backend(BackendKind.MAXTEXT_SLURM),
        image="/mnt/vast/images/maxtext-v26.2.tar",
        hardware="4 nodes × 8× AMD MI355 (288 GB HBM)",
    )


# A recorded loss trajectory of the demo model (bench/numerics.py, -O0 baseline), and the same
# run with dtype=bfloat16 compute: it leaves the baseline's at step 2 (|Δ| 0.006 > 0.003).
LOSSES = tuple(
    enumerate((7.444, 5.975, 4.481, 3.624, 2.741, 1.826, 1.392, 1.001, 0.709, 0.469, 0.347, 0.245, 0.182, 0.126, 0.102))
)
BF16_LOSSES = tuple(
    enumerate((7.444, 5.973, 4.475, 3.618, 2.739, 1.822, 1.389, 0.998, 0.707, 0.468, 0.346, 0.244, 0.182, 0.126, 0.102))
)


PROFILED_KINDS = ("evidence", "winner_evidence")  # run with the profiler by the plan


class Jobs:
    """Numbers job ids in submission order, like a real sweep."""

    def __init__(self, first: int = 14600) -> None:
        self.next = first
        self.results: list[JobResult] = []

    def add(
        self,
        item: str,
        kind: str,
        profile: str,
        tgs: float | None = None,
        *,
        config_tag: str = "sparse",
        verdict: Verdict = Verdict.SUCCESS,
        flags: tuple[str, ...] = (),
        env: tuple[tuple[str, str], ...] = (),
        reason: str = "",
        log_tail: str = "",
        resolved_from: str = "",
        artifacts: tuple[tuple[str, str], ...] = (),
        overrides: tuple[tuple[str, str], ...] = (),
        losses: tuple[tuple[int, float], ...] | None = None,
    ) -> JobResult:
        job_id = str(self.next)
        self.next += 1
        wave = item.split("::", maxsplit=1)[0]
        values = (tgs * 0.998, tgs, tgs * 1.002) if tgs is not None else ()
        result = JobResult(
            key=f"{item}[{config_tag}]",
            item=f"{item}[{config_tag}]",
            wave=wave,
            profile=profile,
            config_tag=config_tag,
            kind=kind,
            job_id=job_id,
            verdict=verdict,
            xla_flags=flags,
            env=env,
            overrides=overrides,
            nodelist="chi[2766,2800,2810,2832]",
            image="/mnt/vast/images/maxtext-v26.2.tar",
            backend="maxtext-slurm",
            tgs=tgs,
            step_seconds=None if tgs is None else round(4096 * 4 / tgs, 4),
            tgs_values=values,
            # a profiled run's value is its steps after the profiler's window (steady.steady_state)
            steps_used=((9, 10, 11) if kind in PROFILED_KINDS else (5, 6, 7)) if values else (),
            step_count=15 if tgs is not None else 2,
            reason=reason,
            log_path=f"outputs/{job_id}-golden-{profile}-{config_tag}.log",
            log_tail=log_tail,
            artifacts=artifacts,
            resolved_from=resolved_from,
            losses=(LOSSES if tgs is not None else LOSSES[:2]) if losses is None else losses,
            exit_code=0 if verdict.measured else 1,
            submitted_at=T0 + 600 * (self.next - 14600),
            finished_at=T0 + 600 * (self.next - 14600) + 540,
            # 4 nodes for the 480 s the scheduler ran it (after 60 s in the queue): 32 node-minutes
            nodes=4,
            started_at=T0 + 600 * (self.next - 14600) + 60,
            ended_at=T0 + 600 * (self.next - 14600) + 540,
            node_minutes=32.0,
        )
        self.results.append(result)
        return result

    def wave1(
        self,
        baselines: tuple[float, ...] = (1000.0, 1006.0, 1003.0),
        restore: float | None = 950.0,
        config_tag: str = "sparse",
        restore_flags: tuple[str, ...] = (AG_DEFAULT,),
    ) -> None:
        for index, tgs in enumerate(baselines):
            suffix = "" if index == 0 else f"-r{index + 1}"
            self.add(f"wave1::baseline{suffix}", "baseline", f"baseline{suffix}", tgs, config_tag=config_tag)
        if restore is not None:
            self.add(
                "wave1::restore_default",
                "restore_default",
                "restore_default",
                restore,
                config_tag=config_tag,
                flags=restore_flags,
            )

    def control(self, tgs: float = 1003.0, config_tag: str = "sparse") -> JobResult:
        """The baseline measured again after the runs so far (a control: without one after a
        win's first run, the win is never locked)."""
        return self.add("wave1::baseline-control", "baseline", "baseline", tgs, config_tag=config_tag)

    def profile(self, name: str, tgs: float | None, *flags: str, wave: int = 2, **kwargs: object) -> JobResult:
        return self.add(f"wave{wave}::{name}", "profile", name, tgs, flags=flags, **kwargs)  # type: ignore[arg-type]


def data(the_cell: Cell, jobs: Jobs, spent: Spent | None = None) -> ReportData:
    return build(the_cell, jobs.results, "chi[2766,2800,2810,2832]", "maxtext-slurm", today=DATE, spent=spent)


# ---- scenarios ------------------------------------------------------------------------------


def winner() -> ReportData:
    """A clear winner with the evidence run, restore_default and cross-config rows."""
    jobs = Jobs()
    jobs.wave1()
    jobs.add(
        "wave1.5::evidence",
        "evidence",
        "evidence",
        985.0,
        artifacts=(
            ("hlo", "outputs/14603-golden-evidence/xla_dump/module_0001.jit_train_step.after_optimizations.txt"),
            ("xplane", "outputs/14603-golden-evidence/tensorboard/plugins/profile/host.xplane.pb"),
        ),
    )
    jobs.profile("ag256m", 1080.0, "--xla_gpu_all_gather_combine_threshold_bytes=268435456")
    jobs.profile("ag512m", 1052.0, "--xla_gpu_all_gather_combine_threshold_bytes=536870912")
    jobs.profile("overlap2", 1004.0, "--xla_gpu_experimental_parallel_collective_overlap_limit=2")
    jobs.profile("nccl_chan8", 1001.0, env=(("NCCL_NCHANNELS_PER_NET_PEER", "8"),))
    jobs.profile("pp_ag", 955.0, "--xla_gpu_enable_pipelined_all_gather=true", wave=3)
    jobs.wave1(baselines=(900.0, 905.0), restore=880.0, config_tag="dense")
    jobs.add(
        "wave6::best",
        "cross_config",
        "ag256m",
        940.0,
        config_tag="dense",
        flags=("--xla_gpu_all_gather_combine_threshold_bytes=268435456",),
        resolved_from="ag256m",
    )
    return data(cell(), jobs, Spent.of(jobs.results))


def within_noise() -> ReportData:
    """No profile beats the baseline beyond the noise; no env file, no evidence."""
    jobs = Jobs(15000)
    jobs.wave1(baselines=(1000.0, 1004.0), restore=None)
    jobs.profile("overlap2", 1006.0, "--xla_gpu_experimental_parallel_collective_overlap_limit=2")
    jobs.profile("async_priority", 998.0, "--xla_gpu_enable_highest_priority_async_stream=true")
    jobs.profile("mem95", 1001.0, env=(("XLA_PYTHON_CLIENT_MEM_FRACTION", ".95"),))
    return data(cell(env_file=False, name="golden_noenv"), jobs)


def env_file_hurts() -> ReportData:
    """No profile beats the deployed env, but the image defaults do (restore_default +7 %): the
    report says to restore them instead of "keep the deployed environment"."""
    jobs = Jobs(15500)
    jobs.wave1(baselines=(1000.0, 1004.0), restore=1075.0)
    jobs.profile("overlap2", 1006.0, "--xla_gpu_experimental_parallel_collective_overlap_limit=2")
    jobs.profile("mem95", 999.0, env=(("XLA_PYTHON_CLIENT_MEM_FRACTION", ".95"),))
    return data(cell(name="golden_env_hurts"), jobs)


def failures() -> ReportData:
    """An obsolete flag, an OOM and a crash next to one measured profile."""
    jobs = Jobs(16000)
    jobs.wave1()
    jobs.profile("overlap2", 1003.0, "--xla_gpu_experimental_parallel_collective_overlap_limit=2")
    jobs.profile(
        "stale",
        None,
        "--xla_gpu_enable_obsolete_thing=true",
        verdict=Verdict.UNKNOWN_FLAG,
        reason="XLA rejected flag --xla_gpu_enable_obsolete_thing: Unknown flag in XLA_FLAGS: "
        "--xla_gpu_enable_obsolete_thing=true",
        log_tail="E0501 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: --xla_gpu_enable_obsolete_thing=true\n",
    )
    jobs.profile(
        "pp_all_reduce",
        None,
        "--xla_gpu_enable_pipelined_all_reduce=true",
        wave=3,
        verdict=Verdict.OOM,
        reason="out of memory (allocating 217.00GiB): RESOURCE_EXHAUSTED: Out of memory "
        "while trying to allocate 233000000000 bytes. | temp 217 GiB",
    )
    return data(cell(), jobs)


def many_profiles() -> ReportData:
    """16 profiles: the leaderboard shows the top 8, a gap and the bottom 5."""
    jobs = Jobs(17000)
    jobs.wave1()
    for index in range(16):
        tgs = 1090.0 - 10.0 * index
        jobs.profile(
            f"ag{index:02d}",
            tgs,
            f"--xla_gpu_all_gather_combine_threshold_bytes={(index + 1) * 67108864}",
            wave=2 + index // 6,
        )
    return data(cell(), jobs)


def pp8() -> ReportData:
    """The PP=8 cell of the same model: ag256m flips sign, overlap2 wins."""
    jobs = Jobs(18000)
    jobs.wave1(baselines=(900.0, 903.0), restore=945.0)
    jobs.profile("overlap2", 940.0, "--xla_gpu_experimental_parallel_collective_overlap_limit=2")
    jobs.profile("ag256m", 860.0, "--xla_gpu_all_gather_combine_threshold_bytes=268435456")
    jobs.profile("pp_ag", 870.0, "--xla_gpu_enable_pipelined_all_gather=true", wave=3)
    jobs.profile("cp_decomp_1G", 903.0, "--xla_gpu_collective_permute_decomposer_threshold=1073741824")
    return data(cell((("PP", 8),), name="golden_pp8"), jobs)


# ---- evidence: recorded real artifacts of the embedded workload (tests/data/profile) -----------

PROFILE_DATA = Path(__file__).parent / "data" / "profile"


def recorded(result: JobResult, name: str) -> RunEvidence:
    """What an evidence run's artifacts show, read from the recordings named `name`."""
    found = tuple(hlo.collectives((PROFILE_DATA / f"{name}.hlo.txt").read_text()))
    summary = summarize((PROFILE_DATA / f"{name}.trace.json.gz").read_bytes(), op_kinds=dict(op_kinds(found)))
    return RunEvidence(
        job_id=result.job_id,
        item=result.item,
        profile_name=result.resolved_from or result.profile,
        tgs=result.tgs,
        step_seconds=result.step_seconds,
        hlo_path=f"jobs/{result.job_id}/xla_dump/module_0042.jit_train_step.cpu_after_optimizations.txt",
        inventory=tuple(inventory(found)),
        trace_path=f"jobs/{result.job_id}/tensorboard/plugins/profile/2026_05_01/vm.trace.json.gz",
        profile=summary,
    )


def cpu_cell(
    name: str,
    parallelism: tuple[tuple[str, int], ...] = (("FSDP", 8),),
    env_file: tuple[EnvFileEntry, ...] = (),
    **changes: object,
) -> Cell:
    return Cell(
        path=Path(f"cells/{name}.yml"),
        model_tag="cpu",
        slot=ClusterSlot(nodes=1),
        parallelism=Parallelism(parallelism),
        pdbs=2,
        env_file=env_file,
        backend=Backend(BackendKind.LOCAL),
        hardware="8 virtual CPU devices",
        **changes,
    )  # type: ignore[arg-type]


def evidence_no_winner() -> ReportData:
    """No winner; the best run (all-reduce combiner off) re-run with the dump: 2 → 11 all-reduces."""
    jobs = Jobs(1)
    jobs.wave1(baselines=(1000.0, 1004.0), restore=None, config_tag="default")
    base = jobs.add("wave1.5::evidence", "evidence", "evidence", 990.0, config_tag="default")
    jobs.profile("ar_combiner_off", 1005.0, "--xla_disable_hlo_passes=cpu-all-reduce-combiner", config_tag="default")
    jobs.profile("opt_o0", 820.0, "--xla_backend_optimization_level=0", config_tag="default")
    again = jobs.add(
        "evidence2::winner",
        "winner_evidence",
        "winner",
        992.0,
        config_tag="default",
        flags=("--xla_disable_hlo_passes=cpu-all-reduce-combiner",),
        resolved_from="ar_combiner_off",
    )
    evidence = {base.job_id: recorded(base, "fsdp"), again.job_id: recorded(again, "fsdp_no_cpu_ar_combiner")}
    return build(cpu_cell("cpu_fsdp8"), jobs.results, "localhost", "local", today=DATE, loaded=evidence)


def evidence_same_collectives() -> ReportData:
    """The env file deploys -O1; restoring the default level wins with the same collectives."""
    jobs = Jobs(1)
    jobs.wave1(
        baselines=(800.0, 806.0),
        restore=1010.0,
        config_tag="default",
        restore_flags=("--xla_backend_optimization_level=2",),
    )
    base = jobs.add("wave1.5::evidence", "evidence", "evidence", 790.0, config_tag="default")
    jobs.profile("opt_o2", 1012.0, "--xla_backend_optimization_level=2", config_tag="default")
    jobs.profile("no_eigen_mt", 640.0, "--xla_cpu_multi_thread_eigen=false", config_tag="default")
    again = jobs.add(
        "evidence2::winner",
        "winner_evidence",
        "winner",
        1000.0,
        config_tag="default",
        flags=("--xla_backend_optimization_level=2",),
        resolved_from="opt_o2",
    )
    evidence = {base.job_id: recorded(base, "fsdp_opt_o1"), again.job_id: recorded(again, "fsdp")}
    env_file = (EnvFileEntry("xla", "--xla_backend_optimization_level", "1", "2"),)
    return build(
        cpu_cell("cpu_o1_fsdp8", env_file=env_file), jobs.results, "localhost", "local", today=DATE, loaded=evidence
    )


def pipeline_shapes() -> ReportData:
    """PP=4: more microbatches help until mb16, which is slower than mb8 beyond the noise."""
    shapes = tuple(PipelineShape(m) for m in (2, 4, 8, 16))
    jobs = Jobs(1)
    jobs.wave1(baselines=(700.0, 704.0, 702.0), restore=None, config_tag="default")
    for shape, tgs in zip(shapes, (520.0, 690.0, 1230.0, 1150.0)):
        jobs.add(
            f"wave5::{shape.name}",
            "pipeline_shape",
            shape.name,
            tgs,
            config_tag="default",
            overrides=(("num_pipeline_microbatches", str(shape.microbatches)),),
        )
    cell = cpu_cell("cpu_pp4", (("PP", 4),), pipeline_shapes=shapes)
    return build(cell, jobs.results, "localhost", "local", today=DATE)


def numerics_and_tie() -> ReportData:
    """The fastest profile changes numerics (bfloat16 compute); two winners tie within the noise,
    and the one with fewer settings is the recipe."""
    jobs = Jobs(19000)
    jobs.wave1()
    jobs.profile(
        "o1_bf16",
        1150.0,
        "--xla_gpu_enable_latency_hiding_scheduler=true",
        overrides=(("dtype", "bfloat16"),),
        losses=BF16_LOSSES,
    )
    jobs.profile(
        "lhs_two", 1086.0, "--xla_gpu_enable_latency_hiding_scheduler=true", "--xla_gpu_enable_triton_gemm=false"
    )
    jobs.profile("lhs", 1080.0, "--xla_gpu_enable_latency_hiding_scheduler=true")
    jobs.profile("overlap2", 1004.0, "--xla_gpu_experimental_parallel_collective_overlap_limit=2")
    return data(cell(), jobs)


def null_sweep(repeats: tuple[float, ...]) -> ReportData:
    """26 profiles, none above +2 %: bounded only when the baseline repeats give the power."""
    jobs = Jobs(20000)
    jobs.wave1(baselines=repeats, restore=None)
    for index in range(26):
        jobs.profile(
            f"ag{index:02d}",
            1000.0 + (index % 5 - 2) * 2.0,
            f"--xla_gpu_all_gather_combine_threshold_bytes={(index + 1) * 67108864}",
            wave=2 + index // 9,
        )
    return data(cell(env_file=False, name="golden_null"), jobs)


def under_powered() -> ReportData:
    return null_sweep((1000.0, 1006.0))


def well_powered() -> ReportData:
    # Ten repeats as scattered as the profiles (±4 TGS): no prior props up the noise any more.
    return null_sweep((1000.0, 1004.0, 996.0, 1002.0, 998.0, 1003.0, 997.0, 1001.0, 999.0, 1000.0))
