"""The JAX persistent compilation cache as a job sees it: the variables a launcher exports for a
run, and the MaxText key that must name the same directory (pure; which run gets which
directory is adaptive.cache's choice).

JAX reads `JAX_<OPTION>` at import (jax 0.10: `jax_compilation_cache_dir`,
`jax_persistent_cache_min_compile_time_secs`, `jax_persistent_cache_min_entry_size_bytes`,
`jax_enable_compilation_cache`). MaxText's pyconfig calls `compilation_cache.set_cache_dir(
jax_cache_dir)` whenever that key is set — base.yml sets it to `~/jax_cache` — which overrides
the variable; so a MaxText job also gets `jax_cache_dir=<the same directory>`.
"""

from __future__ import annotations

import posixpath

Pairs = tuple[tuple[str, str], ...]

CACHE_DIR = "JAX_COMPILATION_CACHE_DIR"
ENABLE = "JAX_ENABLE_COMPILATION_CACHE"
# Cache every executable: JAX's defaults skip those compiled in under 1 s.
THRESHOLDS: Pairs = (
    ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0"),
    ("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0"),
)
MAXTEXT_KEY = "jax_cache_dir"
USER_NAMES = (CACHE_DIR, ENABLE)  # either one set by the user's own settings: theirs wins
# An evidence run compiles: a cache hit skips XLA's passes, so its dump lacks what they write
# (before_optimizations, buffer assignment, memory usage), and MaxText turns its cache off for
# dump_hlo for the same reason.
EVIDENCE_ENV: Pairs = ((ENABLE, "false"),)


def cache_path(root: str, relative: str) -> str:
    """A run's cache directory under a backend's root ("" when the run has none)."""
    return posixpath.join(root, relative) if relative else ""


def cache_env(evidence: bool, directory: str) -> Pairs:
    """What the job exports: the cache off for an evidence run, else `directory` (when it has
    one) with thresholds that keep every executable."""
    if evidence:
        return EVIDENCE_ENV
    return ((CACHE_DIR, directory), *THRESHOLDS) if directory else ()
