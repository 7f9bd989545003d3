"""Run argv lists and move files: the Transport seam, and the local transport.

SSHTransport (paramiko, one connection per session) is in ssh.py, HostCmdTransport (maxtext-slurm's
`.host-cmd` bridge) in hostcmd.py; these three modules are the only ones that run commands.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..errors import XlatuneError

__all__ = [
    "CommandResult",
    "LocalTransport",
    "Transport",
    "TransportError",
    "TransportRefused",
    "TransportTimeout",
    "check_argv",
    "command_line",
]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class TransportError(XlatuneError):
    """A command could not be run or a file could not be moved; the message is one line."""


class TransportTimeout(TransportError):
    """A command outlived its timeout and was abandoned."""


class TransportRefused(TransportError):
    """The way to the cluster refused to run the command (the host-cmd policy); it never ran."""


@dataclass(frozen=True)
class CommandResult:
    """What a finished command left behind."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def check(self) -> CommandResult:
        """Return self, or raise TransportError naming the command, its exit code and stderr tail."""
        if self.returncode != 0:
            tail = " | ".join(self.stderr.strip().splitlines()[-3:]) or "no stderr"
            raise TransportError(f"{shlex.join(self.argv)} exited {self.returncode}: {tail}")
        return self


@runtime_checkable
class Transport(Protocol):
    """Where commands run and files live: this host, a login node, or the host of a container."""

    connections_opened: int  # network (re)connections so far, jump hosts included; 0 when none

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult: ...

    def read_from(self, path: str, offset: int, limit: int | None = None) -> bytes: ...

    def write_atomic(self, path: str, data: bytes) -> None: ...

    def exists(self, path: str) -> bool: ...

    def close(self) -> None: ...


def check_argv(argv: Sequence[str]) -> tuple[str, ...]:
    if isinstance(argv, (str, bytes)) or not argv or not all(isinstance(a, str) for a in argv):
        raise TransportError("argv must be a non-empty sequence of str, not a command line")
    return tuple(argv)


def command_line(argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """Quote argv (with `cd DIR &&` and `env K=V` prefixes) into one POSIX shell command line."""
    args = list(check_argv(argv))
    # A leading "-" would be read as an option by env/host_cmd.py; "=" as another assignment.
    if args[0].startswith("-") or (env and "=" in args[0]):
        raise TransportError(f"refusing program name {args[0]!r}")
    if env:
        bad = [k for k in env if not _ENV_NAME.match(k)]
        if bad:
            raise TransportError(f"invalid environment variable name(s): {', '.join(map(repr, bad))}")
        args = ["env", *(f"{k}={v}" for k, v in env.items()), *args]
    return f"cd {shlex.quote(cwd)} && {shlex.join(args)}" if cwd else shlex.join(args)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _tmp_name(path: str) -> str:
    head, _, name = path.rpartition("/")
    return f"{head}/.{name}.tmp-{uuid.uuid4().hex}" if head else f".{name}.tmp-{uuid.uuid4().hex}"


class LocalTransport:
    """Run commands with subprocess (an argv list, never a shell) and use local files."""

    connections_opened = 0  # no connection: this host

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        args = check_argv(argv)
        try:
            # Its own session: a Ctrl-C in the terminal reaches pytest (which acts on it, see
            # stopsignals.deferred), never an sbatch half-way through submitting a job.
            proc = subprocess.run(
                args,
                capture_output=True,
                timeout=timeout,
                cwd=cwd,
                check=False,
                env={**os.environ, **env} if env else None,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            raise TransportTimeout(f"{args[0]} timed out after {timeout:g} s") from None
        except (FileNotFoundError, NotADirectoryError):
            if cwd is not None and not os.path.isdir(cwd):
                raise TransportError(f"working directory does not exist: {cwd}") from None
            # Mirror a shell (and so SSHTransport): an unknown program is exit 127, not a crash.
            return CommandResult(args, 127, "", f"{args[0]}: command not found\n")
        except PermissionError:
            return CommandResult(args, 126, "", f"{args[0]}: permission denied\n")
        return CommandResult(args, proc.returncode, _text(proc.stdout), _text(proc.stderr))

    def read_from(self, path: str, offset: int, limit: int | None = None) -> bytes:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(-1 if limit is None else limit)

    def write_atomic(self, path: str, data: bytes) -> None:
        tmp = _tmp_name(path)
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def close(self) -> None:
        pass
