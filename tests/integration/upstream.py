"""The real upstream maxtext-slurm checkout the conformance tests run (never edited in place).

Where it comes from: `$XLATUNE_MAXTEXT_SLURM`, else `../shared/upstream/maxtext-slurm-f64d93f`
next to the repository (in CI the repo is a fresh clone with shared/ copied beside it, read-only),
else the clone of the public repository scripts/test.sh makes in `.upstream/`.
None there: the tests fail with that message, never skip. Also the stand-ins the conformance
tests run it with (`tests/fake_container/`): a container runtime on PATH, its image, and
`utils/preflight.sh` replaced in the copy (it cleans the host it runs on); for the image with Ray,
the dir scripts/image-ray.sh installs Ray into (outside the venv, which the image's python3 is).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fake_container"
SNAPSHOT = "maxtext-slurm-f64d93f"


def upstream_snapshot() -> Path:
    """The unmodified snapshot (read-only; tests copy it)."""
    given = os.environ.get("XLATUNE_MAXTEXT_SLURM", "")
    candidates = [Path(given)] if given else []
    candidates.append(ROOT.parent / "shared" / "upstream" / SNAPSHOT)
    candidates.append(ROOT / ".upstream" / SNAPSHOT)  # scripts/test.sh's clone
    for path in candidates:
        if (path / "submit.sh").is_file() and (path / "utils" / "parse_job_args.sh").is_file():
            return path
    pytest.fail(
        f"no upstream maxtext-slurm checkout: set XLATUNE_MAXTEXT_SLURM to a clone of the public "
        f"maxtext-slurm repository at f64d93f, or put it at {ROOT.parent / 'shared' / 'upstream' / SNAPSHOT} "
        f"(looked at: {', '.join(map(str, candidates))})",
        pytrace=False,
    )


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


def conformance_checkout(base: Path) -> Path:
    """upstream_checkout() with only utils/preflight.sh replaced by the stand-in."""
    root = upstream_checkout(base)
    (root / "utils" / "preflight.sh").write_bytes((FAKE / "preflight.sh").read_bytes())
    return root


def fake_runtime_env(state: Path) -> dict[str, str]:
    """What the fake container runtime needs in the environment submit.sh (and so its jobs) runs
    in: itself first on PATH, its state dir, the image dir and the image's python3 (this venv)."""
    return {
        "PATH": f"{FAKE / 'bin'}:{os.environ['PATH']}",
        "XLATUNE_FAKE_DOCKER_STATE": str(state),
        "XLATUNE_FAKE_IMAGE": str(FAKE / "image"),
        "XLATUNE_IMAGE_PYTHON": sys.executable,
    }


def image_ray() -> str:
    """The dir with Ray (and py-spy) for the fake image's python only, installed once by
    scripts/image-ray.sh (scripts/test.sh runs it first; here a re-run finds its stamp at once).
    Given as XLATUNE_FAKE_IMAGE_RAY, it makes the fake image one with Ray."""
    run = subprocess.run(
        [str(ROOT / "scripts" / "image-ray.sh"), sys.executable],
        check=False,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if run.returncode != 0:
        pytest.fail(
            f"scripts/image-ray.sh {sys.executable} exited {run.returncode}: cannot give the fake image "
            f"Ray:\n{run.stderr[-2000:]}",
            pytrace=False,
        )
    return run.stdout.strip().splitlines()[-1]


# Set on a host where maxtext-slurm runs; never wanted in a conformance job's environment.
HOST_ONLY_ENV = ("RAY", "JOB_WORKSPACE", "XLA_FLAGS", "DOCKER_IMAGE")


def require_gpu_gres(partition: str) -> None:
    """Upstream _job.sbatch asks --gpus-per-task=8: the local nodes must declare 8 GPUs."""
    gres = subprocess.run(
        ["sinfo", "-h", "-N", "-p", partition, "-o", "%N %G"], check=False, capture_output=True, text=True, timeout=30
    ).stdout.split()
    if "gpu:8" not in gres:
        pytest.fail(
            f"the local Slurm nodes declare no 8 GPUs (sinfo %G: {' '.join(gres)}); upstream _job.sbatch "
            "asks --gpus-per-task=8: run this branch's scripts/local-slurm.sh up",
            pytrace=False,
        )
