"""`from MaxText import train; train.main(["maxtext_train", <gpu.yml>, key=value…])`, as upstream's
utils/monkey_patch_maxtext.py calls it, running pytest_xlatune.workload instead of MaxText.

From the config file only the mesh (`dcn_/ici_<axis>_parallelism` ≥ 1 for the axes the toy model
has) is taken, so the toy model keeps its small size; every key=value after it wins, as in MaxText.

Every "node" of the local cluster is this one host, so all ranks would write their profile into
the same `<run>/tensorboard/plugins/profile/<second>/` and jax's perfetto writer, which expects
exactly one trace file there, fails on one of them (a race; distinct hosts never share a folder).
So only NODE_RANK 0 profiles here: ranks > 0 run with `profiler=` appended (last wins).
"""

from __future__ import annotations

import os
import re
import sys

from pytest_xlatune.workload import main as workload_main

_MESH = re.compile(r"^((dcn|ici)_(data|fsdp|pipeline|tensor)_parallelism)\s*:\s*([0-9]+)\s*(#.*)?$")


def main(argv: list[str]) -> None:
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
