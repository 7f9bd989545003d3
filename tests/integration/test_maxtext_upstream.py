"""Conformance: sweeps through an UNMODIFIED copy of upstream maxtext-slurm on the local Slurm.

`submit.sh`, `utils/*`, `_job.sbatch` (with its `--gpus-per-task=8`: the local cluster declares 8
GPUs per node), `_container.sh`, `_train.sh`, `_train_with_ray.sh`, `train_env.sh`,
`container_env.sh` and `configs/` run as they are. Stand-ins, only for what cannot exist here:
`tests/fake_container/bin/docker` (a container runtime on PATH), its image
(`tests/fake_container/image`: python3 = this venv, `MaxText.train` runs the embedded JAX workload,
pip has no network) and `utils/preflight.sh` (it cleans the host it runs on). For `ray: true`
both ways: an image without Ray (upstream falls back to non-Ray mode), and one with Ray installed
by scripts/image-ray.sh (a real `ray start --head`, training in upstream's Ray actor).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_xlatune.launch.base import JobPhase, JobRequest
from pytest_xlatune.launch.maxtext.launcher import MaxTextSlurmLauncher
from pytest_xlatune.launch.slurm_jobs import SlurmPlacement
from pytest_xlatune.slurm.client import SlurmClient
from pytest_xlatune.transport.base import LocalTransport
from pytest_xlatune.triage.logs import StepLog
from tests.integration.fixtures_infra import LocalSlurm
from tests.integration.upstream import (
    HOST_ONLY_ENV,
    conformance_checkout,
    fake_runtime_env,
    image_ray,
    require_gpu_gres,
)

pytestmark = [pytest.mark.slurm, pytest.mark.jax]

DEEPSEEK = """\
model_tag: {model}
nodelist: node01
parallelism: FSDP=1                # FSDP is a DCN axis: one shard per node (cell/fit.py)
pdbs: 2
steps: 10
baseline_repeats: 1
config_tags:
  moe: {{sparse_matmul: true, use_turbo_grouped_gemm: true, use_deepep_dispatch: true}}
env_file:                        # what upstream configs/deepseek3-671b.env.sh deploys on FSDP
  - {{flag: --xla_gpu_all_gather_combine_threshold_bytes=1073741824, image_default: "8589934592"}}
waves:
  2:
    - {{name: opt1, xla_flags: [--xla_backend_optimization_level=1], env: {{NCCL_NCHANNELS_PER_NET_PEER: "8"}}}}
backend:
  kind: maxtext-slurm
  checkout: {checkout}
  partition: debug
  time: "10:00"
  ray: {ray}
"""


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the checkout (bytes, mode), outputs/ and .git/ aside."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode)
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] not in ("outputs", ".git")
    }


def events(store: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in store.read_text().splitlines()]


@pytest.fixture
def upstream(pytester: pytest.Pytester, local_slurm: LocalSlurm, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the snapshot with only utils/preflight.sh replaced; the fake runtime on PATH."""
    require_gpu_gres(local_slurm.partition)
    root = conformance_checkout(pytester.path)
    for name, value in fake_runtime_env(pytester.path / "fake-docker").items():
        monkeypatch.setenv(name, value)
    for name in HOST_ONLY_ENV:
        monkeypatch.delenv(name, raising=False)
    return root


