"""The maxtext-slurm backend end to end: pytest → ONE SSH connection with host-key checking →
the stand-in checkout's submit.sh on the local Slurm cluster → the embedded JAX workload → report.

Each test copies tests/maxtext_slurm_standin to a temporary directory; its `container_env.local.sh`
(sourced on the node, as upstream's gitignored credentials file) points the stand-in at this venv.
"""

from __future__ import annotations

import itertools
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_xlatune.evidence.hlo import find_train_step_dump
from pytest_xlatune.launch.base import JobRequest
from pytest_xlatune.launch.maxtext.launcher import MaxTextSlurmLauncher
from pytest_xlatune.launch.slurm_jobs import SlurmPlacement
from pytest_xlatune.slurm.client import SlurmClient
from pytest_xlatune.transport.base import LocalTransport, Transport
from tests.conftest import notify_sink
from tests.integration.fixtures_infra import LocalSlurm, SSHServer, placement
from tests.integration.waits import ENDS_S, wait_until

STANDIN = Path(__file__).resolve().parents[1] / "maxtext_slurm_standin"
MANAGED = ("train_env.sh", "configs/demo.env.sh")

CELL = """\
model_tag: demo
nodelist: node[01-02]
parallelism: FSDP=2
pdbs: 2
steps: 12
baseline_repeats: 1
env_file:
  - {{flag: --xla_cpu_enable_fast_math=true, image_default: "false"}}
  - {{env: XLA_PYTHON_CLIENT_MEM_FRACTION=.85, image_default: ".93"}}
waves:
  2:
    - {{name: no_eigen_mt, xla_flags: [--xla_cpu_multi_thread_eigen=false]}}
    - {{name: opt1, xla_flags: [--xla_backend_optimization_level=1]}}
  3:
    - {{name: nccl_chan8, env: {{NCCL_NCHANNELS_PER_NET_PEER: "8"}}}}
    - {{name: mem90, xla_flags: [--xla_cpu_enable_fast_math=false], env: {{XLA_PYTHON_CLIENT_MEM_FRACTION: ".90"}}}}
backend:
  kind: maxtext-slurm
  checkout: {checkout}
  partition: debug
  time: "5:00"
"""


def copy_checkout(base: Path) -> Path:
    root = base / "maxtext-slurm"
    shutil.copytree(STANDIN, root, symlinks=True, ignore=shutil.ignore_patterns("outputs"))
    (root / ".git").mkdir()  # a clone directory, as pre-flight requires (upstream freezes the parent otherwise)
    (root / "container_env.local.sh").write_text(f"export XLATUNE_PYTHON={sys.executable}\n")
    return root


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {name: ((root / name).read_bytes(), (root / name).stat().st_mode) for name in MANAGED}


def events(store: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in store.read_text().splitlines()]


