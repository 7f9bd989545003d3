"""maxtext-slurm's JOB_NAME limit for a cell's runs: the longest name each run can take, what each
part costs, and which part to shorten (pure; cell.load checks at collection, submit.py again when
the launcher has resolved the model name).

A run's JOB_NAME is `JAX-<model>-<exp tag>[-_env_ENABLE_XLA_DUMP_1]-_env_TUNE_PROFILE_<arm>`: the
exp tag is the run's name, the arm that name or `<name>.<config tag>`, so a name counts twice.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from . import grammar as G

# The image gate runs each locked run first on the lock's image, as `<name>-oldimage`.
OLD_IMAGE_SUFFIX = "-oldimage"
# An evidence run's extra passthrough arg: train_env.sh dumps HLO to <job dir>/xla_dump on rank 0.
XLA_DUMP_ARG = "_env_ENABLE_XLA_DUMP=1"
# The exp tag of `./submit.sh <model>:<exp tag>`: a run's name, `-oldimage` included; no ':'
# (a second colon would make the tag a model alias).
EXP_TAG = G.Grammar("a run name", G.NAME.regex, max_len=(G.NAME.max_len or 0) + len(OLD_IMAGE_SUFFIX))


def parts(model: str, exp_tag: str, args: Sequence[str]) -> str:
    """What each part of a JOB_NAME costs, for an error message."""
    shown = [f"model name {model!r} {len(model.encode())}", f"exp tag {exp_tag!r} {len(exp_tag) + 1}"]
    return ", ".join(shown + [f"{arg.partition('=')[0]} {len(arg) + 1}" for arg in args])


def longest(
    model: str, name: str, config_tag: str, *, arm: str = "", gated: bool = False, evidence: bool = False
) -> tuple[int, str, tuple[str, ...]]:
    """(bytes, exp tag, passthrough args) of the longest JOB_NAME a run named `name` can take:
    its arm (`arm`, else the name) under the longest config tag, in the image gate when `gated`."""
    suffix = OLD_IMAGE_SUFFIX if gated else ""
    exp_tag = name + suffix
    args = (*((XLA_DUMP_ARG,) if evidence else ()), G.TUNE_PROFILE_ARG + G.arm_name((arm or name) + suffix, config_tag))
    return G.job_name_bytes(G.job_name(model, exp_tag, args)), exp_tag, args


def remedy(exp_tag: str, over: int, profiles: Collection[str], model: str = "the model name") -> str:
    """What to shorten when a JOB_NAME is `over` bytes too long: the cell's own profile when that
    can make it fit (a byte of its name counts twice), else the model name (xlatune names the
    other runs; a catalog names its candidates)."""
    name = exp_tag.removesuffix(OLD_IMAGE_SUFFIX)
    cut = math.ceil(over / 2)
    if name in profiles and cut < len(name):
        return f"shorten the profile name by {cut} (it is the exp tag and the TUNE_PROFILE arm)"
    why = "not even a one-character profile name fits" if name in profiles else f"xlatune names {name!r}, not the cell"
    return f"{why}: shorten {model} by {over}"
