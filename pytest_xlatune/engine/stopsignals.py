"""SIGTERM and SIGHUP turned into Ctrl-C for the length of a pytest session."""

from __future__ import annotations

import signal
import threading


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
