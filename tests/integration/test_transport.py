"""Transports against real processes: subprocess and a loopback OpenSSH sshd (host-cmd: test_hostcmd.py)."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_xlatune.transport.base import (
    CommandResult,
    LocalTransport,
    Transport,
    TransportError,
    TransportTimeout,
    command_line,
)
from pytest_xlatune.transport.hostcmd import HostCmdTransport
from pytest_xlatune.transport.ssh import SSHTransport

if TYPE_CHECKING:
    from tests.integration.fixtures_infra import SSHServer


def awkward_args(marker: Path) -> list[str]:
    """Arguments a shell would act on if they were not quoted; each would create `marker`."""
    m = str(marker)
    return [
        "plain",
        "two words",
        "it's",
        'say "hi"',
        f"; touch {m}",
        f"$(touch {m})",
        f"`touch {m}`",
        f"&& touch {m}",
        f"| touch {m}",
        f"'; touch {m}; '",
        f"\ntouch {m}\n",
        "$HOME",
        "*",
        "~",
        "",
        "tab\there",
        "back\\slash",
        "ünïcödé",
    ]


def echo_argv(t: Transport, args: list[str], **kw: object) -> list[str]:
    """Run printf '%s\\0' ARGS and split on NUL, so newlines inside args survive the round trip."""
    res = t.run(["printf", r"%s\0", *args], **kw)  # type: ignore[arg-type]
    assert res.returncode == 0, res.stderr
    return res.stdout.split("\0")[:-1]


# -- command_line: the quoting every remote command goes through ---------------------------------


def test_command_line_round_trips_through_a_real_shell(tmp_path: Path) -> None:
    marker = tmp_path / "injected"
    args = awkward_args(marker)
    line = command_line(["printf", r"%s\0", *args])
    res = LocalTransport().run(["sh", "-c", line])
    assert res.stdout.split("\0")[:-1] == args
    assert not marker.exists()


def test_command_line_quotes_cwd_and_env(tmp_path: Path) -> None:
    marker = tmp_path / "injected"
    odd = tmp_path / "it's a $(dir)"
    odd.mkdir()
    line = command_line(
        ["sh", "-c", 'pwd; printf "%s" "$XLT_VAL"'], cwd=str(odd), env={"XLT_VAL": f"$(touch {marker}) `x` ;"}
    )
    assert line.startswith("cd '") and " && env 'XLT_VAL=" in line
    res = LocalTransport().run(["sh", "-c", line])
    assert res.stdout == f"{odd}\n$(touch {marker}) `x` ;"
    assert not marker.exists()


@pytest.mark.parametrize(
    ("argv", "env", "match"),
    [
        ("echo hi", None, "not a command line"),
        ([], None, "non-empty"),
        (["-rf"], None, "refusing program name"),
        (["A=1"], {"B": "2"}, "refusing program name"),
        (["true"], {"BAD NAME": "1"}, "invalid environment variable name"),
        (["true"], {"X;rm": "1"}, "invalid environment variable name"),
    ],
)
def test_command_line_refuses_ambiguous_input(argv: object, env: dict[str, str] | None, match: str) -> None:
    with pytest.raises(TransportError, match=match):
        command_line(argv, env=env)  # type: ignore[arg-type]


# -- LocalTransport ---------------------------------------------------------------------------------


def test_local_run_passes_args_verbatim_without_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "injected"
    args = awkward_args(marker)
    assert echo_argv(LocalTransport(), args) == args
    assert not marker.exists()


def test_local_run_reports_exit_code_streams_cwd_and_env(tmp_path: Path) -> None:
    t = LocalTransport()
    res = t.run(
        ["sh", "-c", 'echo out; echo err >&2; pwd; echo "$XLT_A"; exit 3'], cwd=str(tmp_path), env={"XLT_A": "a b"}
    )
    assert res == CommandResult(
        ("sh", "-c", 'echo out; echo err >&2; pwd; echo "$XLT_A"; exit 3'), 3, f"out\n{tmp_path}\na b\n", "err\n"
    )
    with pytest.raises(TransportError, match="exited 3: err"):
        res.check()


def test_local_run_unknown_program_is_127_like_a_shell() -> None:
    res = LocalTransport().run(["xlatune-no-such-program"])
    assert res.returncode == 127 and "command not found" in res.stderr


def test_local_run_timeout_raises() -> None:
    with pytest.raises(TransportTimeout, match=re.escape("sleep timed out after 0.3 s")):
        LocalTransport().run(["sleep", "5"], timeout=0.3)


def test_local_files_read_from_offset_and_write_atomically(tmp_path: Path) -> None:
    t = LocalTransport()
    path = str(tmp_path / "log with space.txt")
    t.write_atomic(path, b"hello world\n")
    t.write_atomic(path, b"0123456789")
    assert t.read_from(path, 4) == b"456789"
    assert t.read_from(path, 4, 3) == b"456"
    assert t.read_from(path, 99) == b""
    assert t.exists(path) and not t.exists(str(tmp_path / "nope"))
    assert sorted(os.listdir(tmp_path)) == ["log with space.txt"]  # no temp file left behind
    with pytest.raises(FileNotFoundError):
        t.read_from(str(tmp_path / "nope"), 0)


def test_transports_satisfy_the_protocol() -> None:
    assert isinstance(LocalTransport(), Transport)
    assert isinstance(HostCmdTransport("/nonexistent"), Transport)
    assert isinstance(SSHTransport("127.0.0.1", port=1, ssh_config=os.devnull), Transport)


# -- SSHTransport -----------------------------------------------------------------------------------


@pytest.fixture
def ssh(sshd_server: SSHServer) -> Iterator[SSHTransport]:
    t = sshd_server.transport()
    yield t
    t.close()


@pytest.mark.sshd
def test_ssh_run_passes_args_verbatim_and_nothing_is_injected(ssh: SSHTransport, tmp_path: Path) -> None:
    marker = tmp_path / "injected"
    args = awkward_args(marker)
    assert echo_argv(ssh, args) == args
    odd = tmp_path / "it's a $(dir)"
    odd.mkdir()
    res = ssh.run(
        ["sh", "-c", 'pwd; printf "%s" "$XLT_VAL"'],
        cwd=str(odd),
        env={"XLT_VAL": f"$(touch {marker}) `touch {marker}`"},
    )
    assert res.stdout == f"{odd}\n$(touch {marker}) `touch {marker}`"
    assert not marker.exists()


@pytest.mark.sshd
def test_ssh_run_reports_exit_code_and_both_streams(ssh: SSHTransport) -> None:
    res = ssh.run(["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert (res.returncode, res.stdout, res.stderr) == (7, "out\n", "err\n")
    assert ssh.run(["xlatune-no-such-program"]).returncode == 127


@pytest.mark.sshd
def test_ssh_run_reads_large_stdout_and_stderr_without_deadlock(ssh: SSHTransport) -> None:
    # 3 MB on each stream: more than paramiko's channel window, so reading one stream to EOF
    # before the other would hang.
    res = ssh.run(
        ["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' e >&2; head -c 3000000 /dev/zero | tr '\\0' o"], timeout=60
    )
    assert (len(res.stdout), len(res.stderr)) == (3_000_000, 3_000_000)


@pytest.mark.sshd
def test_ssh_reuses_one_connection_for_many_commands_and_files(ssh: SSHTransport, tmp_path: Path) -> None:
    path = str(tmp_path / "f")
    for i in range(15):
        assert ssh.run(["echo", str(i)]).stdout == f"{i}\n"
        ssh.write_atomic(path, str(i).encode())
        assert ssh.read_from(path, 0) == str(i).encode()
    assert ssh.connections_opened == 1


@pytest.mark.sshd
def test_ssh_read_from_offset_write_atomic_and_exists(ssh: SSHTransport, tmp_path: Path) -> None:
    path = str(tmp_path / "it's a log.txt")
    ssh.write_atomic(path, b"first version, longer\n")
    ssh.write_atomic(path, b"0123456789")
    assert Path(path).read_bytes() == b"0123456789"
    assert ssh.read_from(path, 6) == b"6789"
    assert ssh.read_from(path, 2, 3) == b"234"
    assert ssh.read_from(path, 50) == b""
    with open(path, "ab") as f:  # the log grows; the next tail read starts where the last ended
        f.write(b"abc")
    assert ssh.read_from(path, 10) == b"abc"
    assert ssh.exists(path) and not ssh.exists(str(tmp_path / "missing"))
    assert os.listdir(tmp_path) == ["it's a log.txt"]
    with pytest.raises(FileNotFoundError):
        ssh.read_from(str(tmp_path / "missing"), 0)


@pytest.mark.sshd
def test_ssh_timeout_raises_and_the_connection_stays_usable(ssh: SSHTransport) -> None:
    with pytest.raises(TransportTimeout, match=r"sleep timed out after 0.5 s on 127\.0\.0\.1:"):
        ssh.run(["sleep", "10"], timeout=0.5)
    assert ssh.run(["echo", "still here"]).stdout == "still here\n"
    assert ssh.connections_opened == 1


@pytest.mark.sshd
def test_ssh_refuses_unknown_host_key_with_a_clear_error(sshd_server: SSHServer, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = sshd_server.transport(known_hosts=str(empty))
    with pytest.raises(TransportError) as info:
        t.run(["true"])
    assert str(info.value) == (
        f"unknown host key for 127.0.0.1:{sshd_server.port} — add it to known_hosts "
        "or pass --xlatune-ssh-accept-new-host-key"
    )
    assert t.connections_opened == 0


@pytest.mark.sshd
def test_ssh_refuses_a_changed_host_key(sshd_server: SSHServer, tmp_path: Path) -> None:
    other = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd_server.port} ssh-ed25519 {other}\n")
    with pytest.raises(TransportError, match="does not match known_hosts"):
        sshd_server.transport(known_hosts=str(kh)).run(["true"])


@pytest.mark.sshd
def test_ssh_accepts_a_new_host_key_only_when_opted_in(sshd_server: SSHServer, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    t = sshd_server.transport(known_hosts=str(kh), accept_new_host_key=True)
    assert t.run(["echo", "ok"]).stdout == "ok\n"
    t.close()
    assert f"[127.0.0.1]:{sshd_server.port} ssh-ed25519 " in kh.read_text()
    # Now known: a second, default (refusing) transport connects.
    assert sshd_server.transport(known_hosts=str(kh)).run(["true"]).returncode == 0


@pytest.mark.sshd
def test_ssh_reconnects_after_the_server_drops_the_connection(ssh: SSHTransport) -> None:
    assert ssh.run(["true"]).returncode == 0
    # Kill this session's sshd process: the server side of our one connection goes away
    # mid-command, which must be reported, not silently retried (the command may have run).
    with pytest.raises(TransportError, match="lost while running sh"):
        ssh.run(["sh", "-c", "kill $PPID; sleep 5"], timeout=30)
    assert ssh.run(["echo", "back"]).stdout == "back\n"
    assert ssh.connections_opened == 2


@pytest.mark.sshd
def test_ssh_reconnects_after_close(ssh: SSHTransport, tmp_path: Path) -> None:
    assert ssh.run(["true"]).returncode == 0
    ssh.close()
    assert ssh.run(["echo", "again"]).stdout == "again\n"
    assert ssh.exists(str(tmp_path))
    assert ssh.connections_opened == 2


def test_ssh_connect_retries_with_backoff_then_fails_with_one_line() -> None:
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    t = SSHTransport(
        "127.0.0.1",
        port=port,
        user="root",
        ssh_config=os.devnull,
        connect_attempts=3,
        backoff=0.5,
        sleep=sleeps.append,
        connect_timeout=2,
    )
    with pytest.raises(TransportError) as info:
        t.run(["true"])
    assert sleeps == [0.5, 1.0]
    assert str(info.value).startswith(f"cannot connect to 127.0.0.1:{port} after 3 attempts (")
    assert "\n" not in str(info.value)


@pytest.mark.sshd
def test_ssh_config_alias_supplies_host_port_user_key_and_known_hosts(sshd_server: SSHServer) -> None:
    t = SSHTransport(sshd_server.alias, ssh_config=sshd_server.ssh_config, allow_agent=False)
    assert t.run(["id", "-un"]).stdout == "root\n"
    assert t.where == f"127.0.0.1:{sshd_server.port}"


@pytest.mark.sshd
def test_ssh_config_proxyjump_tunnels_through_the_jump_host(sshd_server: SSHServer, tmp_path: Path) -> None:
    t = SSHTransport(sshd_server.jump_alias, ssh_config=sshd_server.ssh_config, allow_agent=False)
    marker = tmp_path / "injected"
    args = awkward_args(marker)
    assert echo_argv(t, args) == args
    t.write_atomic(str(tmp_path / "via-jump"), b"tunnelled")
    assert t.read_from(str(tmp_path / "via-jump"), 4) == b"elled"
    # The target's sshd sees the tunnelled connection coming from the jump host's forwarding.
    assert t.run(["sh", "-c", "echo $SSH_CONNECTION"]).stdout.split()[0] == "127.0.0.1"
    assert t.connections_opened == 1
    assert not marker.exists()
    t.close()
