"""The REAL host-cmd bridge (upstream's server and client, started with its own host-cmd-ctl.sh):
quoting through the server's shell, refusals, timeouts, a stopped server, result files, the
container ↔ host path map, and sweeps on the local Slurm through it (sbatch and maxtext-slurm).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_xlatune.notify import Notifier
from pytest_xlatune.slurm.client import SlurmClient
from pytest_xlatune.transport.base import TransportError, TransportRefused, TransportTimeout
from pytest_xlatune.transport.hostcmd import START_HINT, HostCmdTransport
from tests.conftest import REAL as FAKE
from tests.conftest import REAL_FIXED as FIXED
from tests.integration.fixtures_infra import LocalSlurm, placement
from tests.integration.hostcmd_bridge import Bridge, install_bridge
from tests.integration.test_maxtext_upstream import tree
from tests.integration.test_transport import awkward_args, echo_argv
from tests.integration.upstream import (
    HOST_ONLY_ENV,
    conformance_checkout,
    fake_runtime_env,
    require_gpu_gres,
    upstream_snapshot,
)


@pytest.fixture(autouse=True)
def upstream_bridge() -> None:
    """The upstream snapshot's .host-cmd is here (else a failure, never a skip)."""
    if not (upstream_snapshot() / ".host-cmd" / "host_cmd_server.py").is_file():
        pytest.fail(
            f"the upstream maxtext-slurm checkout {upstream_snapshot()} has no .host-cmd bridge: "
            "use a clone of the public repository at f64d93f",
            pytrace=False,
        )


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[Bridge]:
    """A checkout with upstream's .host-cmd, its server running (started after the test's env)."""
    (tmp_path / "host" / "ms").mkdir(parents=True)
    started = install_bridge(tmp_path / "host" / "ms", tmp_path / "shim")
    started.start()
    try:
        yield started
    finally:
        started.stop()


def container_view(tmp_path: Path, checkout: Path) -> Path:
    """The checkout under another path, as maxtext-slurm's container mounts it (/maxtext-slurm)."""
    (tmp_path / "container").mkdir(exist_ok=True)
    view = tmp_path / "container" / "maxtext-slurm"
    view.symlink_to(checkout)
    return view


def test_every_argument_survives_the_servers_shell(bridge: Bridge, tmp_path: Path) -> None:
    marker = tmp_path / "injected"
    t = HostCmdTransport(str(bridge.checkout))
    args = awkward_args(marker)
    assert echo_argv(t, args) == args
    odd = tmp_path / "it's a $(dir); x"
    odd.mkdir()
    res = t.run(
        ["sh", "-c", 'pwd; printf "%s" "$XLT_V" >&2; exit 4'],
        cwd=str(odd),
        env={"XLT_V": f"$(touch {marker}) `x` ; \"q\" 'q'"},
    )
    assert (res.returncode, res.stdout, res.stderr) == (4, f"{odd}\n", f"$(touch {marker}) `x` ; \"q\" 'q'")
    assert not marker.exists()
    # One round trip per command after the one ping, and no result file left in the shared dir.
    assert t.calls == 1 + 1 + 2  # ping (+ its hostname/user/checkout query), the two commands
    assert bridge.results() == []
    t.close()


def test_refusal_and_timeout_in_the_servers_words(bridge: Bridge) -> None:
    t = HostCmdTransport(str(bridge.checkout))
    with pytest.raises(TransportRefused) as refused:
        t.run(["scontrol", "show", "node", "sudo"])  # the default policy denies \bsudo\b
    assert str(refused.value) == (
        "host-cmd policy on the host refused `scontrol show node sudo`: POLICY "
        "VIOLATION: Denied by pattern: '\\\\bsudo\\\\b' (see .host-cmd/host-cmd-ctl.sh policy)"
    )
    with pytest.raises(TransportTimeout, match=r"^host-cmd: `sleep 3` on the host: Command timed out after 1s$"):
        t.run(["sleep", "3"], timeout=1)
    assert t.run(["true"]).ok  # the bridge is still fine
    assert bridge.results() == []


