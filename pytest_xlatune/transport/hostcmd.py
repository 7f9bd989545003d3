"""Own the host-cmd transport: commands through maxtext-slurm's `.host-cmd` bridge, files local.

Inside maxtext-slurm's container the cluster is reached only through the checkout's `.host-cmd`
bridge (the xla-tuning skill's pre-flight step 1): its client drops `queue/<node>/<id>.cmd` into
the shared directory, the server on the host runs the request as ONE shell string with the
checkout as cwd and writes `results/<node>/<id>.json`. So every argv goes as `shlex.join(argv)`
(transport.command_line), the server's refusals and timeouts become TransportRefused /
TransportTimeout in the server's own words, and each result file is removed once read.

Files stay local: the container shares the checkout with the host, mounted under another path
(`/maxtext-slurm` in the container, e.g. `/home/u/maxtext-slurm` on the host). `PathMap` turns
container paths in argv into host paths and host paths in the output back into container paths.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .base import (
    CommandResult,
    LocalTransport,
    Transport,
    TransportError,
    TransportRefused,
    TransportTimeout,
    check_argv,
    command_line,
)

__all__ = ["START_HINT", "BridgeInfo", "HostCmdTransport", "PathMap", "result_error"]

DEFAULT_CHECKOUT = "/maxtext-slurm"  # where maxtext-slurm's container mounts the checkout
START_HINT = "start it on the host: .host-cmd/host-cmd-ctl.sh start"
POLL_GRACE_S = 10.0  # the client waits this much longer than the server's timeout (upstream's run())
RESULT_POLL_S = 0.05  # how often the client looks for the result file (upstream: 0.3 s; the server polls every 0.5 s)


@dataclass(frozen=True)
class PathMap:
    """The checkout as the container sees it (`local`) and as the host does (`host`)."""

    local: str
    host: str

    def _swap(self, text: str, old: str, new: str) -> str:
        if old == new:
            return text
        # A path starts the text or follows `=`, `:` or whitespace, and ends at `/`, a separator or the end.
        pattern = rf"(^|(?<=[=\s:]))({re.escape(old)})(?=/|[\s:'\"]|$)"
        return re.sub(pattern, lambda m: new, text, flags=re.MULTILINE)

    def to_host(self, arg: str) -> str:
        """An argument with container paths of the checkout (`/x`, `--output=/x/…`) as host paths."""
        return self._swap(arg, self.local, self.host)

    def to_local(self, text: str) -> str:
        """Command output with host paths of the checkout as the container's paths."""
        return self._swap(text, self.host, self.local)


@dataclass(frozen=True)
class BridgeInfo:
    """What pre-flight learned from the bridge: whose queue, which host, where the checkout is."""

    node_id: str  # the server's queue (HOST_CMD_NODE or the short hostname)
    hostname: str  # `hostname` as the host answers it
    user: str
    host_checkout: str
    round_trip_s: float  # of the one command that asked the three

    def describe(self) -> str:
        return (
            f"host-cmd bridge reached {self.user}@{self.hostname} (queue {self.node_id!r}, "
            f"checkout {self.host_checkout} on the host, {self.round_trip_s * 1000:.0f} ms round trip)"
        )


def result_error(data: Mapping[str, Any], command: str, node: str) -> TransportError | None:
    """The error a server result stands for (None: the command ran), in the server's own words.

    Result codes of host_cmd_server.py: -1 timed out, -2 could not start, -3 refused by the
    policy, -4 never picked up (the client saw the server die), -5 discarded as stale.
    """
    shown = command if len(command) <= 120 else command[:117] + "..."
    words = " | ".join(str(data.get("stderr") or data.get("error") or "no detail").strip().splitlines())
    if "error" in data:  # the client gave up waiting for a result
        return TransportTimeout(f"host-cmd: no answer from the server for node {node!r} to `{shown}`: {words}")
    code = data.get("exit_code")
    if data.get("rejected") or code == -3:
        return TransportRefused(
            f"host-cmd policy on the host refused `{shown}`: {words} (see .host-cmd/host-cmd-ctl.sh policy)"
        )
    if data.get("timed_out") or code == -1:
        return TransportTimeout(f"host-cmd: `{shown}` on the host: {words}")
    if code == -4:
        return TransportError(f"host-cmd: {words} for node {node!r} ({START_HINT})")
    if code in (-2, -5) or not isinstance(code, int):
        return TransportError(f"host-cmd could not run `{shown}` on the host: {words}")
    return None


def load_client(host_cmd_dir: Path) -> ModuleType:
    """Import the checkout's own `.host-cmd/host_cmd.py` (it imports host_cmd_common beside it)."""
    client = host_cmd_dir / "host_cmd.py"
    if not client.is_file():
        raise TransportError(f"host-cmd: expected the bridge client {client} in a maxtext-slurm checkout, found none")
    name = f"_xlatune_host_cmd_{abs(hash(str(host_cmd_dir)))}"
    spec = importlib.util.spec_from_file_location(name, client)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(host_cmd_dir))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(host_cmd_dir))
    return module