def test_deepseek3_with_pdbs_and_moe_tags_through_every_wave(pytester: pytest.Pytester, upstream: Path) -> None:
    before = tree(upstream)
    cell = pytester.makefile(
        ".yml", ds=DEEPSEEK.format(model="deepseek3-671b", checkout=json.dumps(str(upstream)), ray="false")
    )
    # The fixed protocol: every wave's job runs to its end (the 10 steps of each log are checked;
    # an adaptive sweep may stop opt1 early once its remaining steps cannot change a decision).
    result = pytester.runpytest(
        str(cell), "-v", "-p", "no:cacheprovider", "--xlatune-poll-interval=1", "--xlatune-fixed-protocol"
    )
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "*wave1::baseline[[]moe[]] PASSED*",
            "*wave1::restore_default[[]moe[]] PASSED*",
            "*wave1.5::evidence[[]moe[]] PASSED*",
            "*wave2::opt1[[]moe[]] PASSED*",
            "*evidence2::winner[[]moe[]] PASSED*",
        ]
    )
    found = events(pytester.path / ".xlatune" / "ds.jsonl")
    results = {e["profile"]: e for e in found if e["event"] == "result"}
    assert tree(upstream) == before  # byte-identical, modes included, after the session
    for profile, result_event in results.items():
        log = Path(result_event["log_path"])
        text = log.read_text(errors="replace")
        steps = StepLog()
        steps.feed(text.encode())
        assert len(steps.steps) == 10, (profile, log)  # the stored log_path is the file parsed
        job_dir = log.with_suffix("")
        submitted = (job_dir / "artifact" / "submit_cmd.txt").read_text()
        arm = submitted.rsplit("_env_TUNE_PROFILE=", 1)[1].split()[0]
        # The argv carries only _env_ args; the arm in the frozen train_env.sh carries the rest,
        # and the job log says exactly what it appended.
        assert "steps=" not in submitted and "sparse_matmul" not in submitted
        # FSDP=1 differs from the config's dcn_fsdp_parallelism=8, so the DCN axes are passed too.
        assert re.search(
            re.escape(
                f"[TUNE_PROFILE] {arm}: PASSTHROUGH_ARGS+=(steps=10 dataset_type=synthetic per_device_batch_size=2 "
            )
            + r"(dcn_\w+=\d+ )*"
            + re.escape("sparse_matmul=true use_turbo_grouped_gemm=true use_deepep_dispatch=true"),
            text,
        ), text[-3000:]
        print(f"{profile}: {submitted.strip()}")
    # restore_default ends at the image default after configs/deepseek3-671b.env.sh's own flag
    restore = Path(results["restore_default"]["log_path"]).read_text()
    xla = next(line for line in restore.splitlines() if line.startswith("0: XLA_FLAGS="))
    assert xla.endswith(
        "--xla_gpu_all_gather_combine_threshold_bytes=1073741824 "
        "--xla_gpu_all_gather_combine_threshold_bytes=8589934592"
    )
    opt1 = Path(results["opt1"]["log_path"]).read_text()
    assert "0: NCCL_NCHANNELS_PER_NET_PEER=8" in opt1.splitlines()
    assert "hlo_dump" in dict(results["evidence"]["artifacts"])
    assert "hlo_dump" in dict(results["winner"]["artifacts"])
    # Inert flags: rank 0 dumped each job's train step into its own dir (the TUNE_PROFILE block),
    # read back through the transport once it compiled and fingerprinted. The restored GPU flag
    # does nothing on XLA:CPU, so restore_default compiles to the baseline's program (the adaptive
    # sweep would cut it after its compile; this one runs the fixed protocol); -O1 does not. The
    # evidence runs keep upstream's own xla_dump and get no fingerprint.
    prints = {e["job_id"]: e for e in found if e["event"] == "fingerprint"}
    digest = {p: prints[r["job_id"]]["digest"] for p, r in results.items() if r["job_id"] in prints}
    assert sorted(digest) == ["baseline", "opt1", "restore_default"], digest
    assert all(prints[results[p]["job_id"]]["complete"] for p in digest)
    assert digest["restore_default"] == digest["baseline"] != digest["opt1"]
    assert (Path(results["baseline"]["log_path"]).with_suffix("") / "program").is_dir()


def test_ray_fallback_with_a_model_named_by_a_unique_substring_keeps_its_result(
    pytester: pytest.Pytester, upstream: Path
) -> None:
    """RAY=1 on an image without Ray: upstream prints "[!] Ray cluster failed, falling back to
    non-Ray mode" and trains without Ray; the result must be measured (never no_steps), at the
    1 s poll interval of the issue, from the Slurm log (no ray_logs/)."""
    before = tree(upstream)
    cell = pytester.makefile(
        ".yml", ray=DEEPSEEK.format(model="deepseek3", checkout=json.dumps(str(upstream)), ray="true")
    )
    # Every wave, evidence and the winner's evidence included, each job to its end.
    result = pytester.runpytest(
        str(cell), "-v", "-p", "no:cacheprovider", "--xlatune-poll-interval=1", "--xlatune-fixed-protocol"
    )
    result.assert_outcomes(passed=5)
    found = events(pytester.path / ".xlatune" / "ray.jsonl")
    (inventory,) = [e for e in found if e["event"] == "inventory"]
    assert inventory["model_name"] == "deepseek3-671b"
    results = {e["profile"]: e for e in found if e["event"] == "result"}
    assert sorted(results) == ["baseline", "evidence", "opt1", "restore_default", "winner"]
    for profile, measured in results.items():
        assert measured["step_count"] == 10, profile  # never no_steps
        log = Path(measured["log_path"])
        text = log.read_text(errors="replace")
        assert "[!] Ray cluster failed, falling back to non-Ray mode" in text, profile
        assert log.name.startswith(f"{measured['job_id']}-JAX-deepseek3-671b-{profile}-")
        assert not (log.with_suffix("") / "ray_logs").exists()
        assert (log.with_suffix("") / "artifact" / "submit_cmd.txt").read_text().startswith("RAY=1 ")
    assert "hlo_dump" in dict(results["evidence"]["artifacts"]) and "hlo_dump" in dict(results["winner"]["artifacts"])
    assert tree(upstream) == before