def test_a_stopped_server_is_one_line_not_a_hang(bridge: Bridge, tmp_path: Path) -> None:
    t = HostCmdTransport(str(bridge.checkout))
    info = t.ping()
    assert info.host_checkout == str(bridge.checkout.resolve())
    bridge.stop()
    # Mid-session: upstream's client re-pings a request nobody picked up and gives up.
    with pytest.raises(TransportError) as died:
        t.run(["squeue"])
    assert START_HINT in str(died.value) and "\n" not in str(died.value)
    # Next call, and a session that never reached it: the ping fails.
    for transport in (t, HostCmdTransport(str(bridge.checkout))):
        with pytest.raises(TransportError) as error:
            transport.run(["squeue"])
        assert str(error.value) == (
            f"host-cmd: no server answers for node {info.node_id!r} in {bridge.dir} "
            f"({START_HINT}; inside a container, HOST_CMD_NODE must name the host's node)"
        )
    assert not list((bridge.dir / "queue").rglob("*.cmd"))  # nothing left for a later server to run


def test_container_paths_become_host_paths_and_back(bridge: Bridge, tmp_path: Path) -> None:
    view = container_view(tmp_path, bridge.checkout)
    (bridge.checkout / "outputs").mkdir()
    t = HostCmdTransport(str(view))
    assert t.ping().host_checkout == str(bridge.checkout)
    seen = bridge.checkout / "outputs" / "argv-seen-on-host"
    res = t.run(
        ["sh", "-c", 'pwd -P; printf "%s" "$1" > "$2"', "_", f"--x={view}/outputs", str(seen)],
        cwd=str(view / "outputs"),
    )
    # The host ran it in its own path with its own paths in the arguments; the answer names the
    # container's path.
    assert res.stdout.splitlines() == [str(view / "outputs")]
    assert seen.read_text() == f"--x={bridge.checkout}/outputs"
    assert f"cd {bridge.checkout}/outputs &&" in bridge.log() and str(view) not in bridge.log()
    # Files are the container's: read and written here, not through the bridge.
    calls = t.calls
    t.write_atomic(str(view / "outputs" / "f.log"), b"abc\ndef\n")
    assert t.read_from(str(view / "outputs" / "f.log"), 4) == b"def\n" and t.exists(str(view / "outputs"))
    assert t.calls == calls


def test_a_notification_reaches_the_host_as_one_argument_in_the_checkout(bridge: Bridge) -> None:
    message = 'STOP: demo FSDP=8\nreason: node03 drained; `scontrol` said "no" for $NODE\'s RESUME'
    warned: list[str] = []
    # The template runs where Slurm runs: on the host, in the bridge's checkout (the server's cwd).
    notifier = Notifier(
        HostCmdTransport(str(bridge.checkout)), "sh -c 'printf %s \"$0\" > notified.txt' {message}", warn=warned.append
    )
    notifier.send(message)
    assert (bridge.checkout / "notified.txt").read_text() == message and not warned


@pytest.mark.slurm
def test_a_node_resume_goes_through_the_bridge_as_one_request(bridge: Bridge, local_slurm: LocalSlurm) -> None:
    """RESUME of a node in no state to resume (an idle one: nothing changes on the shared
    cluster) reaches Slurm on the host and Slurm's refusal is the harmless one, not a bridge error."""
    t = HostCmdTransport(str(bridge.checkout))
    client = SlurmClient(t)
    client.resume(local_slurm.nodes[-1], reason="xlatune host-cmd test")
    assert bridge.commands("scontrol update") == [
        f"scontrol update NodeName={local_slurm.nodes[-1]} State=RESUME 'Reason=xlatune host-cmd test'"
    ]
    assert bridge.results() == []
    t.close()


SBATCH_CELL = """\
model_tag: hc
nodelist: node[03-04]
parallelism: FSDP=8
baseline_repeats: 1
overrides: {fake_step_sleep: 0.05}
waves:
  2:
    - {name: fast, xla_flags: [--xla_fake_tgs=1100]}
    - {name: env8, env: {NCCL_NCHANNELS_PER_NET_PEER: "8"}, xla_flags: [--xla_fake_tgs=1000]}
backend:
  kind: sbatch
  time: "5:00"
"""


