"""SIGTERM and SIGHUP turned into Ctrl-C for a pytest session, and held back while a job is
submitted and recorded (`deferred`)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

# Held inside `deferred()`: SIGINT is Ctrl-C (Python's KeyboardInterrupt), the others StopSignals'.
DEFERRED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# A Python-level signal handler (what signal.getsignal returns when callable).
Handler = Callable[[int, FrameType | None], object]


class StopSignals:
    """SIGTERM (CI runners, `timeout`) and SIGHUP (a closed terminal) act like Ctrl-C: the running
    item is interrupted, the session's unfinished jobs are cancelled, the partial report written."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.previous: dict[int, object] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for number in self.SIGNALS:
            if signal.getsignal(number) in (signal.SIG_DFL, None):  # never override a user's handler
                self.previous[number] = signal.signal(number, self._interrupt)

    def _interrupt(self, number: int, frame: object) -> None:
        for other in self.SIGNALS:  # a second signal must not cut the clean-up short
            signal.signal(other, signal.SIG_IGN)
        raise KeyboardInterrupt(f"{signal.Signals(number).name} received")

    def restore(self) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)  # type: ignore[arg-type]
        self.previous.clear()


_depth = 0  # nesting of deferred() blocks (only the outermost swaps the handlers)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP for the length of the block and act on one that arrived right
    after it, as its handler would have (KeyboardInterrupt).

    The block is a job's submission and its `submitted` record: interrupted between the two,
    the scheduler would know a job that the store does not, which nobody then cancels. A
    handler that is not Python code (SIG_DFL, SIG_IGN) is left as it is; off the main thread
    (where handlers cannot be set) the block runs unguarded.
    """
    global _depth  # noqa: PLW0603  signal dispositions are per process: so is the nesting depth
    if _depth or threading.current_thread() is not threading.main_thread():
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    held: list[tuple[int, Handler]] = []
    previous: dict[int, Handler] = {}

    def hold(number: int, frame: FrameType | None) -> None:
        held.append((number, previous[number]))

    try:
        for number in DEFERRED:  # a signal before the swap is done acts at once: nothing ran yet
            handler = signal.getsignal(number)
            if callable(handler):
                previous[number] = handler
                signal.signal(number, hold)
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:  # delivered late, once: the first one decides (a second cannot cut it short)
            signum, handler = held[0]
            handler(signum, None)
