"""`from MaxText import train; train.main(["maxtext_train", <gpu.yml>, key=value…])`, as upstream's
utils/monkey_patch_maxtext.py calls it, running pytest_xlatune.workload instead of MaxText.

From the config file only the mesh (`dcn_/ici_<axis>_parallelism` ≥ 1 for the axes the toy model
has) is taken, so the toy model keeps its small size; every key=value after it wins, as in MaxText.

Every "node" of the local cluster is this one host, so all ranks would write their profile into
the same `<run>/tensorboard/plugins/profile/<second>/` and jax's perfetto writer, which expects
exactly one trace file there, fails on one of them (a race; distinct hosts never share a folder).
So only NODE_RANK 0 profiles here: ranks > 0 run with `profiler=` appended (last wins).

With XLATUNE_FAKE_MAXTEXT_LOG=absl every line goes, as current MaxText logs through absl, to
stderr with absl's prefix (`I1202 06:11:28.123456 4242 metric_logger.py:196] completed step: 0, …`).
"""

from __future__ import annotations

import os
import re
import sys
import time

from pytest_xlatune.workload import main as workload_main

_MESH = re.compile(r"^((dcn|ici)_(data|fsdp|pipeline|tensor)_parallelism)\s*:\s*([0-9]+)\s*(#.*)?$")


class _AbslStderr:
    """A text stream whose every line is written to stderr as an absl INFO line."""

    def __init__(self) -> None:
        self._pending = ""

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            now = time.time()
            stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1e6):06d}"
            sys.__stderr__.write(f"I{stamp} {os.getpid()} metric_logger.py:196] {line}\n")
        return len(text)

    def flush(self) -> None:
        sys.__stderr__.flush()


def main(argv: list[str]) -> None:
    if os.environ.get("XLATUNE_FAKE_MAXTEXT_LOG") == "absl":
        sys.stdout = _AbslStderr()
    config, args = argv[1], list(argv[2:])
    mesh = []
    with open(config) as handle:
        for line in handle:
            match = _MESH.match(line.strip())
            if match and int(match.group(4)) >= 1:
                mesh.append(f"{match.group(1)}={match.group(4)}")
    if os.environ.get("NODE_RANK", "0") != "0" and any(a.startswith("profiler=") for a in args):
        args.append("profiler=")
    print(f"[fake MaxText] {config}: mesh {' '.join(mesh)}; args {' '.join(args)}", flush=True)
    sys.exit(workload_main([*mesh, *args]))
