"""The real upstream maxtext-slurm checkout the conformance tests run (never edited in place).

Where it comes from: `$XLATUNE_MAXTEXT_SLURM`, else `../shared/upstream/maxtext-slurm-f64d93f`
next to the repository (in CI the repo is a fresh clone with shared/ copied beside it, read-only).
None there: the tests fail with that message, never skip.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = "maxtext-slurm-f64d93f"


def upstream_snapshot() -> Path:
    """The unmodified snapshot (read-only; tests copy it)."""
    given = os.environ.get("XLATUNE_MAXTEXT_SLURM", "")
    candidates = [Path(given)] if given else []
    candidates.append(ROOT.parent / "shared" / "upstream" / SNAPSHOT)
    for path in candidates:
        if (path / "submit.sh").is_file() and (path / "utils" / "parse_job_args.sh").is_file():
            return path
    pytest.fail(f"no upstream maxtext-slurm checkout: set XLATUNE_MAXTEXT_SLURM to a clone of the public "
                f"maxtext-slurm repository at f64d93f, or put it at {ROOT.parent / 'shared' / 'upstream' / SNAPSHOT} "
                f"(looked at: {', '.join(map(str, candidates))})", pytrace=False)


def upstream_checkout(base: Path, name: str = "maxtext-slurm") -> Path:
    """A writable copy of the snapshot under `base`, made a git clone directory (`.git/`), as a
    user's `git clone` is: upstream submit.sh freezes the checkout itself then, not its parent."""
    root = base / name
    shutil.copytree(upstream_snapshot(), root, symlinks=True, ignore=shutil.ignore_patterns(".git", "outputs"))
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True, timeout=60)
    return root
