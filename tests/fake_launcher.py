"""The plugin tests' default launcher: the local backend with the fake trainer played in memory.

`-p tests.fake_launcher` (tests.conftest.FAKE) registers it through the package's own hook,
`pytest_xlatune_make_launcher`: a `local` cell gets the built-in backend (its pre-flight, its
interpreter probe, its job numbering, logs, job dirs and compilation caches, all the real
LocalLauncher's), except that a job of the fake trainer is not a process: it is the trainer's
script (tests/fake_trainer.py `script`, the lines and pauses the process would print and sleep)
held in memory and played against the clock each time the sweep polls. The log file gets the
same bytes the process would have written, so the real log parsers, hang detection, cancel on
sight and reports run as before; a cancel ends the job as SIGTERM ends the process (exit 143).

A job it cannot play runs as the real process: another workload module, or another interpreter
(the gate tests' image wrappers, scripts that change what the trainer sees). Tests of the local
backend's process handling itself (signals to the session, kill -9, resume after a crash, job
ownership across sessions) run pytest in a subprocess without this plugin (tests.conftest.REAL).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import BinaryIO

import pytest

from pytest_xlatune.cell.values import BackendKind
from pytest_xlatune.launch.local import JobProcess, LocalLauncher
from pytest_xlatune.launch.registry import FACTORIES, Backend, LaunchContext
from tests.fake_trainer import Script, script

MODULE = "fake_trainer"
PID = 0  # no process: the handle a store records for a played job (never signalled: _signal below)
# A process prints its first line only after the interpreter has started (~0.1 s): a played job
# too, so that the first poll finds it running and its measured run time (node-hours) is > 0.
STARTUP_S = 0.05


class PlayedJob:
    """A fake-trainer run in memory: its script's output goes to the log when its time comes."""

    def __init__(self, run: Script, log: BinaryIO) -> None:
        self.pid = PID
        self.returncode: int | None = None
        self._run = run
        self._fd = os.dup(log.fileno())  # the log's own offset, after the launcher's header
        self._due = time.monotonic() + STARTUP_S  # when the next event of the script is due

    def _advance(self) -> None:
        now = time.monotonic()
        while self.returncode is None and self._due <= now:
            try:
                event = next(self._run)
            except StopIteration as end:
                self._end(end.value)
            except Exception:  # the process would print its traceback and exit 1
                self._write(traceback.format_exc())
                self._end(1)
            else:
                if isinstance(event, str):
                    if not self._write(event):
                        self._end(1)  # a process dies writing its output to a full disk
                else:
                    self._due += event

    def _write(self, text: str) -> bool:
        try:
            os.write(self._fd, text.encode())
        except OSError:
            return False
        return True

    def _end(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._run.close()
            os.close(self._fd)

    def poll(self) -> int | None:
        self._advance()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and self._due > deadline:
                raise subprocess.TimeoutExpired(MODULE, timeout or 0.0)
            time.sleep(max(0.0, self._due - time.monotonic()))
        assert self.returncode is not None
        return self.returncode

    def kill_with(self, signum: int) -> None:
        self._end(-signum)  # the default action of SIGTERM and SIGKILL: the process ends at once


class PlayedLauncher(LocalLauncher):
    """LocalLauncher whose fake-trainer jobs under this interpreter are played in memory."""

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: Path, log: BinaryIO) -> JobProcess:
        if argv[:3] != [sys.executable, "-m", MODULE]:
            return super()._spawn(argv, env, cwd, log)
        return PlayedJob(script(argv[3:], env), log)

    def _signal(self, process: JobProcess, signum: int) -> None:
        if isinstance(process, PlayedJob):
            process.kill_with(signum)
        else:
            super()._signal(process, signum)


def played(launcher: LocalLauncher) -> PlayedLauncher:
    """The same launcher (same state), its fake-trainer jobs played in memory."""
    twin = PlayedLauncher.__new__(PlayedLauncher)
    twin.__dict__.update(launcher.__dict__)
    return twin


@pytest.hookimpl(trylast=True)  # a test's own conftest hook (tests/plugin/test_backend_hook.py) goes first
def pytest_xlatune_make_launcher(context: LaunchContext) -> Backend | None:
    if context.cell.backend.kind is not BackendKind.LOCAL:
        return None
    backend = FACTORIES[BackendKind.LOCAL](context)
    assert isinstance(backend.launcher, LocalLauncher)
    return dataclasses.replace(backend, launcher=played(backend.launcher))