def active_ids() -> set[str]:
    out = subprocess.run(["squeue", "-h", "-t", "PENDING,RUNNING,COMPLETING", "-o", "%i"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return set(out.stdout.split())


def accepted_logins(server: SSHServer) -> int:
    log = Path(server.dir) / "sshd.log"
    return log.read_text(errors="replace").count("Accepted publickey") if log.exists() else 0


def env_line(log: str, name: str) -> str:
    return next(line for line in log.splitlines() if line.startswith(f"0: {name}="))


@pytest.mark.slurm
@pytest.mark.sshd
@pytest.mark.jax
def test_sweep_over_one_ssh_connection_is_pinned_serial_restored_and_reported(
    pytester: pytest.Pytester, local_slurm: LocalSlurm, sshd_server: SSHServer
) -> None:
    root = copy_checkout(pytester.path)
    before = snapshot(root)
    cell = pytester.makefile(".yml", demo=CELL.format(checkout=json.dumps(str(root))))
    logins = accepted_logins(sshd_server)
    # The skill's milestones go through the same connection, run in the checkout on the far side.
    notify, sink = notify_sink(pytester.mkdir("notify"))
    start = time.monotonic()
    # The fixed protocol: one job per item, each to its end (the counts below are the plan's).
    result = pytester.runpytest(
        str(cell),
        "-v",
        "-p",
        "no:cacheprovider",
        "--xlatune-poll-interval=0.3",
        "--xlatune-fixed-protocol",
        "--xlatune-ssh-host=xlatune-test",
        f"--xlatune-ssh-config={sshd_server.ssh_config}",
        notify,
    )
    wall = time.monotonic() - start
    result.assert_outcomes(passed=8)  # 7 runs + the winner-evidence run
    result.stdout.fnmatch_lines(["*wave1::restore_default[[]default[]] PASSED*", "*wave3::mem90[[]default[]] PASSED*"])

    found = events(pytester.path / ".xlatune" / "demo.jsonl")
    jobs = [e["job_id"] for e in found if e["event"] == "submitted"]
    results = {e["profile"]: e for e in found if e["event"] == "result"}
    (cleanup,) = [e for e in found if e["event"] == "cleanup"]
    print(
        f"maxtext-slurm e2e: {len(jobs)} jobs in {wall:.1f} s; SSH connections: client "
        f"{cleanup['ssh_connections']}, sshd {accepted_logins(sshd_server) - logins}"
    )

    # Kickoff, the positive results, the mid-point and the end, each once, each one argument.
    messages = sink.read_text().split("\n---\n")[:-1]
    assert messages[0].startswith("demo FSDP=2 (demo.yml): xla-tuning sweep started of 8 item(s)"), messages
    assert sum(": mid-point: " in m for m in messages) == 1
    assert messages[-1].startswith("demo FSDP=2 (demo.yml): sweep finished: 8 item(s) done"), messages
    # Exactly one SSH connection for the whole session, seen by the client and by sshd.
    assert cleanup["ssh_connections"] == 1
    assert accepted_logins(sshd_server) - logins == 1
    # Every job pinned to the frozen nodelist, never two at once, none left behind.
    assert len(jobs) == len(set(jobs)) == 8
    spans = []
    for job_id in jobs:
        nodes, start, end = placement(job_id)
        assert nodes == "node[01-02]", (job_id, nodes)
        spans.append((start, end))
    spans.sort()
    assert all(prev[1] <= nxt[0] for prev, nxt in itertools.pairwise(spans)), spans
    assert not set(jobs) & active_ids()
    # The checkout is exactly as it was: both managed files, bytes and permission bits.
    assert snapshot(root) == before
    assert cleanup["restored"] == [str(root / name) for name in MANAGED] and cleanup["errors"] == {}
    # restore_default really ends at the image defaults, after configs/demo.env.sh's own settings.
    restore_log = Path(results["restore_default"]["log_path"]).read_text()
    assert env_line(restore_log, "XLA_FLAGS").endswith(
        "--xla_cpu_enable_fast_math=true --xla_cpu_enable_fast_math=false"
    )
    assert env_line(restore_log, "XLA_PYTHON_CLIENT_MEM_FRACTION") == "0: XLA_PYTHON_CLIENT_MEM_FRACTION=.93"
    baseline_log = Path(results["baseline"]["log_path"]).read_text()
    assert env_line(baseline_log, "XLA_FLAGS").endswith("--xla_cpu_enable_fast_math=true")
    assert env_line(baseline_log, "XLA_PYTHON_CLIENT_MEM_FRACTION").endswith("=.85")
    nccl_log = Path(results["nccl_chan8"]["log_path"]).read_text()
    assert env_line(nccl_log, "NCCL_NCHANNELS_PER_NET_PEER").endswith("=8")
    assert env_line(Path(results["mem90"]["log_path"]).read_text(), "XLA_PYTHON_CLIENT_MEM_FRACTION").endswith("=.90")
    # The evidence run dumped HLO and a profile; the inventory is the skill's Step 2.
    # Over SSH, what the analysis reads was copied into the store (the cluster paths are kept).
    artifacts = dict(results["evidence"]["artifacts"])
    local = pytester.path / ".xlatune" / "demo" / "evidence" / results["evidence"]["job_id"]
    assert artifacts["hlo_dump"] == str(local / "xla_dump")
    remote_dump = find_train_step_dump(str(f) for f in Path(artifacts["hlo_dump_remote"]).iterdir())
    assert remote_dump and [f.name for f in (local / "xla_dump").iterdir()] == [Path(remote_dump).name]
    assert artifacts["profile_remote"].endswith("/tensorboard/plugins/profile")
    assert list((local / "profile").rglob("*.trace.json.gz"))
    assert "not readable here" not in (pytester.path / "demo-tuning.md").read_text()
    (inventory,) = [e for e in found if e["event"] == "inventory"]
    assert inventory["env_file"]["deployed"] == [["--xla_cpu_enable_fast_math", "true"],
                                                 ["XLA_PYTHON_CLIENT_MEM_FRACTION", ".85"]]  # fmt: skip
    assert inventory["env_file"]["not_restored"] == [] and inventory["tuning_md"]["fresh_start"]
    report = (pytester.path / "demo-tuning.md").read_text()
    assert "backend `maxtext-slurm`; pinned nodelist `node[01-02]`" in report


@pytest.mark.slurm
@pytest.mark.jax
def test_refused_nodelist_or_foreign_block_leaves_the_checkout_untouched(
    pytester: pytest.Pytester, local_slurm: LocalSlurm
) -> None:
    root = copy_checkout(pytester.path)
    before = snapshot(root)
    text = CELL.format(checkout=json.dumps(str(root)))
    cell = pytester.makefile(".yml", moved=text)
    pytester.runpytest(str(cell), "-k", "baseline", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    cell.write_text(text.replace("node[01-02]", "node[03-04]"))
    result = pytester.runpytest(str(cell), "-k", "baseline", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*moved.yml: nodelist: expected the sweep's frozen nodelist 'node[[]01-02[]]'*"])
    assert snapshot(root) == before  # checked before this process exits: no atexit clean-up involved

    foreign = root / "configs" / "demo.env.sh"
    foreign.write_text(foreign.read_text() + 'case "${TUNE_PROFILE:-}" in x) ;; esac\n')
    other = pytester.makefile(".yml", foreign=text)
    result = pytester.runpytest(str(other), "-k", "baseline", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*foreign.yml: backend.checkout: {foreign} has TUNE_PROFILE content this sweep "
            f"did not write, line 7: *; remove it from the checkout {root} first*"
        ]
    )
    assert (root / "train_env.sh").read_bytes() == before["train_env.sh"][0]


@pytest.mark.slurm
@pytest.mark.jax
def test_the_image_asked_for_is_the_jobs_docker_image_and_a_missing_one_submits_nothing(
    pytester: pytest.Pytester, local_slurm: LocalSlurm
) -> None:
    root = copy_checkout(pytester.path)
    image = pytester.path / "maxtext-v26.3.tar"
    image.write_bytes(b"a tarball")
    cell = pytester.makefile(".yml", img=CELL.format(checkout=json.dumps(str(root))))
    common = ["-k", "baseline", "-p", "no:cacheprovider", "--xlatune-poll-interval=0.3"]
    result = pytester.runpytest(str(cell), f"--xlatune-image={image}", *common)
    result.assert_outcomes(passed=1)
    found = events(pytester.path / ".xlatune" / "img.jsonl")
    (baseline,) = [e for e in found if e["event"] == "result"]
    assert baseline["image"] == str(image)
    # container_env.sh on the node kept the DOCKER_IMAGE submit.sh ran under.
    assert (
        f"[stand-in] no docker: running on node01 with DOCKER_IMAGE={image}" in Path(baseline["log_path"]).read_text()
    )

    gone = pytester.path / "maxtext-v26.4.tar"
    result = pytester.runpytest(str(cell), f"--xlatune-image={gone}", "--xlatune-remeasure", *common)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"*img.yml: image: DOCKER_IMAGE {gone} (the image asked for) does not exist on the cluster*"]
    )
    assert len([e for e in events(pytester.path / ".xlatune" / "img.jsonl") if e["event"] == "submitted"]) == 1


INTERRUPT_CELL = """\
model_tag: demo
nodelist: node[03-04]
parallelism: FSDP=2
steps: 12
baseline_repeats: 1
overrides: {{fault: hang_after_step0}}
waves:
  2:
    - {{name: a, xla_flags: [--xla_cpu_multi_thread_eigen=false]}}
    - {{name: b, xla_flags: [--xla_backend_optimization_level=1]}}
    - {{name: c, xla_flags: [--xla_backend_optimization_level=2]}}
backend:
  kind: maxtext-slurm
  checkout: {checkout}
  time: "5:00"
"""


@pytest.mark.slurm
@pytest.mark.jax
def test_ctrl_c_cancels_our_queued_jobs_and_restores_the_checkout(
    pytester: pytest.Pytester, local_slurm: LocalSlurm
) -> None:
    root = copy_checkout(pytester.path)
    before = snapshot(root)
    cell = pytester.makefile(".yml", hang=INTERRUPT_CELL.format(checkout=json.dumps(str(root))))
    store = pytester.path / ".xlatune" / "hang.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", str(cell), "-k", "wave2", "-p", "no:cacheprovider",
                             "--xlatune-poll-interval=0.3"], cwd=pytester.path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        wait_until(
            "the sweep to submit three jobs",
            lambda: store.exists() and sum(e["event"] == "submitted" for e in events(store)) >= 3,
            proc=proc,
        )
        assert b"xlatune TUNE_PROFILE" in (root / "train_env.sh").read_bytes()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=ENDS_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "KeyboardInterrupt" in out, out
    found = events(store)
    submitted = {e["job_id"] for e in found if e["event"] == "submitted"}
    assert {e["job_id"] for e in found if e["event"] == "cancelled"} == submitted
    # scancel is asynchronous: a running job is COMPLETING until slurmstepd has killed its
    # processes (seconds on a loaded machine); none of them may stay queued or running.
    wait_until("the cancels to land", lambda: not submitted & active_ids(), every=0.5)
    assert snapshot(root) == before