@pytest.mark.slurm
def test_sbatch_sweep_through_the_bridge(
    pytester: pytest.Pytester, local_slurm: LocalSlurm, fake_trainer_env: None, tmp_path: Path
) -> None:
    odd = tmp_path / "host dir, it's $HOME; `x`" / "ms"  # every path below goes through the server's shell
    odd.mkdir(parents=True)
    bridge = install_bridge(odd, tmp_path / "shim")
    bridge.start()  # after fake_trainer_env: the jobs get the server's environment, as on a host
    try:
        cell = pytester.makefile(".yml", hc=SBATCH_CELL)
        # The fixed protocol: every item its own job (fast's confirmed win would skip env8).
        result = pytester.runpytest(
            str(cell), "-v", *FIXED, "--xlatune-poll-interval=0.3", f"--xlatune-host-cmd={bridge.checkout}"
        )
    finally:
        bridge.stop()
    result.assert_outcomes(passed=5)  # baseline, evidence, fast, env8, the winner's evidence
    result.stdout.fnmatch_lines(
        [
            "*host-cmd bridge reached *@* (queue *, checkout *ms on the host, * ms round trip)*",
            "*wave2::fast[[]default[]] PASSED 1100.* TGS*",
        ]
    )
    events = [json.loads(line) for line in (pytester.path / ".xlatune" / "hc.jsonl").read_text().splitlines()]
    jobs = [e["job_id"] for e in events if e["event"] == "submitted"]
    for job_id in jobs:
        assert placement(job_id)[0] == "node[03-04]"
    # Scripts and logs live under the bridge checkout's outputs/, the tree the host shares.
    logs = sorted((bridge.checkout / "outputs" / "xlatune-jobs" / "hc" / "outputs").glob("*-hc-env8-default.log"))
    assert logs and "0: completed step: 14" in logs[0].read_text()
    assert "sbatch" in bridge.log() and "squeue" in bridge.log()
    assert bridge.results() == []


@pytest.mark.slurm
def test_policy_refusal_and_stopped_server_each_fail_the_cell_with_one_line(
    pytester: pytest.Pytester, local_slurm: LocalSlurm, tmp_path: Path
) -> None:
    (tmp_path / "host" / "ms").mkdir(parents=True)
    bridge = install_bridge(tmp_path / "host" / "ms", tmp_path / "shim")
    cell = pytester.makefile(".yml", hc=SBATCH_CELL)
    stopped = pytester.runpytest(str(cell), *FAKE, f"--xlatune-host-cmd={bridge.checkout}")
    stopped.assert_outcomes(failed=5)
    stopped.stdout.fnmatch_lines([f"*--xlatune-host-cmd: host-cmd: no server answers for node * ({START_HINT};*"])
    policy = json.loads((bridge.dir / "policy.json.default").read_text())
    policy["deny_patterns"].append(r"^sinfo\b")
    (bridge.dir / "policy.json").write_text(json.dumps(policy))
    bridge.start()
    try:
        refused = pytester.runpytest(str(cell), *FAKE, f"--xlatune-host-cmd={bridge.checkout}")
    finally:
        bridge.stop()
    refused.assert_outcomes(failed=5)
    refused.stdout.fnmatch_lines(
        [
            "*--xlatune-host-cmd: host-cmd policy on the host refused `sinfo *`: "
            "POLICY VIOLATION: Denied by pattern: '^sinfo\\\\b'*"
        ]
    )
    assert "cannot reach Slurm" not in refused.stdout.str()
    assert (
        not (pytester.path / ".xlatune" / "hc.jsonl").exists()
        or "submitted" not in (pytester.path / ".xlatune" / "hc.jsonl").read_text()
    )


MAXTEXT_CELL = """\
model_tag: deepseek3
nodelist: node[01-02]
parallelism: FSDP=2
pdbs: 2
steps: 10
baseline_repeats: 1
config_tags:
  moe: {sparse_matmul: true, use_turbo_grouped_gemm: true, use_deepep_dispatch: true}
env_file:                        # what upstream configs/deepseek3-671b.env.sh deploys on FSDP
  - {flag: --xla_gpu_all_gather_combine_threshold_bytes=1073741824, image_default: "8589934592"}
waves:
  2:
    - {name: no_eigen_mt, xla_flags: [--xla_cpu_multi_thread_eigen=false], env: {NCCL_NCHANNELS_PER_NET_PEER: "8"}}
backend:
  kind: maxtext-slurm
  partition: debug
  time: "10:00"
"""


