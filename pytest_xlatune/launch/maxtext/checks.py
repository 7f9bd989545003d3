"""Pre-flight checks of a maxtext-slurm checkout for what upstream submit.sh needs.

`resolve_model_name` is pure (upstream's utils/resolve_model_name.sh over a list of file names);
`check_submit_tools` asks the cluster side through the transport.
"""

from __future__ import annotations

import posixpath
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
        raise ValueError(f"expected a model name matching one configs/*.gpu.yml, found {wanted!r} matching "
                         f"{len(matches)}: {', '.join(matches)} (upstream refuses an ambiguous name)")
    raise ValueError(f"expected configs/{wanted}.gpu.yml or a unique substring of a config name, found no "
                     f"match among {', '.join(names) or 'no configs/*.gpu.yml'}")


def check_submit_tools(transport: Transport, checkout: str) -> str:
    """'' or what stops upstream submit.sh on this cluster: rsync (it freezes the checkout with
    it, no fallback) and `<checkout>/.git` being a directory (else it copies the parent
    directory into every job's artifact)."""
    try:
        rsync = transport.run(["rsync", "--version"], timeout=60)
    except TransportError as error:
        return f"submit.sh needs rsync on the cluster side to freeze the checkout, and running it failed: {error}"
    if not rsync.ok:
        return (f"submit.sh needs rsync on the cluster side to freeze the checkout, found `rsync --version` "
                f"exiting {rsync.returncode}; install rsync where submit.sh runs")
    git = posixpath.join(checkout, ".git")
    try:
        is_dir = transport.run(["test", "-d", git], timeout=60).ok
    except TransportError as error:
        return f"cannot check {git}: {error}"
    if not is_dir:
        return (f"expected {checkout} to be a git clone of maxtext-slurm ({git} a directory), found "
                f"{'a .git file (a worktree?)' if transport.exists(git) else 'no .git'}: upstream submit.sh then "
                f"copies the parent directory {posixpath.dirname(checkout)} into every job's artifact; "
                "use a plain `git clone`")
    return ""
