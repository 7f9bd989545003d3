"""Pre-flight checks of a maxtext-slurm checkout for what upstream submit.sh needs.

`resolve_model_name` is pure (upstream's utils/resolve_model_name.sh over a list of file names);
`check_submit_tools` asks the cluster side through the transport.
"""

from __future__ import annotations

import difflib
import math
import posixpath
import re
from collections.abc import Sequence

from ...transport.base import Transport, TransportError

GPU_YML = ".gpu.yml"


def resolve_model_name(config_files: Sequence[str], wanted: str) -> str:
    """`configs/<wanted>.gpu.yml` if it exists, else the one config whose name contains `wanted`.

    ValueError (one line) when none or several match, naming them, as upstream refuses then.
    """
    names = sorted({f[: -len(GPU_YML)] for f in config_files if f.endswith(GPU_YML)})
    if wanted in names:
        return wanted
    matches = [n for n in names if wanted in n]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ValueError(
            f"expected a model name matching one configs/*.gpu.yml, found {wanted!r} matching "
            f"{len(matches)}: {', '.join(matches)} (upstream refuses an ambiguous name)"
        )
    nearest = nearest_config(names, wanted)
    if nearest:
        raise ValueError(
            f"expected configs/{wanted}.gpu.yml or a unique substring of a config name, found no "
            f"match: add configs/{wanted}.gpu.yml, starting from configs/{nearest}.gpu.yml, the "
            f"nearest config there (set its model_name and sizes); configs: {', '.join(names)}"
        )
    raise ValueError(
        f"expected configs/{wanted}.gpu.yml or a unique substring of a config name, found no "
        f"match among {', '.join(names) or 'no configs/*.gpu.yml'}"
    )


_SIZE = re.compile(r"-([0-9]+(?:\.[0-9]+)?)([bt])(?=-|$)")
_ACTIVE = re.compile(r"-a[0-9]+(?:\.[0-9]+)?b$")  # MoE: `qwen3-30b-a3b` has 3b active parameters


def _shape(name: str) -> tuple[str, float, bool]:
    """(family, size in billions, MoE) of a config name: `qwen3-30b-a3b` → ("qwen3", 30, True)."""
    size = _SIZE.search(name)
    if size is None:
        return name, 0.0, bool(_ACTIVE.search(name))
    billions = float(size.group(1)) * (1000 if size.group(2) == "t" else 1)
    return name[: size.start()], billions, bool(_ACTIVE.search(name))


def nearest_config(names: Sequence[str], wanted: str) -> str | None:
    """The config to copy for a model the checkout has none for: the same family (`qwen3`), dense
    or MoE as `wanted` says, the closest size; else the closest name; None without configs."""
    family, size, moe = _shape(wanted)
    kin = [n for n in names if _shape(n)[0] == family]
    same = [n for n in kin if _shape(n)[2] == moe] or kin
    if same and size:
        return min(same, key=lambda n: (abs(math.log(max(_shape(n)[1], 1e-3) / size)), n))
    if same:
        return sorted(same)[0]
    close = difflib.get_close_matches(wanted, names, n=1, cutoff=0.0)
    return close[0] if close else None


def check_submit_tools(transport: Transport, checkout: str) -> str:
    """'' or what stops upstream submit.sh on this cluster: rsync (it freezes the checkout with
    it, no fallback) and `<checkout>/.git` being a directory (else it copies the parent
    directory into every job's artifact)."""
    try:
        rsync = transport.run(["rsync", "--version"], timeout=60)
    except TransportError as error:
        return f"submit.sh needs rsync on the cluster side to freeze the checkout, and running it failed: {error}"
    if not rsync.ok:
        return (
            f"submit.sh needs rsync on the cluster side to freeze the checkout, found `rsync --version` "
            f"exiting {rsync.returncode}; install rsync where submit.sh runs"
        )
    git = posixpath.join(checkout, ".git")
    try:
        is_dir = transport.run(["test", "-d", git], timeout=60).ok
    except TransportError as error:
        return f"cannot check {git}: {error}"
    if not is_dir:
        return (
            f"expected {checkout} to be a git clone of maxtext-slurm ({git} a directory), found "
            f"{'a .git file (a worktree?)' if transport.exists(git) else 'no .git'}: upstream submit.sh then "
            f"copies the parent directory {posixpath.dirname(checkout)} into every job's artifact; "
            "use a plain `git clone`"
        )
    return ""