def checkout_files(root: Path) -> dict[str, tuple[bytes, int]]:
    """tree() without .host-cmd/ (the server's queue, results, log and pid files live there)."""
    return {path: item for path, item in tree(root).items() if not path.startswith(".host-cmd/")}


@pytest.mark.slurm
@pytest.mark.jax
def test_maxtext_slurm_sweep_through_the_bridge_from_a_container_path(
    pytester: pytest.Pytester, local_slurm: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unmodified upstream checkout (utils/preflight.sh aside) and its own bridge: submit.sh,
    squeue, sacct and scancel run on the "host" (the server), the session in the "container"."""
    require_gpu_gres(local_slurm.partition)
    host = conformance_checkout(tmp_path / "host")
    before = checkout_files(host)
    # The server is started in the host's environment: the fake container runtime on its PATH.
    server_env = {k: v for k, v in os.environ.items() if k not in HOST_ONLY_ENV}
    server_env.update(fake_runtime_env(tmp_path / "fake-docker"))
    for name in HOST_ONLY_ENV:
        monkeypatch.delenv(name, raising=False)
    bridge = install_bridge(host, tmp_path / "shim")
    view = container_view(tmp_path, host)  # the session sees the checkout where the container mounts it
    bridge.start(env=server_env)
    try:
        cell = pytester.makefile(".yml", ds=MAXTEXT_CELL)  # no `checkout`: the bridge's own
        start = time.monotonic()
        # The fixed protocol: the bridge's mechanics are the point, every item runs to its end
        # (adaptively, a noisy +22 % restore_default once counted as a confirmed win and skipped two).
        result = pytester.runpytest(
            str(cell),
            "-v",
            "-p",
            "no:cacheprovider",
            "--xlatune-poll-interval=1",
            f"--xlatune-host-cmd={view}",
            "--xlatune-fixed-protocol",
        )
        wall = time.monotonic() - start
    finally:
        bridge.stop()
    result.assert_outcomes(passed=5)  # baseline, restore_default, evidence, no_eigen_mt, winner evidence
    result.stdout.fnmatch_lines(
        [f"*host-cmd bridge reached *checkout {host} on the host*", "*wave2::no_eigen_mt[[]moe[]] PASSED*"]
    )
    events = [json.loads(line) for line in (pytester.path / ".xlatune" / "ds.jsonl").read_text().splitlines()]
    jobs = [e["job_id"] for e in events if e["event"] == "submitted"]
    results = {e["profile"]: e for e in events if e["event"] == "result"}
    polls = bridge.commands("squeue")
    print(
        f"maxtext-slurm through host-cmd: {len(jobs)} jobs in {wall:.1f} s at a 1 s poll interval; bridge "
        f"requests: {len(bridge.commands())} ({len(polls)} squeue, {len(bridge.commands('./submit.sh'))} "
        f"submit.sh, {len(bridge.commands('sacct'))} sacct, {len(bridge.commands('scontrol'))} scontrol)"
    )
    assert all(placement(job_id)[0] == "node[01-02]" for job_id in jobs)
    # submit.sh ran in the host's path; the session reads logs under the container's path.
    assert f"cd {host} && ./submit.sh deepseek3-671b:" in bridge.log()
    assert all(r["log_path"].startswith(f"{view}/outputs/") for r in results.values())
    assert dict(results["evidence"]["artifacts"])["hlo_dump"].startswith(f"{view}/outputs/")
    log = Path(results["no_eigen_mt"]["log_path"]).read_text()
    assert "0: NCCL_NCHANNELS_PER_NET_PEER=8" in log.splitlines() and "--xla_cpu_multi_thread_eigen=false" in log
    assert polls and all(p.startswith("squeue ") for p in polls)
    # The TUNE_PROFILE block went in and out locally, byte-exact; no result file left behind.
    assert checkout_files(host) == before
    assert bridge.results() == []
    assert not os.path.exists(pytester.path / "xlatune-jobs")
