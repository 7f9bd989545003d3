"""Injected failures that mimic real MaxText/XLA log signatures, for triage tests."""

from __future__ import annotations

import enum
import os
import signal
import socket
import sys
import time


class Point(enum.Enum):
    """Where in the run a fault may fire."""

    INIT = "init"  # after Num_devices, before params exist
    AFTER_MEMSTATS = "after_memstats"  # params initialized, before step 0
    AFTER_STEP = "after_step"  # right after a step line was printed
    AFTER_LAST = "after_last"  # every step line printed


def _hang() -> None:
    """Sleep until killed; SIGTERM keeps its default action so scancel/timeouts work."""
    sys.stdout.flush()
    sys.stderr.flush()
    while True:
        time.sleep(3600)


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def fire(fault: str, point: Point, step: int = -1) -> None:
    """Act out ``fault`` if ``point`` (and ``step``) is where it belongs; else return."""
    if not fault:
        return
    if fault == "rccl_flake" and point is Point.INIT:
        host, pid = socket.gethostname(), os.getpid()
        for rank in range(2):
            _err(f"{host}:{pid}:{pid} [{rank}] NCCL INFO Bootstrap : Using eth0:10.0.0.{rank + 1}<0>")
            _err(f"{host}:{pid}:{pid} [{rank}] NCCL WARN NET/IB : No device found.")
        _err(f"{host}:{pid}:{pid} [0] NCCL WARN Call to ibv_modify_qp failed with error Connection timed out")
        _hang()
    if fault == "oom" and point is Point.AFTER_MEMSTATS:
        _err("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes.")
        _err("BufferAssignment OOM Debugging.")
        _err("Total memory: 64.00GiB")
        sys.exit(1)
    if fault == "hang_before_step0" and point is Point.AFTER_MEMSTATS:
        _hang()
    if fault == "hang_after_step0" and point is Point.AFTER_STEP and step == 2:
        _hang()
    if fault == "coord_timeout" and point is Point.AFTER_STEP and step == 1:
        _err(
            "jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: "
            "jax_distributed/global_barrier/step_2 and duration: 100s"
        )
        sys.exit(1)
    if fault == "sigterm_after_last" and point is Point.AFTER_LAST:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        _hang()  # the signal is delivered asynchronously; never fall through to exit 0
