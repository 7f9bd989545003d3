"""Files the tool writes, opened without following links and created with the user's umask.

A symlink planted where the store, its lock, a job log or a report goes would otherwise make the
tool overwrite, append to or truncate whatever the link points at: every open here passes
O_NOFOLLOW, and the folders between a base folder the user chose and the file are checked too
(`check_no_links`). A refusal is one line naming the link.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

from .errors import XlatuneError

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class LinkRefused(XlatuneError, OSError):
    """A path the tool writes is a symbolic link (or lies under one below its base folder)."""


def link_message(path: Path | str) -> str:
    return (
        f"{path}: is a symbolic link; xlatune never reads or writes its files through a link "
        "(it could overwrite what the link points at): remove the link"
    )


def open_nofollow(path: Path | str, flags: int, mode: int = 0o666) -> int:
    """os.open that refuses a symlink as the last component with LinkRefused (one line)."""
    try:
        return os.open(path, flags | NOFOLLOW | CLOEXEC, mode)
    except OSError as error:
        if error.errno == errno.ELOOP or (error.errno == errno.EMLINK and _is_link(path)):
            raise LinkRefused(errno.ELOOP, link_message(path), str(path)) from None
        raise


def check_no_links(base: Path, path: Path) -> None:
    """Refuse `path` if it, or a folder between `base` and it, is a symbolic link (`base`
    itself may be one: the user chose it)."""
    try:
        parts = path.relative_to(base).parts
    except ValueError:
        parts = (path.name,)
        base = path.parent
    current = base
    for part in parts:
        current = current / part
        if _is_link(current):
            raise LinkRefused(errno.ELOOP, link_message(current), str(current))


def file_mode() -> int:
    """0o666 less the process umask (0644 under the usual 022)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one rename (a link at `path` is replaced, never followed),
    with the permissions a plain `open(..., "w")` would give (umask), not mkstemp's 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_text_nofollow(path: Path) -> str | None:
    """The text of a regular file at `path`; None when there is none (a link is refused)."""
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{path}: expected a file, found something else", str(path))
        return handle.read().decode("utf-8")


def _is_link(path: Path | str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False
