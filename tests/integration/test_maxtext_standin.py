"""The maxtext-slurm stand-in on the real local cluster: submit.sh, artifact freeze, `_env_` order, logs.

Each test copies tests/maxtext_slurm_standin to a temporary directory and submits from there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_xlatune.cell.grammar import JOB_NAME_MAX, job_name
from pytest_xlatune.cell.values import Profile
from pytest_xlatune.launch.maxtext.files import (
    Arm,
    install_block,
    render_tune_block,
)
from pytest_xlatune.launch.maxtext.submit import parse_submit_output, submit_argv
from tests.integration.fixtures_infra import unavailable
from tests.integration.waits import OUTER_S

pytestmark = pytest.mark.slurm

STANDIN = Path(__file__).resolve().parents[1] / "maxtext_slurm_standin"
WAIT = OUTER_S  # a job takes ~10 s idle, but other tests may hold the nodes or the cores
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY",
                "DEADLINE", "PREEMPTED"}  # fmt: skip
SWEEP = "it-standin"
PROFILE_X = Profile("x", 2, xla_flags=("--xla_cpu_multi_thread_eigen=false",),
                    env=(("NCCL_NCHANNELS_PER_NET_PEER", "8"),))  # fmt: skip
SUMMARY = "========================== JOB SUMMARY =========================="


@pytest.fixture(scope="module")
def slurm() -> None:
    """The local cluster answers `sinfo` (scripts/local-slurm.sh up)."""
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-p", "debug", "-o", "%D %T"], check=False, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        unavailable(f"sinfo does not work: {exc}")
    if proc.returncode != 0 or not proc.stdout.strip():
        unavailable(f"sinfo -p debug exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()}")


@dataclass
class Checkout:
    """A copy of the stand-in; cancels the jobs it submitted that are still queued or running."""

    root: Path
    submitted: list[str]

    @property
    def outputs(self) -> Path:
        return self.root / "outputs"

    def submit(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("JOB_WORKSPACE", "RAY", "XLA_FLAGS")}
        env["XLATUNE_PYTHON"] = sys.executable
        proc = subprocess.run(["bash", "-c", '"$@" 2>&1', "_", *argv], check=False, cwd=self.root, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        if "Submitted batch job" in proc.stdout:
            self.submitted.append(proc.stdout.split("Submitted batch job")[1].split()[0])
        return proc

    def wait(self, job_id: str) -> str:
        """Poll squeue until the job ends; return the job log."""
        end = time.monotonic() + WAIT
        state = ""
        while time.monotonic() < end:
            proc = subprocess.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"],
                                  check=False, capture_output=True, text=True, timeout=30)  # fmt: skip
            state = proc.stdout.strip()
            if proc.returncode != 0 or not state or state in FINAL_STATES:  # gone after MinJobAge
                break
            time.sleep(1)
        else:
            pytest.fail(f"job {job_id} still {state} after {WAIT:g} s; log: {self.log_tail(job_id)}")
        # slurmd may flush the last lines just after squeue shows the final state (later on a
        # loaded machine): the job's own summary closes its log
        end = time.monotonic() + OUTER_S
        while SUMMARY not in self.log(job_id) and time.monotonic() < end:
            time.sleep(0.5)
        return self.log(job_id)

    def log_path(self, job_id: str) -> Path:
        found = sorted(self.outputs.glob(f"{job_id}-*.log"))
        assert found, f"no outputs/{job_id}-*.log in {self.outputs}"
        return found[0]

    def log(self, job_id: str) -> str:
        return self.log_path(job_id).read_text(errors="replace")

    def log_tail(self, job_id: str) -> str:
        try:
            return "\n".join(self.log(job_id).splitlines()[-20:])
        except AssertionError as exc:
            return str(exc)

    def cancel_leftovers(self) -> None:
        for job_id in self.submitted:
            subprocess.run(["scancel", job_id], capture_output=True, timeout=30, check=False)


@pytest.fixture(scope="module")
def module_checkout(slurm: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Checkout]:
    checkout = _copy(tmp_path_factory.mktemp("standin"))
    try:
        yield checkout
    finally:
        checkout.cancel_leftovers()


@pytest.fixture
def checkout(slurm: None, tmp_path: Path) -> Iterator[Checkout]:
    c = _copy(tmp_path)
    try:
        yield c
    finally:
        c.cancel_leftovers()


def _copy(base: Path) -> Checkout:
    root = base / "maxtext-slurm"
    shutil.copytree(STANDIN, root, symlinks=True, ignore=shutil.ignore_patterns("outputs"))
    return Checkout(root, [])


@dataclass(frozen=True)
class TunedJob:
    checkout: Checkout
    job_id: str
    submit_output: str
    log: str
    train_env_at_submit: str


@pytest.fixture(scope="module")
def tuned_job(module_checkout: Checkout) -> TunedJob:
    """The brief's submission with a TUNE block installed; train_env.sh is edited while the job is held."""
    c = module_checkout
    train_env = c.root / "train_env.sh"
    xla, env = render_tune_block(
        [Arm("x", PROFILE_X.xla_flags, PROFILE_X.env), Arm("restore_default", ("--xla_cpu_enable_fast_math=false",))],
        "demo",
    )
    at_submit = install_block(train_env.read_text(), xla + env, SWEEP)
    train_env.write_text(at_submit)

    proc = c.submit(["./submit.sh", "demo:t1", "--nodes=1", "--nodelist=node01", "--time=5:00", "--hold", "--",
                     "steps=12", "_env_TUNE_PROFILE=x", "_env_XLA_PYTHON_CLIENT_MEM_FRACTION=.80"])  # fmt: skip
    assert proc.returncode == 0, proc.stdout
    job_id = parse_submit_output(proc.stdout)

    # While the job is held: change profile x and add an export. The frozen artifact must win.
    edited = Profile(
        "x", 2, xla_flags=("--xla_backend_optimization_level=0",), env=(("NCCL_NCHANNELS_PER_NET_PEER", "2"),)
    )
    xla, env = render_tune_block([Arm("x", edited.xla_flags, edited.env)], "demo")
    train_env.write_text(install_block(at_submit + "export NCCL_EDITED_AFTER_SUBMIT=1\n", xla + env, SWEEP))
    subprocess.run(["scontrol", "release", job_id], check=True, capture_output=True, timeout=30)
    return TunedJob(c, job_id, proc.stdout, c.wait(job_id), at_submit)


