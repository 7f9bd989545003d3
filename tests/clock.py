"""A clock the tests (and bench/item_overhead.py) move by hand: `clock()` is the time, `sleep`
advances it at once (a negative sleep, as a deadline already passed asks for, does nothing)."""

from __future__ import annotations


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)
