"""`from MaxText import train; train.main(["maxtext_train", <gpu.yml>, key=value…])`, as upstream's
utils/monkey_patch_maxtext.py calls it, running pytest_xlatune.workload instead of MaxText.

From the config file only the mesh (`dcn_/ici_<axis>_parallelism` ≥ 1 for the axes the toy model
has) is taken, so the toy model keeps its small size; every key=value after it wins, as in MaxText.
"""

from __future__ import annotations

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
    print(f"[fake MaxText] {config}: mesh {' '.join(mesh)}; args {' '.join(args)}", flush=True)
    sys.exit(workload_main([*mesh, *args]))