class HostCmdTransport:
    """Run commands on the host through the checkout's `.host-cmd` bridge; files are local (shared)."""

    connections_opened = 0  # the bridge is files in the shared checkout, no connection

    def __init__(self, checkout: str = DEFAULT_CHECKOUT, *, default_timeout: float = 300.0) -> None:
        self.checkout = os.path.normpath(checkout)
        self.dir = Path(self.checkout) / ".host-cmd"
        self.default_timeout = default_timeout
        self.files = LocalTransport()  # file IO and file commands (find, grep, chmod): shared files
        self.calls = 0  # bridge round trips, pings included
        self.busy_s = 0.0  # wall time spent in them
        self.info: BridgeInfo | None = None
        self.paths = PathMap(self.checkout, self.checkout)
        self._bridge: Any = None
        self._abandoned: list[str] = []  # request ids given up on: their results are removed later

    # ---- the bridge ----------------------------------------------------------------------------

    def _open(self) -> Any:
        if self._bridge is None:
            module = load_client(self.dir)

            class Bridge(module.HostBridge):  # type: ignore[misc, name-defined]
                """The upstream client, pinging once instead of before every command (poll()
                still re-pings while a request sits unclaimed, so a dead server is noticed)."""

                alive = False

                def _require_server(self) -> None:
                    if not self.alive:
                        super()._require_server()
                        self.alive = True

            self._module, self._bridge = module, Bridge(self.dir)
        return self._bridge

    def _not_running(self) -> TransportError:
        node = self._bridge.node_id if self._bridge is not None else "?"
        return TransportError(
            f"host-cmd: no server answers for node {node!r} in {self.dir} ({START_HINT};"
            " inside a container, HOST_CMD_NODE must name the host's node)"
        )

    def _round_trip(self, line: str, seconds: int) -> dict[str, Any]:
        bridge = self._open()
        started = time.perf_counter()
        self.calls += 1
        try:
            job_id = bridge.submit(line, timeout=seconds)
        except self._module.ServerNotRunningError:
            bridge.alive = False
            raise self._not_running() from None
        try:
            data = bridge.poll(job_id, timeout=seconds + POLL_GRACE_S, interval=RESULT_POLL_S)
        finally:
            self.busy_s += time.perf_counter() - started
        result_file = Path(bridge.results_dir) / f"{job_id}.json"
        if data is None:
            self._abandoned.append(job_id)
            return {"id": job_id, "error": f"timed out waiting for the result after {seconds + POLL_GRACE_S:g} s"}
        result_file.unlink(missing_ok=True)
        if data.get("exit_code") == -4:
            bridge.alive = False  # ping again before the next request
        self._sweep_abandoned()
        return dict(data)

    def _sweep_abandoned(self) -> None:
        """Remove results (or still-queued requests) of requests this transport gave up on."""
        bridge = self._bridge
        keep = []
        for job_id in self._abandoned:
            (Path(bridge.queue_dir) / f"{job_id}.cmd").unlink(missing_ok=True)
            result = Path(bridge.results_dir) / f"{job_id}.json"
            if result.exists():
                result.unlink(missing_ok=True)
            elif (Path(bridge.running_dir) / f"{job_id}.cmd").exists():
                keep.append(job_id)
        self._abandoned = keep

    def ping(self) -> BridgeInfo:
        """Pre-flight step 1: the server answers; whose host it is and where the checkout lives there."""
        bridge = self._open()
        bridge.alive = False
        try:
            bridge._require_server()  # upstream's ping (its per-node queue, then the legacy one)
        except self._module.ServerNotRunningError:
            raise self._not_running() from None
        finally:
            self.calls += 1
        # The server's cwd is the checkout on the host (the parent of its .host-cmd).
        line = command_line(["sh", "-c", "hostname; id -un; pwd -P"])
        started = time.perf_counter()
        data = self._round_trip(line, 30)
        if (error := result_error(data, line, bridge.node_id)) is not None:
            raise error
        lines = str(data.get("stdout", "")).splitlines()
        if len(lines) < 3 or not lines[2].startswith("/"):
            raise TransportError(
                f"host-cmd: `{line}` on the host printed {data.get('stdout')!r}: "
                "expected hostname, user and the checkout's path"
            )
        self.paths = PathMap(self.checkout, lines[2])
        self.info = BridgeInfo(bridge.node_id, lines[0], lines[1], lines[2], time.perf_counter() - started)
        return self.info

    # ---- Transport -----------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        args = check_argv(argv)
        if self.info is None:
            self.ping()
        seconds = max(1, math.ceil(self.default_timeout if timeout is None else timeout))
        to_host = self.paths.to_host
        line = command_line(
            [to_host(a) for a in args],
            cwd=to_host(cwd) if cwd else None,
            env={k: to_host(v) for k, v in env.items()} if env else None,
        )
        data = self._round_trip(line, seconds)
        if (error := result_error(data, line, self._bridge.node_id)) is not None:
            raise error
        return CommandResult(
            args,
            int(data["exit_code"]),
            self.paths.to_local(str(data.get("stdout", ""))),
            self.paths.to_local(str(data.get("stderr", ""))),
        )

    def read_from(self, path: str, offset: int, limit: int | None = None) -> bytes:
        return self.files.read_from(path, offset, limit)

    def write_atomic(self, path: str, data: bytes) -> None:
        self.files.write_atomic(path, data)

    def exists(self, path: str) -> bool:
        return self.files.exists(path)

    def close(self) -> None:
        if self._bridge is not None:
            self._sweep_abandoned()


def file_commands(transport: Transport) -> Transport:
    """Where file commands (mkdir, find, grep, stat, chmod) run: beside the files. Through the
    host-cmd bridge the files are shared with this machine, so they run here, not on the host."""
    return transport.files if isinstance(transport, HostCmdTransport) else transport
