"""`accept-new` with a missing known_hosts file: the file is created and the key saved (paramiko
objects only, no sshd)."""

from __future__ import annotations

from pathlib import Path

import paramiko

from pytest_xlatune.transport.ssh import AcceptNewHostKey, known_hosts_file


def test_accept_new_creates_a_missing_known_hosts_and_saves_the_key(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".ssh" / "known_hosts"  # neither the file nor its folder exists
    key = paramiko.ECDSAKey.generate()
    client = paramiko.SSHClient()
    AcceptNewHostKey(str(path)).missing_host_key(client, "[login.example]:2222", key)
    saved = paramiko.HostKeys(str(path))
    assert saved.lookup("[login.example]:2222")[key.get_name()] == key
    assert client.get_host_keys().lookup("[login.example]:2222") is not None
    assert (path.parent.stat().st_mode & 0o777) == 0o700
    other = paramiko.ECDSAKey.generate()  # a second host is appended, the first kept
    AcceptNewHostKey(str(path)).missing_host_key(paramiko.SSHClient(), "other", other)
    saved = paramiko.HostKeys(str(path))
    assert saved.lookup("other") is not None and saved.lookup("[login.example]:2222") is not None


def test_the_key_goes_to_the_first_existing_file_else_the_first_configured(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    assert known_hosts_file([str(first), str(second)]) == str(first)
    second.write_text("")
    assert known_hosts_file([str(first), str(second)]) == str(second)
    assert known_hosts_file([]).endswith("/.ssh/known_hosts")