# ---- shell injection: hostile checkout paths are argv entries, never shell text ---------------

FAKE_SUBMIT = """#!/bin/bash
printf '%s\\n' "$@" > argv.txt
mkdir -p outputs/5-JAX-demo-t/xla_dump
printf 'completed step: 0, seconds: 1.0\\n' > outputs/5-JAX-demo-t.log
echo "JOB_NAME=JAX-demo-t"
echo "Submitted batch job 5"
echo "[ARTIFACT] $PWD/outputs/5-JAX-demo-t/artifact -> .artifacts/artifact_x"
"""


def hostile_paths(base: Path) -> list[Path]:
    """Checkouts whose path would run `touch <base>/pwnedN` if any command line were unquoted."""
    payloads = ["a $(touch {m}1) b", "c `touch {m}2` d", "e; touch {m}3 #", "g' ; touch {m}4 ; 'h",
                'i" ; touch {m}5 ; "j', "k || touch {m}6 #", "m | touch {m}7 #", "n > {m}8 #"]  # fmt: skip
    return [Path(str(base / p.format(m=base / "pwned"))) for p in payloads]


def test_the_hostile_paths_do_inject_when_interpolated_naively(tmp_path: Path) -> None:
    """Keeps the table honest: each payload fires unquoted, in '…' or in "…"."""
    for template in ("ls {p}/x", "ls '{p}/x'", 'ls "{p}/x"'):
        for path in hostile_paths(tmp_path):
            subprocess.run(template.format(p=path), check=False, shell=True, capture_output=True, cwd=tmp_path)
    assert sorted(p.name for p in tmp_path.glob("pwned*")) == [f"pwned{n}" for n in range(1, 9)]


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.sshd)])
def transport(request: pytest.FixtureRequest) -> Transport:
    if request.param == "local":
        return LocalTransport()
    server: SSHServer = request.getfixturevalue("sshd_server")
    return server.transport()


