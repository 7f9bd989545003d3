"""Strict grammars for every name and value that reaches a command line or a shell script.

Pure: no I/O. The cell loader rejects what does not match; launchers re-check before quoting.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import XlatuneError

# maxtext-slurm rejects a submission when ${#JOB_NAME}+12 > 255 (ext4 path segment limit for
# outputs/<jobid>-<JOB_NAME>), so JOB_NAME may be at most 243 bytes.
JOB_NAME_MAX = 243


class GrammarError(XlatuneError, ValueError):
    """A text does not match its grammar."""


@dataclass(frozen=True)
class Grammar:
    """A named regular language; `expected` is the phrase used in error messages."""

    name: str
    regex: str
    max_len: int | None = None
    shown: str | None = None  # what error messages show instead of the regex (e.g. examples)

    @property
    def expected(self) -> str:
        limit = f", at most {self.max_len} characters" if self.max_len else ""
        return f"{self.name} {self.shown or 'matching ' + self.regex}{limit}"

    def matches(self, text: str) -> bool:
        if self.max_len is not None and len(text) > self.max_len:
            return False
        # fullmatch, not `$`: `$` would accept a trailing newline.
        return re.fullmatch(self.regex, text) is not None

    def check(self, text: str) -> str:
        """Return `text` unchanged, or raise GrammarError."""
        if not self.matches(text):
            raise GrammarError(f"expected {self.expected}, found {text!r}")
        return text


_VALUE_CHARS = r"A-Za-z0-9_.,:+/=@%-"
_FLAG_VALUE_CHARS = r"A-Za-z0-9_.,:+/-"


def suggestion(grammar: Grammar, text: str) -> str | None:
    """What the text most likely meant, when one common slip made it miss its grammar: spaces
    around it, an XLA flag without its `--` (or with a space for `=`), an environment variable
    name in lower case, a model tag or override key in upper case, a name with spaces; None
    when no such edit makes it match."""
    plain = text.strip()
    candidates = [plain, plain.upper(), plain.lower(), re.sub(r"\s+", "_", plain)]
    if grammar.name == XLA_FLAG.name:
        body = plain.lstrip("-")
        if "=" not in body:
            body = re.sub(r"\s+", "=", body, count=1)
        candidates.insert(0, "--" + re.sub(r"\s*=\s*", "=", body, count=1))
    return next((c for c in candidates if c != text and grammar.matches(c)), None)


# Bounds on what reaches a command line: a name, a value (XLA's longest flag is ~70 characters).
NAME_MAX = 128
VALUE_MAX = 1024

NAME = Grammar("a name", r"[A-Za-z0-9][A-Za-z0-9_.+-]*", max_len=48)
MODEL_TAG = Grammar("a model tag", r"[a-z0-9][a-z0-9._-]*")
XLA_FLAG = Grammar("an XLA flag", rf"--xla_[a-z0-9_]+=[{_FLAG_VALUE_CHARS}]+", max_len=VALUE_MAX)
XLA_FLAG_VALUE = Grammar("an XLA flag value", rf"[{_FLAG_VALUE_CHARS}]+", max_len=VALUE_MAX)
ENV_NAME = Grammar("an environment variable name", r"[A-Z_][A-Z0-9_]*", max_len=NAME_MAX)
ENV_VALUE = Grammar("an environment value", rf"[{_VALUE_CHARS}]*", max_len=VALUE_MAX)
OVERRIDE_KEY = Grammar("a MaxText override key", r"[a-z_][a-z0-9_]*", max_len=NAME_MAX)
OVERRIDE_VALUE = Grammar("a MaxText override value", rf"[{_VALUE_CHARS}]*", max_len=VALUE_MAX)
# A Slurm hostlist: hosts separated by commas, each a name with bracketed numbers or ranges
# (node01, node[01-04,07], rack[1-2]-gpu[1-8]); brackets balanced, nothing a shell would notice.
_RANGES = r"\[[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*\]"
_HOST = rf"[A-Za-z0-9][A-Za-z0-9._-]*(?:{_RANGES}[A-Za-z0-9._-]*)*"
NODELIST = Grammar(
    "a Slurm nodelist", rf"{_HOST}(?:,{_HOST})*", shown="such as node01,node02 or node[01-04,07] (no spaces)"
)
PARTITION = Grammar("a Slurm partition", r"[A-Za-z0-9_.-]+", max_len=NAME_MAX)
# sbatch --time: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
# "days-hours:minutes", "days-hours:minutes:seconds" (man sbatch); minutes and seconds after a
# colon are two digits 00-59. Launchers pass the text through as written.
SLURM_TIME = Grammar("a Slurm time limit", r"[0-9]+(:[0-5][0-9]){0,2}|[0-9]+-[0-9]{1,2}(:[0-5][0-9]){0,2}")
SLURM_TIME_FORMS = "HH:MM:SS, MM:SS or minutes, or D-HH, D-HH:MM, D-HH:MM:SS"
SLURM_TIME_EXPECTED = f"a Slurm time limit {SLURM_TIME_FORMS}"
CONTAINER_IMAGE = Grammar(
    "a container image (registry/name:tag, or the absolute path of a .tar)",
    r"[A-Za-z0-9_./@+][A-Za-z0-9_./:@+-]*",
    max_len=512,
)
# --xlatune-image: a CONTAINER_IMAGE for maxtext-slurm, the interpreter's path for local and sbatch
# (./slow-python, venv/bin/python, /venvs/new/bin/python); the same characters either way.
IMAGE_OPTION = Grammar(
    "a container image (maxtext-slurm) or a Python interpreter path (local, sbatch)",
    CONTAINER_IMAGE.regex,
    max_len=CONTAINER_IMAGE.max_len,
    shown="such as rocm/jax:latest, docker://rocm/jax:latest, /images/maxtext.sqsh or ./venv/bin/python "
    "(no spaces, quotes or shell characters)",
)


# What a cell's and a lock's `nodelist` must be: the grammar allows node[04-01], Slurm does not.
NODELIST_LOW_HIGH = f"{NODELIST.expected}, each range low-high"


def backwards_range(nodelist: str) -> str | None:
    """The first range of a NODELIST-checked hostlist that runs backwards ('04-01'), else None:
    Slurm refuses it, so the cell loader and the lock reader do (NODELIST_LOW_HIGH)."""
    for body in re.findall(r"\[([^\]]*)\]", nodelist):
        for low, high in re.findall(r"([0-9]+)-([0-9]+)", body):
            if int(low) > int(high):
                return f"{low}-{high}"
    return None


def split_xla_flag(flag: str) -> tuple[str, str]:
    """Split a grammar-checked `--xla_name=value` into ("--xla_name", "value")."""
    name, _, value = XLA_FLAG.check(flag).partition("=")
    return name, value


def _exp_tag_part(arg: str) -> str:
    # _format_exp_tag_suffix: strip one leading `--` or `-`, then every `=` becomes `_`.
    if arg.startswith("--"):
        arg = arg[2:]
    elif arg.startswith("-"):
        arg = arg[1:]
    return arg.replace("=", "_")


# The one passthrough arg of a maxtext-slurm submission (launch/maxtext/submit.py): it names the
# TUNE_PROFILE case arm that holds the run's settings, so it is part of every JOB_NAME.
TUNE_PROFILE_ARG = "_env_TUNE_PROFILE="


def maxtext_job_name(model_tag: str, exp_tag: str, arm: str, env_args: Sequence[str] = ()) -> str:
    """The JOB_NAME of `./submit.sh <model>:<exp tag> … -- [env args] _env_TUNE_PROFILE=<arm>`."""
    return job_name(model_tag, exp_tag, [*env_args, TUNE_PROFILE_ARG + arm])


def arm_name(profile: str, config_tag: str, n: int = 1) -> str:
    """A TUNE_PROFILE arm for a profile under a config tag: `<profile>.<tag>`, the n-th `<profile>.<tag>.<n>`.

    The launcher takes the profile itself first, then these (n = 1, 2, ...), the first one free;
    the cell loader sizes `<profile>.<tag>` against the JOB_NAME limit."""
    return f"{profile}.{config_tag}" if n == 1 else f"{profile}.{config_tag}.{n}"


def job_name(model_tag: str, exp_tag: str, passthrough: Sequence[str]) -> str:
    """Return the JOB_NAME maxtext-slurm's submit.sh derives (utils/parse_job_args.sh)."""
    # split_script_args drops empty passthrough args before they reach the exp tag.
    parts = ([exp_tag] if exp_tag else []) + [_exp_tag_part(a) for a in passthrough if a]
    tag = "-".join(parts)
    return f"JAX-{model_tag}-{tag}" if tag else f"JAX-{model_tag}"


def job_name_bytes(name: str) -> int:
    """Length as bash's ${#JOB_NAME} counts it for the ASCII names our grammars allow."""
    return len(name.encode())
