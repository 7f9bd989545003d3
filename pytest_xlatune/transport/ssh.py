"""SSHTransport: commands and files on a login node over ONE paramiko connection per session.

Unknown host keys are refused unless the user opts in (ACCEPT_NEW_HOST_KEY_OPTION).
"""

from __future__ import annotations

import os
import re
import select
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import paramiko

from .base import CommandResult, TransportError, TransportTimeout, _text, _tmp_name, check_argv, command_line
from .hostkeys import AcceptNewHostKey as AcceptNewHostKey  # re-exported for the tests
from .hostkeys import _RefuseUnknownHostKey, _UnknownHostKey
from .hostkeys import known_hosts_file as known_hosts_file

__all__ = ["ACCEPT_NEW_HOST_KEY_OPTION", "SSHTransport"]

ACCEPT_NEW_HOST_KEY_OPTION = "--xlatune-ssh-accept-new-host-key"
_T = TypeVar("_T")


@dataclass(frozen=True)
class _Target:
    hostname: str
    port: int
    user: str | None
    key_files: tuple[str, ...]
    known_hosts: tuple[str, ...]
    identities_only: bool
    proxy_jump: tuple[str, ...]
    proxy_command: str | None

    @property
    def where(self) -> str:
        return f"{self.hostname}:{self.port}"


