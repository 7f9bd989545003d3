"""Host-key policies of the SSH transport: refuse an unknown key (the default), or accept a new
one and save it as OpenSSH's `accept-new` does."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NoReturn

import paramiko

from ..errors import XlatuneError
from .base import TransportError


class _UnknownHostKey(paramiko.SSHException, XlatuneError):
    pass


class _RefuseUnknownHostKey(paramiko.RejectPolicy):
    """RejectPolicy raising a type we turn into the one-line, actionable error."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> NoReturn:
        raise _UnknownHostKey(hostname)


class AcceptNewHostKey(paramiko.MissingHostKeyPolicy):
    """`accept-new`: trust an unknown key and append it to `path`, creating the file (and its
    folder, 0700) when missing, as OpenSSH does; never through a link."""

    def __init__(self, path: str) -> None:
        self.path = path

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        entry = paramiko.hostkeys.HostKeyEntry([hostname], key).to_line() or ""
        try:
            os.makedirs(os.path.dirname(self.path) or ".", mode=0o700, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "a", encoding="utf-8") as handle:
                handle.write(entry)
        except OSError as error:
            raise TransportError(
                f"{self.path}: cannot save the new host key of {hostname}: {error.strerror or error}"
            ) from None


def known_hosts_file(candidates: Sequence[str]) -> str:
    """Where a new host key is saved: the first known_hosts file that exists, else the first
    one configured, else ~/.ssh/known_hosts."""
    existing = [p for p in candidates if os.path.exists(p)]
    return (existing or list(candidates) or [os.path.expanduser("~/.ssh/known_hosts")])[0]
