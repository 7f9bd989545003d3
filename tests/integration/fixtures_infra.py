"""Session fixtures for the real infrastructure: the local 4-node Slurm cluster and a loopback sshd.

Load with `pytest_plugins = ["tests.integration.fixtures_infra"]` (or `-p tests.integration.fixtures_infra`).
Outside CI a missing piece skips the test with the reason; with CI=true it fails the test loudly.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from pytest_xlatune.transport.ssh import SSHTransport

REPO = Path(__file__).resolve().parents[2]
SLURM_SCRIPT = REPO / "scripts" / "local-slurm.sh"
SSHD_SCRIPT = REPO / "scripts" / "local-sshd.sh"
# Serialises `up` across pytest-xdist workers: two concurrent starts would race for pid files/ports.
LOCK_DIR = Path(os.environ.get("XLATUNE_INFRA_LOCK_DIR", "/tmp"))


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def unavailable(reason: str) -> NoReturn:
    """Skip with the reason, or fail loudly in CI where the infrastructure must work."""
    if in_ci():
        pytest.fail(f"infrastructure unavailable in CI: {reason}", pytrace=False)
    pytest.skip(reason)


@contextmanager
def _locked(name: str) -> Iterator[None]:
    with open(LOCK_DIR / f"xlatune-{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _script(argv: list[str], what: str, timeout: float) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0:
        unavailable(f"{what} needs root (starts daemons, may apt-get install)")
    try:
        proc = subprocess.run(["bash", *argv], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        unavailable(f"{what}: `{' '.join(argv)}` took longer than {timeout:g} s")
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:])
        unavailable(f"{what}: `{' '.join(argv)}` exited {proc.returncode}:\n{tail}")
    return proc


@dataclass(frozen=True)
class LocalSlurm:
    """The cluster started by scripts/local-slurm.sh (left running after the session)."""

    nodes: tuple[str, ...] = ("node01", "node02", "node03", "node04")
    nodelist: str = "node[01-04]"
    partition: str = "debug"
    conf: str = "/etc/slurm/slurm.conf"
    state_dir: str = os.environ.get("XLATUNE_SLURM_STATE", "/var/lib/xlatune-slurm")
    script: str = str(SLURM_SCRIPT)

    @property
    def accounting(self) -> bool:
        """True when the cluster was brought up with `--accounting` (slurmdbd: sacct works)."""
        return os.path.exists(os.path.join(self.state_dir, "accounting"))


@dataclass(frozen=True)
class SSHServer:
    """A throw-away sshd on 127.0.0.1 (scripts/local-sshd.sh) and the client files it wrote."""

    host: str
    port: int
    user: str
    key_path: str
    known_hosts: str
    ssh_config: str
    dir: str
    alias: str = "xlatune-test"  # Host entry in ssh_config
    jump_alias: str = "xlatune-test-jump"  # the same sshd reached through ProxyJump xlatune-test

    def transport(self, **kwargs: Any) -> SSHTransport:
        """Return an SSHTransport with host-key checking on, configured explicitly (no ssh_config)."""
        kwargs.setdefault("known_hosts", self.known_hosts)
        kwargs.setdefault("allow_agent", False)
        # An empty config file keeps the user's ~/.ssh/config out of the tests.
        kwargs.setdefault("ssh_config", os.path.join(self.dir, "empty_ssh_config"))
        return SSHTransport(self.host, port=self.port, user=self.user, key_filename=self.key_path, **kwargs)


@pytest.fixture(scope="session")
def local_slurm() -> LocalSlurm:
    """Ensure `scripts/local-slurm.sh up` ran: 4 idle nodes in partition debug."""
    with _locked("slurm"):
        _script([str(SLURM_SCRIPT), "up"], "local Slurm", timeout=900)
    return LocalSlurm()


@pytest.fixture(scope="session")
def sshd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHServer]:
    """Start a loopback sshd with throw-away keys for the session; stop it at the end."""
    d = tmp_path_factory.mktemp("sshd")
    with _locked("sshd"):
        proc = _script([str(SSHD_SCRIPT), "up", str(d)], "loopback sshd", timeout=900)
    (d / "empty_ssh_config").write_text("")
    port = int(proc.stdout.strip().splitlines()[-1])
    try:
        yield SSHServer(
            host="127.0.0.1",
            port=port,
            user="root",
            key_path=str(d / "id_ed25519"),
            known_hosts=str(d / "known_hosts"),
            ssh_config=str(d / "ssh_config"),
            dir=str(d),
        )
    finally:
        subprocess.run(["bash", str(SSHD_SCRIPT), "down", str(d)], capture_output=True, timeout=60, check=False)


def placement(job_id: str) -> tuple[str, str, str]:
    """(nodelist, start, end) of a finished job: from slurmctld while it remembers the job
    (MinJobAge = 30 s after the end), then from accounting."""
    info = subprocess.run(["scontrol", "-o", "show", "job", job_id], check=False, capture_output=True, text=True).stdout
    found = [re.search(rf"\b{key}=(\S+)", info) for key in ("NodeList", "StartTime", "EndTime")]
    if all(found):
        return tuple(m.group(1) for m in found)  # type: ignore[return-value, union-attr]
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "NodeList,Start,End"],
        check=False,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert out, f"job {job_id}: neither scontrol nor sacct knows it"
    nodes, start, end = out.splitlines()[0].split("|")
    return nodes, start, end
