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

    def __str__(self) -> str:  # the one line, without OSError's "[Errno 40] …: 'path'"
        return str(self.strerror)


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
    with the permissions a plain `open(..., "w")` would give (umask), not mkstemp's 0600. Any
    failure is FileRefused, one line naming `path` (never the temporary file's name)."""
    with contextlib.suppress(FileNotFoundError):
        mode = os.lstat(path).st_mode
        if stat.S_ISDIR(mode):
            raise not_a_file(path, mode, "a file it can replace")
    tmp = ""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException as error:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(error, OSError) and not isinstance(error, XlatuneError):
            reason = error.strerror or error
            raise FileRefused(error.errno or errno.EIO, f"{path}: cannot write it: {reason}", str(path)) from None
        raise


def describe(error: OSError) -> str:
    """An OSError as one line: the package's own message, else `file: reason`."""
    if isinstance(error, XlatuneError):
        return str(error)
    if error.filename is not None:
        return f"{error.filename}: {error.strerror or error}"
    return str(error.strerror or error)


class FileRefused(XlatuneError, OSError):
    """A path the tool reads or replaces holds no regular file (a folder, a FIFO, a device), or
    a file of its own holds no UTF-8 text."""

    found = ""  # what was there instead, in words ("a FIFO (named pipe)"); "" for a decode error

    def __str__(self) -> str:
        return str(self.strerror)


def file_kind(mode: int) -> str:
    """What an lstat mode is, in words: a directory, a FIFO, a socket, a device, a link."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a regular file" if stat.S_ISREG(mode) else "no regular file"


def not_a_file(path: Path | str, mode: int, what: str = "a regular file") -> FileRefused:
    refused = FileRefused(
        errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL,
        f"{path}: expected {what}, found {file_kind(mode)}; move it away",
        str(path),
    )
    refused.found = file_kind(mode)
    return refused


def read_bytes_regular(
    path: Path | str, follow: bool = True, what: str = "a regular file", limit: int | None = None
) -> bytes | None:
    """The bytes of the regular file at `path`; None when there is none. Opened non-blocking, so
    a FIFO planted there is refused (FileRefused, one line) instead of waiting for a writer forever;
    without `follow`, a link is refused too (LinkRefused). With `limit`, at most `limit` + 1
    bytes are read (more than `limit`: the caller refuses the file)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = open_nofollow(path, flags) if not follow else os.open(path, flags | CLOEXEC)
    except FileNotFoundError:
        return None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise not_a_file(path, mode, what)
    with os.fdopen(fd, "rb") as handle:
        return handle.read() if limit is None else handle.read(limit + 1)


def read_text_nofollow(path: Path) -> str | None:
    """The text of a regular file at `path`; None when there is none (a link is refused, and
    a folder, FIFO, device or non-UTF-8 text is FileRefused)."""
    data = read_bytes_regular(path, follow=False)
    return None if data is None else decode_utf8(path, data)


def decode_utf8(path: Path | str, data: bytes) -> str:
    """`data` as UTF-8 text; FileRefused naming the line and byte when it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise FileRefused(
            errno.EILSEQ,
            f"{path}:{line}: expected UTF-8 text, found byte 0x{data[error.start]:02x}; move it away",
            str(path),
        ) from None


def _is_link(path: Path | str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False
