"""Which JAX compilation cache each run shares (pure): one directory per effective settings, so
repeats, controls and confirming runs of the same settings load the executable their first run
compiled, and runs of different settings (or images) never share one.

The key is `keys.effective_key` — the resolution the duplicate sharing uses: XLA flags
last-wins, env vars from the env file, then the run, then `_env_` arguments, MaxText arguments by
key — with the image the run uses and the cell's model tag. The directory is
`<cell stem>/<12 hex digits>`, relative to the backend's cache root (jaxcache.py). Evidence
and winner-evidence runs get none: they must compile. Neither does a run whose own settings
already name a cache: the user's setting wins. The fixed protocol gives no run a cache.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from ..cell.values import Cell
from ..jaxcache import MAXTEXT_KEY, USER_NAMES
from ..plan.expand import RunSpec
from ..plan.request import job_request
from .keys import EffectiveKey, effective_key

if TYPE_CHECKING:
    from ..launch.base import JobRequest

DIGEST_CHARS = 12
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def user_setting(key: EffectiveKey) -> str:
    """The cache setting the run's own settings make (`NAME=value`), "" when they make none."""
    env, args = dict(key.env), dict(key.args)
    for name in USER_NAMES:
        if name in env:
            return f"{name}={env[name]}"
    return f"{MAXTEXT_KEY}={args[MAXTEXT_KEY]}" if MAXTEXT_KEY in args else ""


def digest(cell: Cell, key: EffectiveKey) -> str:
    """Short hex digest of what a job effectively runs (equal settings, equal digest)."""
    blob = json.dumps([cell.model_tag, key.xla_flags, key.env, key.args, key.image]).encode()
    return hashlib.sha256(blob).hexdigest()[:DIGEST_CHARS]


def cache_dir(cell: Cell, spec: RunSpec, image: str = "") -> str:
    """`<cell stem>/<digest>` of the run's effective settings on its image ("" for none: an
    evidence run, or settings that name their own cache). `image` is the session's; an
    old-image control of the gate runs on its own (spec.image)."""
    if spec.evidence:
        return ""
    key = effective_key(cell, spec, image if spec.image is None else spec.image)
    if user_setting(key):
        return ""
    stem = _UNSAFE.sub("_", cell.path.stem).lstrip(".-") or "cell"
    return f"{stem}/{digest(cell, key)}"


def request_for(cell: Cell, spec: RunSpec, image: str = "", *, cache: bool = True) -> JobRequest:
    """The job request of a run, with its compilation cache unless `cache` is off (the fixed
    protocol)."""
    request = job_request(cell, spec)
    return replace(request, compile_cache=cache_dir(cell, spec, image)) if cache else request
