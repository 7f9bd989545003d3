"""Our TUNE_PROFILE blocks in a maxtext-slurm checkout: install, extend, remove byte-exact.

A block goes at the end of train_env.sh (and of configs/<M>.env.sh when it exists); the text is
rendered by maxtext_files. A file nobody edited during the session gets its exact bytes (and
permission bits) back; one edited meanwhile keeps the edits and loses only our block.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from ...transport.base import Transport, TransportError
from ...transport.hostcmd import file_commands
from . import files as mf


def as_text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")  # any bytes survive the round trip


def as_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Managed:
    """A checkout file holding our block: what to write back at the end."""

    path: str
    original: bytes
    installed: bytes
    mode: str | None


class TuneBlocks:
    """The files holding this sweep's block, and the IO that installs and removes it."""

    def __init__(self, transport: Transport, sweep_id: str, clean_text: Callable[[str], str | None]) -> None:
        self.transport = transport
        self.sweep_id = sweep_id
        self.clean_text = clean_text  # a file's text as found, without a block of ours
        self.managed: list[Managed] = []

    @property
    def paths(self) -> list[str]:
        return [m.path for m in self.managed]

    def install(self, blocks: Mapping[str, str]) -> None:
        """Append each block to its file (replacing one a killed session of this sweep left)."""
        for path, block in blocks.items():
            original = self.clean_text(path) or ""
            installed = as_bytes(mf.install_block(original, block, self.sweep_id))
            mode = self._mode(path)
            self._write(path, installed, mode)
            self.managed.append(Managed(path, as_bytes(original), installed, mode))

    def update(self, blocks: Mapping[str, str]) -> None:
        """Replace the installed blocks (more arms), keeping anything else written meanwhile."""
        for i, managed in enumerate(self.managed):
            if managed.path not in blocks:
                continue
            current = self.transport.read_from(managed.path, 0)
            body = mf.remove_block(as_text(current), self.sweep_id)
            installed = as_bytes(mf.install_block(body, blocks[managed.path], self.sweep_id))
            self._write(managed.path, installed, managed.mode)
            self.managed[i] = replace(managed, installed=installed)

    def cleanup(self) -> dict[str, str]:
        """Remove our blocks; a file nobody touched since gets its exact bytes back. Path → error."""
        errors: dict[str, str] = {}
        for managed in list(reversed(self.managed)):
            try:
                current = self.transport.read_from(managed.path, 0)
                # Edited by someone during the session: keep their edits, cut only our block.
                data = (
                    managed.original
                    if current == managed.installed
                    else as_bytes(mf.remove_block(as_text(current), self.sweep_id))
                )
                if data != current:
                    self._write(managed.path, data, managed.mode)
                self.managed.remove(managed)
            except (TransportError, OSError, ValueError) as error:
                errors[managed.path] = str(error)
        return errors

    def _mode(self, path: str) -> str | None:
        # write_atomic renames a new file into place: its permission bits must be put back.
        result = file_commands(self.transport).run(["stat", "-c", "%a", path], timeout=60)
        return result.stdout.strip() if result.ok and result.stdout.strip().isdigit() else None

    def _write(self, path: str, data: bytes, mode: str | None) -> None:
        self.transport.write_atomic(path, data)
        if mode is not None:
            file_commands(self.transport).run(["chmod", mode, path], timeout=60).check()