def test_hostile_checkout_paths_are_passed_quoted(transport: Transport, tmp_path: Path) -> None:
    for root in hostile_paths(tmp_path):
        root.mkdir(parents=True)
        (root / "configs").mkdir()
        for name in ("train_env.sh", "container_env.sh", "configs/demo.gpu.yml", "configs/demo.env.sh"):
            shutil.copy2(STANDIN / name, root / name)
        (root / "submit.sh").write_text(FAKE_SUBMIT)
        (root / "submit.sh").chmod(0o755)
        (root / ".git").mkdir()
        before = snapshot(root)
        launcher = MaxTextSlurmLauncher(transport, SlurmClient(transport), str(root), SlurmPlacement("node01", 1),
                                        "demo", sweep_id="inject.1", lookup_interval=0)  # fmt: skip
        launcher.prepare()
        job = launcher.submit(JobRequest("demo-t-default", "t", ("steps=10",), xla_flags=("--xla_a=1",)))
        assert job.job_dir == f"{root}/outputs/5-JAX-demo-t"
        assert launcher.read_log(job, 0) == b"completed step: 0, seconds: 1.0\n"
        assert launcher.artifacts(job) == {"hlo_dump": f"{root}/outputs/5-JAX-demo-t/xla_dump"}
        assert (root / "argv.txt").read_text().splitlines()[0] == "demo:t"
        launcher.close()
        assert snapshot(root) == before
    transport.close()
    markers = [tmp_path / f"pwned{n}" for n in range(1, 9)]
    assert not [m for m in markers if m.exists()]