class SSHTransport:
    """Run commands and move files on one host over ONE reused paramiko connection.

    Settings come from the arguments, then the ssh config (`ssh_config` or ~/.ssh/config):
    HostName, User, Port, IdentityFile, IdentitiesOnly, UserKnownHostsFile, ProxyJump (a chain of
    `direct-tcpip` channels) and ProxyCommand. The SSH agent is used unless `allow_agent=False`.
    Host keys come from ~/.ssh/known_hosts, the config's UserKnownHostsFile and `known_hosts`;
    an unknown key is refused unless `accept_new_host_key=True` (then it is saved to the first
    of those files). StrictHostKeyChecking in the config is deliberately ignored.
    """

    def __init__(
        self,
        host: str,
        *,
        port: int | None = None,
        user: str | None = None,
        key_filename: str | None = None,
        ssh_config: str | None = None,
        known_hosts: str | None = None,
        accept_new_host_key: bool = False,
        allow_agent: bool = True,
        connect_timeout: float = 15.0,
        connect_attempts: int = 4,
        backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.host = host
        self.accept_new_host_key = accept_new_host_key
        self.allow_agent = allow_agent
        self.connect_timeout = connect_timeout
        self.connect_attempts = max(1, connect_attempts)
        self.backoff = backoff
        self._sleep = sleep
        self.connections_opened = 0  # (re)connections of the whole chain, jump hosts included
        self._lock = threading.RLock()
        self._clients: list[paramiko.SSHClient] = []  # jump hosts first, the target last
        self._sftp: paramiko.SFTPClient | None = None
        cfg = ssh_config or os.path.expanduser("~/.ssh/config")
        self._config = paramiko.SSHConfig()
        if ssh_config or os.path.exists(cfg):
            self._config = paramiko.SSHConfig.from_path(os.path.expanduser(cfg))
        self._target = self._resolve(host, port=port, user=user, key=key_filename, known_hosts=known_hosts)

    @property
    def where(self) -> str:
        return self._target.where

    def _resolve(
        self,
        spec: str,
        *,
        port: int | None = None,
        user: str | None = None,
        key: str | None = None,
        known_hosts: str | None = None,
    ) -> _Target:
        # A ProxyJump entry may be user@host:port; the config entry for the bare host fills the rest.
        if "@" in spec:
            user_part, spec = spec.rsplit("@", 1)
            user = user or user_part
        m = re.fullmatch(r"\[?([^\]]+?)\]?:(\d+)", spec)
        if m and port is None:
            spec, port = m.group(1), int(m.group(2))
        c: dict[str, Any] = dict(self._config.lookup(spec))
        known = ([known_hosts] if known_hosts else []) + str(c.get("userknownhostsfile", "")).split()
        jump, proxy = str(c.get("proxyjump", "none")), str(c.get("proxycommand", "none"))
        return _Target(
            hostname=c.get("hostname", spec),
            port=int(port or c.get("port", 22)),
            user=user or c.get("user"),
            key_files=tuple([key] if key else [os.path.expanduser(p) for p in c.get("identityfile", [])]),
            known_hosts=tuple(dict.fromkeys(os.path.expanduser(p) for p in known)),
            identities_only=str(c.get("identitiesonly", "no")).lower() == "yes",
            proxy_jump=() if jump.lower() == "none" else tuple(j.strip() for j in jump.split(",") if j.strip()),
            proxy_command=None if proxy.lower() == "none" else proxy,
        )

    # -- connection ---------------------------------------------------------------------------

    def _alive(self) -> bool:
        t = self._clients[-1].get_transport() if self._clients else None
        return t is not None and t.is_active()

    def _connect_one(self, target: _Target, sock: Any) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        client.load_system_host_keys()
        files = [p for p in target.known_hosts if os.path.exists(p)]
        for p in files[1:]:
            client.load_system_host_keys(p)
        if files:
            client.load_host_keys(files[0])
        client.set_missing_host_key_policy(
            AcceptNewHostKey(known_hosts_file(target.known_hosts))
            if self.accept_new_host_key
            else _RefuseUnknownHostKey()
        )
        keys: Any = list(target.key_files) or None  # paramiko takes a list; its stubs say str
        try:
            client.connect(
                target.hostname,
                port=target.port,
                username=target.user,
                sock=sock,
                key_filename=keys,
                allow_agent=self.allow_agent,
                look_for_keys=not target.identities_only,
                timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout,
            )
        except _UnknownHostKey:
            client.close()
            raise TransportError(
                f"unknown host key for {target.where} — add it to known_hosts or pass {ACCEPT_NEW_HOST_KEY_OPTION}"
            ) from None
        except paramiko.BadHostKeyException:
            client.close()
            raise TransportError(
                f"host key for {target.where} does not match known_hosts "
                "(changed key or man-in-the-middle); fix that known_hosts entry"
            ) from None
        except paramiko.AuthenticationException:
            client.close()
            tried = ", ".join(target.key_files) or "default key files"
            raise TransportError(
                f"authentication failed for {target.user or 'the current user'}@"
                f"{target.where} (tried {tried}{' and the SSH agent' if self.allow_agent else ''})"
            ) from None
        except BaseException:
            client.close()
            raise
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(30)
        return client

    def _open(self) -> None:
        chain = [self._resolve(j) for j in self._target.proxy_jump] + [self._target]
        clients: list[paramiko.SSHClient] = []
        try:
            for target in chain:
                sock: Any = None
                prev = clients[-1].get_transport() if clients else None
                if prev is not None:
                    sock = prev.open_channel(
                        "direct-tcpip", (target.hostname, target.port), ("127.0.0.1", 0), timeout=self.connect_timeout
                    )
                elif target.proxy_command:
                    sock = paramiko.ProxyCommand(target.proxy_command)
                clients.append(self._connect_one(target, sock))
        except BaseException:
            for c in reversed(clients):
                c.close()
            raise
        self._clients = clients
        self.connections_opened += 1

    def _ensure(self) -> paramiko.Transport:
        """Return the live paramiko transport, (re)connecting with exponential backoff."""
        with self._lock:
            if not self._alive():
                self._drop()
                last = ""
                for attempt in range(self.connect_attempts):
                    if attempt:
                        self._sleep(self.backoff * 2 ** (attempt - 1))
                    try:
                        self._open()
                        break
                    except (OSError, EOFError, paramiko.SSHException) as exc:  # not TransportError:
                        last = f"{type(exc).__name__}: {exc}".splitlines()[0]  # host key/auth are final
                else:
                    raise TransportError(
                        f"cannot connect to {self.where} after {self.connect_attempts} attempts ({last})"
                    )
            t = self._clients[-1].get_transport()
            assert t is not None
            return t

    def _drop(self) -> None:
        if self._sftp is not None:
            try:
                self._sftp.close()
            except Exception:  # a dead link; nothing to tell
                pass
            self._sftp = None
        for c in reversed(self._clients):
            c.close()
        self._clients = []

    def close(self) -> None:
        with self._lock:
            self._drop()

    # -- commands -----------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        args = check_argv(argv)
        line = command_line(args, cwd=cwd, env=env)
        # Retry only while nothing has reached the server: a command must never run twice.
        for attempt in range(2):
            transport = self._ensure()
            try:
                chan = transport.open_session(timeout=self.connect_timeout)
                break
            except (OSError, EOFError, paramiko.SSHException) as exc:
                with self._lock:
                    self._drop()
                if attempt:
                    raise TransportError(f"cannot open a session on {self.where}: {exc}") from None
        try:
            chan.exec_command(line)
            chan.shutdown_write()
            out, err, code = self._collect(chan, transport, args, timeout)
        finally:
            chan.close()  # on timeout too: sshd then closes the command's pipes
        return CommandResult(args, code, _text(out), _text(err))

    def _collect(
        self, chan: paramiko.Channel, transport: paramiko.Transport, args: tuple[str, ...], timeout: float | None
    ) -> tuple[bytes, bytes, int]:
        # Read both streams as they come: reading one to EOF first deadlocks once the other
        # fills the channel window.
        out, err = bytearray(), bytearray()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            while chan.recv_ready():
                out += chan.recv(1 << 16)
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(1 << 16)
            if not transport.is_active():
                raise TransportError(
                    f"connection to {self.where} lost while running {args[0]} (not retried: it may have run)"
                )
            drained = not chan.recv_ready() and not chan.recv_stderr_ready()
            # Done at EOF + exit status; a channel closed without a status (a signal) is -1.
            if drained and ((chan.eof_received and chan.exit_status_ready()) or chan.closed):
                return bytes(out), bytes(err), chan.exit_status
            now = time.monotonic()
            if deadline is not None and now > deadline:
                raise TransportTimeout(f"{args[0]} timed out after {timeout:g} s on {self.where}")
            wait = 0.5 if deadline is None else max(0.0, min(0.5, deadline - now))
            if chan.eof_received:
                chan.status_event.wait(wait)  # only the exit status is still to come
            else:
                select.select([chan], [], [], wait)

    # -- files (SFTP) -------------------------------------------------------------------------

    def _file_op(self, what: str, path: str, op: Callable[[paramiko.SFTPClient], _T]) -> _T:
        for attempt in range(2):
            with self._lock:
                self._ensure()
                if self._sftp is None:
                    self._sftp = self._clients[-1].open_sftp()
                sftp = self._sftp
            try:
                return op(sftp)
            except FileNotFoundError:
                raise
            except (OSError, EOFError, paramiko.SSHException) as exc:
                dead = not self._alive()
                with self._lock:
                    if dead:
                        self._drop()
                    elif self._sftp is sftp and sftp.sock.closed:
                        self._sftp = None
                # Retry only a dropped link; a real SFTP error (permissions, disk full) is final.
                if attempt or not dead:
                    raise TransportError(f"{what} {path} on {self.where} failed: {exc}") from None
        raise AssertionError("unreachable")

    def read_from(self, path: str, offset: int, limit: int | None = None) -> bytes:
        """Read from `offset` to EOF (or `limit` bytes); FileNotFoundError if it is missing."""

        def op(sftp: paramiko.SFTPClient) -> bytes:
            with sftp.open(path, "rb") as f:
                f.seek(offset)
                if limit is None:
                    f.prefetch()
                    return bytes(f.read())
                return bytes(f.read(limit))

        return self._file_op("read", path, op)

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write a sibling temp file, then posix-rename it over `path`."""
        tmp = _tmp_name(path)

        def op(sftp: paramiko.SFTPClient) -> None:
            try:
                with sftp.open(tmp, "wb") as f:
                    f.write(data)
                sftp.posix_rename(tmp, path)
            except BaseException:
                try:
                    sftp.remove(tmp)
                except (OSError, paramiko.SSHException):
                    pass
                raise

        self._file_op("write", path, op)

    def exists(self, path: str) -> bool:
        def op(sftp: paramiko.SFTPClient) -> bool:
            try:
                sftp.stat(path)
                return True
            except FileNotFoundError:
                return False

        return self._file_op("stat", path, op)
