"""Waiting on the real parts (Slurm, slurmdbd, a session's store, a pytest subprocess) in a way
that does not depend on the machine's load: each wait is on a state, polled, with one outer bound
of minutes that only a broken run reaches. A machine busy with other work makes the state come
later, never makes a test fail; no test asserts on how long anything took."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

# The outer bound of every wait on a state: far above what any of them takes on a loaded machine
# (CI shares two cores between both lanes); reached only when the state never comes.
OUTER_S = 600.0
# How long a pytest session may take to end after a signal (it cancels its jobs, writes the
# partial report) or to refuse: the same bound, for `Popen.wait`/`communicate`.
ENDS_S = OUTER_S

# How long a job of "someone else" sleeps on a node outside a test's nodelist (it is cancelled
# after the test): longer than any test that checks at its end that the job was left alone.
FOREIGN_SLEEP = 3600

T = TypeVar("T")


def wait_until(
    what: str,
    condition: Callable[[], T],
    timeout: float = OUTER_S,
    every: float = 0.2,
    proc: subprocess.Popen[str] | None = None,
) -> T:
    """Poll `condition` until it returns something true and return that; fail naming `what` after
    `timeout` s, or at once when `proc` (the session that should bring the state about) ended."""
    end = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            found = condition()  # the state may have come just before the process ended
            if found:
                return found
            out = proc.stdout.read() if proc.stdout else ""
            pytest.fail(f"waiting for {what}: the session ended first (exit {proc.returncode}):\n{out}", pytrace=False)
        if time.monotonic() > end:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}", pytrace=False)
        time.sleep(every)