def test_log_has_task0_step_lines_and_a_successful_job_summary(tuned_job: TunedJob) -> None:
    lines = tuned_job.log.splitlines()
    steps = [line for line in lines if line.startswith("0: completed step:")]
    assert [s.split(",")[0] for s in steps] == [f"0: completed step: {n}" for n in range(12)]
    assert f"JOB_ID={tuned_job.job_id}" in lines
    assert "NNODES=1" in lines and "JOB_NODELIST=node01" in lines
    assert any(line.startswith("== Train BEGIN") for line in lines)
    assert any(line.startswith("== Train END (") for line in lines)
    assert lines[lines.index(SUMMARY) + 5] == "  Status: \x1b[32mSUCCESS (exit 0)\x1b[0m"


def test_submit_output_gives_the_job_id_and_the_job_name_we_compute(tuned_job: TunedJob) -> None:
    out = tuned_job.submit_output.splitlines()
    expected = job_name("demo", "t1", ["steps=12", "_env_TUNE_PROFILE=x", "_env_XLA_PYTHON_CLIENT_MEM_FRACTION=.80"])
    assert f"JOB_NAME={expected}" in out
    assert tuned_job.checkout.log_path(tuned_job.job_id).name == f"{tuned_job.job_id}-{expected}.log"
    keys = [line.split("=")[0].split(" ")[0] for line in out if not line.startswith(("WARNING", "mkdir"))]
    assert keys[:6] == ["MODEL_NAME", "EXP_TAG", "SBATCH_ARGS", "PASSTHROUGH_ARGS", "JOB_NAME", "[ARTIFACT]"]
    assert out[-1].startswith(
        f"[ARTIFACT] {tuned_job.checkout.outputs}/{tuned_job.job_id}-{expected}/artifact -> .artifacts/artifact_"
    )