def test_ray_starts_and_the_absl_step_lines_are_read_from_the_ray_worker_stderr(
    pytester: pytest.Pytester, upstream: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RAY=1 on an image with Ray whose MaxText logs through absl to stderr, as current MaxText
    does: upstream's _train_with_ray.sh starts a real Ray head (`ray start --head` on the RAY_PORT
    _job.sbatch picked), _ray_actor.py trains in a Ray actor, and the step lines land in
    ray_logs/<host>/worker-*.err. They are found there, and that file is the stored log_path."""
    monkeypatch.setenv("XLATUNE_FAKE_IMAGE_RAY", image_ray())
    monkeypatch.setenv("XLATUNE_FAKE_MAXTEXT_LOG", "absl")
    before = tree(upstream)
    cell = pytester.makefile(
        ".yml", raystarts=DEEPSEEK.format(model="deepseek3-671b", ray="true", checkout=json.dumps(str(upstream)))
    )
    result = pytester.runpytest(
        str(cell), "-v", "-p", "no:cacheprovider", "--xlatune-poll-interval=1", "--xlatune-fixed-protocol"
    )
    result.assert_outcomes(passed=5)  # every wave, evidence and the winner's evidence included
    results = {
        e["profile"]: e for e in events(pytester.path / ".xlatune" / "raystarts.jsonl") if e["event"] == "result"
    }
    assert sorted(results) == ["baseline", "evidence", "opt1", "restore_default", "winner"]
    for profile, measured in results.items():  # each read from its own Ray worker's stderr
        assert measured["step_count"] == 10 and measured["tgs"] > 0, profile
        assert Path(measured["log_path"]).suffix == ".err" and "/ray_logs/" in measured["log_path"], profile
    assert "hlo_dump" in dict(results["evidence"]["artifacts"]) and "hlo_dump" in dict(results["winner"]["artifacts"])
    baseline = results["baseline"]
    log = Path(baseline["log_path"])
    assert log.parent.parent.name == "ray_logs" and log.name.startswith("worker-") and log.suffix == ".err", log
    steps = StepLog()
    steps.feed(log.read_bytes())
    assert len(steps.steps) == 10 and " metric_logger.py:196] completed step: 9, " in log.read_text()
    out = log.with_suffix(".out")  # the same worker's stdout: absl wrote no step line there
    assert out.is_file() and "completed step" not in out.read_text()
    job_dir = log.parent.parent.parent
    (slurm_log,) = job_dir.parent.glob(f"{baseline['job_id']}-*.log")
    text = slurm_log.read_text(errors="replace")
    assert "[!] Ray cluster failed" not in text
    assert f"[Ray] Starting HEAD on {log.parent.name}:" in text and "Ray runtime started." in text
    ray_port = next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("RAY_PORT="))
    assert any("ray start --address=" in line and line.endswith(f":{ray_port}'") for line in text.splitlines())
    assert "0: Launching via Ray actor..." in text
    # Ray also streams the actor's lines into the Slurm log (log_to_driver), behind its prefix;
    # the 10 steps above come from one file, not both
    assert sum("(MaxTextTrainerActor pid=" in line and "] completed step: " in line for line in text.splitlines()) == 10
    assert (job_dir / "artifact" / "submit_cmd.txt").read_text().startswith("RAY=1 ")
    assert tree(upstream) == before


def test_a_stack_known_only_at_run_time_runs_through_a_tune_arm_added_to_the_block(upstream: Path) -> None:
    before = tree(upstream)
    transport = LocalTransport()
    events: list[tuple[str, dict[str, Any]]] = []
    launcher = MaxTextSlurmLauncher(
        transport,
        SlurmClient(transport),
        str(upstream),
        SlurmPlacement("node02", 1, "debug"),
        "deepseek3-671b",
        sweep_id="stack.1",
        time_limit="10:00",
        lookup_interval=0.2,
        record=lambda event, **payload: events.append((event, payload)),
    )
    launcher.prepare()
    try:
        stack = JobRequest(
            "ds-stack_top2-moe",
            "stack_top2",
            ("steps=10", "dataset_type=synthetic", "per_device_batch_size=2", "dcn_fsdp_parallelism=2"),
            xla_flags=("--xla_cpu_multi_thread_eigen=false",),
            env=(("NCCL_NCHANNELS_PER_NET_PEER", "8"),),
            config_tag="moe",
        )
        job = launcher.submit(stack)
        deadline = time.monotonic() + 600
        while launcher.poll([job.job_id])[job.job_id].phase is not JobPhase.FINISHED:
            assert time.monotonic() < deadline, f"job {job.job_id} did not finish"
            time.sleep(1)
        assert launcher.poll([job.job_id])[job.job_id].state == "COMPLETED"
        lines = launcher.read_log(job, 0, ended=True).decode().splitlines()
        # after configs/deepseek3-671b.env.sh's own flag, our env-file block appends the arm's again
        xla = next(line for line in lines if line.startswith("0: XLA_FLAGS="))
        assert xla.endswith(
            "--xla_gpu_all_gather_combine_threshold_bytes=1073741824 --xla_cpu_multi_thread_eigen=false"
        )
        assert "0: NCCL_NCHANNELS_PER_NET_PEER=8" in lines
        assert any(line.startswith("0: completed step: 9,") for line in lines)
        assert [e for e, _ in events].count("tune_arm_added") == 1
    finally:
        launcher.close()
    assert tree(upstream) == before
