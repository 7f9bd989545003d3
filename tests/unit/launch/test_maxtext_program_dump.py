"""The maxtext-slurm job's program dump (rank 0 writes it into <job dir>/program, files.py), read back
through the transport for the inert-flag fingerprint: the same files, so the same digest, as the
local launcher reads; nothing before every rank compiled; nothing too large to read."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_xlatune.evidence.fingerprint import fingerprint, read_dump
from pytest_xlatune.launch.base import ProgramDumps, SubmittedJob
from pytest_xlatune.launch.maxtext import jobfiles
from pytest_xlatune.launch.maxtext.launcher import MaxTextSlurmLauncher
from pytest_xlatune.launch.slurm_jobs import SlurmPlacement
from pytest_xlatune.slurm.client import SlurmClient
from pytest_xlatune.transport.base import LocalTransport

DATA = Path(__file__).resolve().parents[2] / "data" / "hlo"
NAME = "JAX-demo-_env_TUNE_PROFILE_vec256"
# What XLA:GPU writes for `--xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*`: the
# fingerprint reads the optimized HLO, the optimized IR and the PTX, and none of the rest.
READ = (
    "module_0042.jit_train_step.sm_9.0_gpu_after_optimizations.txt",
    "module_0042.jit_train_step.ir-with-opt.ll",
    "module_0042.jit_train_step.ptx",
)
LEFT = (
    "module_0042.jit_train_step.before_optimizations.txt",
    "module_0042.jit_train_step.sm_9.0_gpu_after_optimizations-buffer-assignment.txt",
    "module_0042.jit_train_step.sm_9.0_gpu_after_optimizations-memory-usage-report.txt",
    "module_0042.jit_train_step.ir-no-opt.ll",
    "module_0042.jit_train_step.thunk_sequence.txt",
)


class ReadsRecorded(LocalTransport):
    def __init__(self) -> None:
        self.read: list[str] = []

    def read_from(self, path: str, offset: int, limit: int | None = None) -> bytes:
        self.read.append(path)
        return super().read_from(path, offset, limit)


def launcher(checkout: Path, transport: ReadsRecorded, nodes: int = 1) -> MaxTextSlurmLauncher:
    return MaxTextSlurmLauncher(
        transport,
        SlurmClient(transport),
        str(checkout),
        SlurmPlacement("node[01-02]" if nodes > 1 else "node01", nodes, "debug"),
        "demo",
        sweep_id="demo.1",
    )


def job_with_dump(checkout: Path, job_dir_name: str = f"7-{NAME}") -> tuple[SubmittedJob, Path]:
    program = checkout / "outputs" / job_dir_name / "program"
    program.mkdir(parents=True)
    for name in READ + LEFT:
        text = (DATA / "fsdp.txt").read_text() if name.endswith("after_optimizations.txt") else f"; {name}\n"
        (program / name).write_text(text)
    job_dir = checkout / "outputs" / f"7-{NAME}"  # as submit.sh printed it
    return SubmittedJob("7", f"{job_dir}.log", str(job_dir)), program


def test_the_dump_is_read_through_the_transport_and_fingerprints_as_the_local_one(tmp_path: Path) -> None:
    transport = ReadsRecorded()
    job, program = job_with_dump(tmp_path)
    ours = launcher(tmp_path, transport)
    assert isinstance(ours, ProgramDumps)
    files = ours.program_dump(job, stepped=False)  # one node: its compile line is rank 0's
    assert sorted(files) == sorted(READ)
    assert sorted(transport.read) == sorted(str(program / name) for name in READ)  # nothing else read
    found = fingerprint(files)
    assert found.complete and found == fingerprint(read_dump(str(program)))


def test_on_more_than_one_node_the_dump_is_read_only_once_a_step_ran(tmp_path: Path) -> None:
    job, _ = job_with_dump(tmp_path)
    ours = launcher(tmp_path, ReadsRecorded(), nodes=2)
    assert ours.program_dump(job, stepped=False) == {}  # another node's compile line may come first
    assert sorted(ours.program_dump(job, stepped=True)) == sorted(READ)


def test_a_job_dir_renamed_by_the_tgs_tagger_is_found_by_its_id(tmp_path: Path) -> None:
    job, _ = job_with_dump(tmp_path, f"7-{NAME}-TGS_1234")
    assert sorted(launcher(tmp_path, ReadsRecorded()).program_dump(job, stepped=True)) == sorted(READ)


def test_no_dump_or_one_too_large_to_read_gives_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "outputs" / f"8-{NAME}").mkdir(parents=True)  # a cache hit, or a run that dumps itself
    ours = launcher(tmp_path, ReadsRecorded())
    assert ours.program_dump(SubmittedJob("8", "", str(tmp_path / "outputs" / f"8-{NAME}")), stepped=True) == {}
    assert ours.program_dump(SubmittedJob("9", "", str(tmp_path / "outputs" / f"9-{NAME}")), stepped=True) == {}
    job, program = job_with_dump(tmp_path)
    monkeypatch.setattr(jobfiles, "PROGRAM_DUMP_LIMIT", sum(p.stat().st_size for p in program.iterdir()) // 2)
    transport = ReadsRecorded()
    assert launcher(tmp_path, transport).program_dump(job, stepped=True) == {} and transport.read == []