def test_job_ran_from_the_frozen_artifact_not_the_edited_checkout(tuned_job: TunedJob) -> None:
    job_dir = next(tuned_job.checkout.outputs.glob(f"{tuned_job.job_id}-*/"))
    artifact = job_dir / "artifact"
    assert artifact.is_symlink() and os.readlink(artifact).startswith("../.artifacts/artifact_")
    assert (artifact / "train_env.sh").read_text() == tuned_job.train_env_at_submit
    assert (job_dir / "log").resolve() == tuned_job.checkout.log_path(tuned_job.job_id).resolve()
    assert "NCCL_EDITED_AFTER_SUBMIT" in (tuned_job.checkout.root / "train_env.sh").read_text()
    assert "NCCL_EDITED_AFTER_SUBMIT" not in tuned_job.log
    assert "--xla_backend_optimization_level=0" not in tuned_job.log
    assert "outputs" not in os.listdir(artifact)


def test_env_override_order_is_train_env_then_configs_env_then_env_args(tuned_job: TunedJob) -> None:
    lines = tuned_job.log.splitlines()
    # XLA flags: train_env.sh's, the TUNE block's (end of train_env.sh: the arm's, then rank 0's
    # program dump into the job's own dir, for inert flags), then configs/demo.env.sh's.
    name = job_name("demo", "t1", ["steps=12", "_env_TUNE_PROFILE=x", "_env_XLA_PYTHON_CLIENT_MEM_FRACTION=.80"])
    dump = (
        f"--xla_dump_to={tuned_job.checkout.outputs}/{tuned_job.job_id}-{name}/program "
        "--xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*"
    )
    assert ("0: XLA_FLAGS=--xla_cpu_enable_fast_math=false --xla_cpu_multi_thread_eigen=false "
            f"{dump} --xla_cpu_enable_fast_math=true") in lines  # fmt: skip
    # .93 in train_env.sh, .85 in configs/demo.env.sh, .80 as _env_: the _env_ arg wins.
    assert "0: XLA_PYTHON_CLIENT_MEM_FRACTION=.80" in lines
    # The post-NCCL case runs after train_env.sh's own NCCL exports (4).
    assert "0: NCCL_NCHANNELS_PER_NET_PEER=8" in lines
    assert "0: TUNE_PROFILE=x" in lines


def test_ray_job_writes_worker_log_and_every_node_prints_the_steps(checkout: Checkout) -> None:
    argv = submit_argv("demo", "r", 2, None, "5:00", "debug", [], True, arm="baseline")
    proc = checkout.submit([*argv, "steps=4"])
    assert proc.returncode == 0, proc.stdout
    job_id = parse_submit_output(proc.stdout)
    log = checkout.wait(job_id)
    for task in ("0", "1"):
        assert [line.split(",")[0] for line in log.splitlines() if line.startswith(f"{task}: completed step:")] == [
            f"{task}: completed step: {n}" for n in range(4)]  # fmt: skip
    workers = list(checkout.outputs.glob(f"{job_id}-*/ray_logs/*/worker0.out"))
    assert len(workers) == 1
    assert sum(line.startswith("completed step:") for line in workers[0].read_text().splitlines()) == 4


def _padded_argv(total: int, extra_sbatch: Sequence[str] = ()) -> tuple[list[str], str]:
    bare = job_name("demo", "t", ["steps=2", "pad="])
    passthrough = ["steps=2", "pad=" + "x" * (total - len(bare))]
    name = job_name("demo", "t", passthrough)
    assert len(name) == total
    return ["./submit.sh", "demo:t", "--nodes=1", "--time=5:00", *extra_sbatch, "--", *passthrough], name


def test_job_name_over_243_bytes_is_refused_before_sbatch(checkout: Checkout) -> None:
    argv, _ = _padded_argv(JOB_NAME_MAX + 1)
    proc = checkout.submit(argv)
    assert proc.returncode == 1
    assert "[ERROR] JOB_NAME is 244B; '<id>-$JOB_NAME.log' would exceed 255B." in proc.stdout
    assert "Submitted batch job" not in proc.stdout and "[ARTIFACT]" not in proc.stdout
    assert not (checkout.outputs / ".artifacts").exists()


def test_job_name_of_exactly_243_bytes_is_submitted(checkout: Checkout) -> None:
    argv, name = _padded_argv(JOB_NAME_MAX, ["--hold"])
    proc = checkout.submit(argv)
    assert proc.returncode == 0, proc.stdout
    job_id = parse_submit_output(proc.stdout)
    assert f"JOB_NAME={name}" in proc.stdout.splitlines()
    assert (checkout.outputs / f"{job_id}-{name}" / "artifact").is_symlink()
    # the held job is cancelled by the fixture
