"""Notifications (kickoff, positive results, mid-point, final: engine/milestones.py; STOP) through
a command template.

`--xlatune-notify="utils/telegram_bot.sh send {message}"` runs that argv through the session's
transport (on the cluster side, in the maxtext-slurm checkout when there is one), with the message
as ONE argv element: never through a shell, so its text cannot inject anything. The default is a
no-op. The command's output is never printed (it may echo tokens).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from .shareable import clean
from .transport.base import Transport, TransportError

MESSAGE_LIMIT = 3500  # Telegram caps a message at 4096 characters; leave room for a prefix
PLACEHOLDER = "{message}"


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Split on line boundaries into parts of at most `limit` characters, numbered when > 1."""
    pieces: list[str] = []
    for line in text.splitlines():
        pieces += [line[i : i + limit] for i in range(0, len(line), limit)] or [""]
    parts: list[str] = []
    current: list[str] = []
    size = 0
    for piece in pieces:
        if current and size + len(piece) + 1 > limit:
            parts.append("\n".join(current))
            current, size = [], 0
        current.append(piece)
        size += len(piece) + 1
    if current:
        parts.append("\n".join(current))
    if len(parts) > 1:
        parts = [f"({i}/{len(parts)}) {part}" for i, part in enumerate(parts, start=1)]
    return parts


class Notifier:
    """Sends through a command template; failures are warnings, never a crash of the sweep."""

    def __init__(
        self,
        transport: Transport | None,
        template: str,
        cwd: str | None = None,
        warn: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.argv = shlex.split(template) if template else []
        if self.argv and PLACEHOLDER not in self.argv:
            self.argv.append(PLACEHOLDER)
        self.transport = transport
        self.cwd = cwd
        self.warn = warn
        self.sent: list[str] = []

    def send(self, text: str) -> None:
        if not self.argv or self.transport is None:
            return
        for part in split_message(clean(text)):  # a chat is shareable: no token, no escape code
            argv = [part if arg == PLACEHOLDER else arg for arg in self.argv]
            try:
                result = self.transport.run(argv, timeout=60, cwd=self.cwd)
            except TransportError as error:
                self.warn(f"notification not sent: {error}")
                return
            if not result.ok:
                self.warn(f"notification not sent: {self.argv[0]} exited {result.returncode}")
                return
            self.sent.append(part)
