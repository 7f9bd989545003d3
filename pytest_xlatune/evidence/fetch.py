"""Copy an evidence run's artifacts from a remote cluster, so they are read here like local ones.

Over SSH the HLO dump and the profile stay on the cluster. Only what the analysis reads is
copied, into the store: the train-step module's after-optimizations text and the profile's trace.
The result then names the local copies (the cluster's paths are kept as `<key>_remote`).
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from ..safefs import check_no_links, open_nofollow
from ..transport.base import Transport, TransportError
from .artifacts import pick_trace
from .hlo import find_train_step_dump


def _listing(transport: Transport, directory: str) -> dict[str, int]:
    """{path: size} of the regular files below a remote directory."""
    result = transport.run(["find", directory, "-type", "f", "-printf", "%s %p\\n"], timeout=120)
    found = {}
    for line in result.check().stdout.splitlines():
        size, _, path = line.partition(" ")
        if size.isdigit() and path:
            found[path] = int(size)
    return found


def _copy(transport: Transport, remote: str, local: Path, base: Path) -> None:
    """Copy into `local`, never through a link at or below `base` (the store folder)."""
    check_no_links(base, local.parent)  # before mkdir: no folder is made through a link either
    local.parent.mkdir(parents=True, exist_ok=True)
    partial = local.with_name(local.name + ".partial")
    fd = open_nofollow(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(transport.read_from(remote, 0))
    partial.replace(local)  # a killed session never leaves a truncated copy under the real name


def fetch_evidence(transport: Transport, artifacts: dict[str, str], into: Path) -> tuple[dict[str, str], list[str]]:
    """(artifacts naming the local copies, problems). A part that cannot be copied keeps its
    remote path, so the evidence says it is not readable here, and a problem says why."""
    found, problems = dict(artifacts), []
    base = into.parents[2] if len(into.parents) > 2 else into  # <store>/<slug>/evidence/<job>
    if dump := artifacts.get("hlo_dump"):
        try:
            listing = _listing(transport, dump)
            module = find_train_step_dump(listing, size=listing.__getitem__)
            if module is not None:
                _copy(transport, module, into / "xla_dump" / posixpath.basename(module), base)
                found.update(hlo_dump=str(into / "xla_dump"), hlo_dump_remote=dump)
        except (TransportError, OSError) as error:
            problems.append(f"HLO dump {dump}: {error}")
    if profile := artifacts.get("profile"):
        try:
            trace = pick_trace(sorted(_listing(transport, profile)))
            if trace is not None:
                _copy(transport, trace, into / "profile" / posixpath.relpath(trace, profile), base)
                found.update(profile=str(into / "profile"), profile_remote=profile)
        except (TransportError, OSError) as error:
            problems.append(f"profile {profile}: {error}")
    return found, problems
