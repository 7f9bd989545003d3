"""What a maxtext-slurm checkout deploys today (the xla-tuning skill's Step 2), read at
pre-flight by MaxTextSlurmLauncher: gpu.yml's keys, what configs/<M>.env.sh exports,
container_env.sh, a prior <MODEL_TAG>-tuning.md, and where the checkout names a compilation cache
itself. Every file is read through the launcher (once, without a block of ours)."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from ...jaxcache import CACHE_DIR, MAXTEXT_KEY
from ..preflight import PreflightError
from . import files as mf
from . import submit

if TYPE_CHECKING:  # a type only: launcher.py imports this module
    from .launcher import MaxTextSlurmLauncher

TUNING_MD_LIMIT = 64 << 10  # characters of an existing <MODEL_TAG>-tuning.md kept in the inventory


def checkout_inventory(launcher: MaxTextSlurmLauncher) -> dict[str, Any]:
    """gpu.yml keys, what configs/<M>.env.sh deploys, container_env.sh, a prior tuning doc."""
    try:
        settings = submit.parse_gpu_yml(launcher._clean(launcher.gpu_yml) or "")
    except ValueError as error:
        raise PreflightError(f"{launcher.cell}: backend.checkout: {launcher.gpu_yml}: {error}") from None
    env_text = launcher._clean(launcher.env_sh)
    deployed = submit.parse_env_sh(env_text) if env_text is not None else []
    restored = {f.partition("=")[0] for f in launcher.restore.flags} | {n for n, _ in launcher.restore.env_pairs}
    container = launcher.path("container_env.sh")
    tuning_md = launcher.path(f"{launcher.model_tag}-tuning.md")
    prior = launcher._clean(tuning_md)
    return {
        "checkout": launcher.checkout, "model_tag": launcher.model_tag, "model_name": launcher.model_name,
        "sweep_id": launcher.sweep_id,
        "gpu_yml": {"path": launcher.gpu_yml, "settings": settings},
        "env_file": {"path": launcher.env_sh, "exists": env_text is not None,
                     "deployed": [list(pair) for pair in deployed],
                     # restore_default cannot put these back: the cell's env_file omits them
                     "not_restored": sorted({name for name, _ in deployed} - restored)},
        "container_env": {"path": container, **submit.parse_container_env(launcher._clean(container) or ""),
                          **({"DOCKER_IMAGE": launcher.image} if launcher.image else {})},
        "tuning_md": {"path": tuning_md, "exists": prior is not None, "fresh_start": prior is None,
                      "text": (prior or "")[:TUNING_MD_LIMIT]},
        "compile_cache": {"root": launcher.path("outputs", mf.CACHE_ROOT), "user_setting": launcher.user_cache},
    }  # fmt: skip


def checkout_cache(launcher: MaxTextSlurmLauncher, yml_settings: dict[str, Any]) -> str:
    """Where the checkout itself names a compilation cache ("" for nowhere): gpu.yml's
    `jax_cache_dir`, or an export of JAX_COMPILATION_CACHE_DIR in train_env.sh or
    configs/<M>.env.sh (upstream ships its example commented out). The user's setting wins."""
    if yml_settings.get(MAXTEXT_KEY):
        return f"{posixpath.relpath(launcher.gpu_yml, launcher.checkout)} sets {MAXTEXT_KEY}"
    for path in (launcher.train_env, launcher.env_sh):
        if any(name == CACHE_DIR for name, _ in submit.parse_env_sh(launcher._clean(path) or "")):
            return f"{posixpath.relpath(path, launcher.checkout)} exports {CACHE_DIR}"
    return ""
