"""submit.sh's argv and what it prints (job id, job dir), and the checkout's inventory files (pure)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Sequence
from typing import Any

import yaml

from ... import safeyaml
from ...cell.grammar import (
    ENV_NAME,
    JOB_NAME_MAX,
    MODEL_TAG,
    NODELIST,
    PARTITION,
    SLURM_TIME,
    TUNE_PROFILE_ARG,
    job_name,
    job_name_bytes,
)
from ...cell.jobnames import EXP_TAG, parts, remedy
from ...slurm.commands import submission_mark
from .files import ARM, check_passthrough

TUNE_ENV_ARG = TUNE_PROFILE_ARG


# ---- submit.sh -------------------------------------------------------------------------------


def submit_argv(
    model_name: str,
    exp_tag: str,
    nodes: int,
    nodelist: str | None,
    time: str,
    partition: str | None,
    env_args: Sequence[str],
    ray: bool,
    *,
    arm: str,
    mark: str = "",
    profiles: Collection[str] = (),
) -> list[str]:
    """Build the submit.sh command line: `./submit.sh <model>:<exp tag> <sbatch args> -- [_env_…]
    _env_TUNE_PROFILE=<arm>`. The run's MaxText settings live in the arm (render_tune_block), so
    JOB_NAME is `JAX-<model>-<exp tag>[-_env_ENABLE_XLA_DUMP_1]-_env_TUNE_PROFILE_<arm>`.
    `mark` (the submission's, launch.base.JobRequest) becomes the job's `--comment` (an sbatch
    arg: submit.sh passes it on and keeps it out of JOB_NAME).

    Raises ValueError when an argument breaks its grammar or when submit.sh would refuse the
    JOB_NAME (over 243 bytes); the message says what each part costs and what to shorten: the
    profile name when it is one of the cell's `profiles`, else the model name.
    """
    MODEL_TAG.check(model_name)
    if exp_tag:
        EXP_TAG.check(exp_tag)
    if nodes < 1:
        raise ValueError(f"nodes must be at least 1, found {nodes}")
    args = [check_passthrough(a) for a in env_args]
    if not all(a.startswith("_env_") for a in args) or any(a.startswith(TUNE_ENV_ARG) for a in args):
        raise ValueError(
            f"submit.sh gets only _env_ args besides {TUNE_ENV_ARG}<arm> (settings go in the arm), "
            f"found {' '.join(args)}"
        )
    args.append(TUNE_ENV_ARG + ARM.check(arm))
    name = job_name(model_name, exp_tag, args)
    size = job_name_bytes(name)
    if size > JOB_NAME_MAX:
        raise ValueError(
            f"JOB_NAME would be {size} bytes; submit.sh refuses more than {JOB_NAME_MAX} "
            f"(${{#JOB_NAME}}+12 > 255). Bytes per part: {parts(model_name, exp_tag, args)}; "
            f"{remedy(exp_tag, size - JOB_NAME_MAX, profiles)} ({name[:60]}…)"
        )
    sbatch: list[str] = []
    if partition:
        sbatch.append(f"--partition={PARTITION.check(partition)}")
    sbatch.append(f"--nodes={nodes}")
    if nodelist:
        sbatch.append(f"--nodelist={NODELIST.check(nodelist)}")
    sbatch.append(f"--time={SLURM_TIME.check(time)}")
    if mark:
        sbatch.append(f"--comment={submission_mark(mark)}")
    spec = f"{model_name}:{exp_tag}" if exp_tag else model_name
    prefix = ["env", "RAY=1"] if ray else []
    return [*prefix, "./submit.sh", spec, *sbatch, "--", *args]


# submit.sh takes the last field of this line; the word after "job" is the same id and also
# survives sbatch's "Submitted batch job N on cluster C" form.
_SUBMITTED_RE = re.compile(r"Submitted batch job (\S+)")
_PROLOG_RE = re.compile(r"^\[ERROR\] Job (\S+) died in prolog.*$", re.MULTILINE)


_SUBMIT_ERROR_RE = re.compile(r"(?:Error:|\[ERROR\]|ERROR:|FATAL:|!!! |\S+: error: )")


def parse_submit_output(text: str) -> str:
    """Return the job id from submit.sh's output (stdout and stderr merged)."""
    died = _PROLOG_RE.search(text)
    if died:
        raise ValueError(f"job {died.group(1)} was accepted but died before writing a log: {died.group(0)}")
    ids = [m.group(1) for m in _SUBMITTED_RE.finditer(text)]
    if not ids or not ids[-1].isdigit():  # a bare `sbatch: error:` line has no id
        lines = text.strip().splitlines()
        # Upstream's reason may sit above a long listing (`Error: ambiguous model name 'qwen3'.`
        # over the supported models): its error lines first, then the last lines.
        errors = [line for line in lines[:-8] if _SUBMIT_ERROR_RE.match(line)]
        tail = "\n".join([*errors[:4], *lines[-8:]]) or "(no output)"
        raise ValueError(f"no 'Submitted batch job <id>' line in submit.sh output; it said:\n{tail}")
    return ids[-1]


def parse_job_dir(text: str, job_id: str) -> str | None:
    """The per-job dir submit.sh announces (`[ARTIFACT] <ws>/<id>-<JOB_NAME>/artifact -> …`).

    It names the real JOB_WORKSPACE, which the submitting shell may have moved off outputs/.
    """
    match = re.search(rf"^\[ARTIFACT\] (.*/{re.escape(job_id)}-[^/\n]+)/artifact -> ", text, re.MULTILINE)
    return match.group(1) if match else None


# ---- inventory (xla-tuning skill, Step 2) ----------------------------------------------------

_YML_KEYS = (
    "per_device_batch_size", "max_target_length", "remat_policy",
    "sparse_matmul", "use_turbo_grouped_gemm", "use_deepep_dispatch", "capacity_factor", "megablox",
    "pipeline_parallel_layers", "num_layers_per_pipeline_stage", "num_pipeline_microbatches",
    "jax_cache_dir",
)  # fmt: skip
_PARALLELISM_RE = re.compile(r"(dcn|ici)_[a-z]+_parallelism")


def parse_gpu_yml(text: str) -> dict[str, Any]:
    """The inventory keys of configs/<MODEL_TAG>.gpu.yml: batch, sequence, remat, MoE, PP, parallelism."""
    try:
        data = safeyaml.load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"gpu.yml is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"gpu.yml: expected a mapping at the top level, found {type(data).__name__}")
    return {k: v for k, v in data.items() if k in _YML_KEYS or _PARALLELISM_RE.fullmatch(str(k))}


_HEREDOC_RE = re.compile(r"(?<!<)<<(?!<)-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)", re.DOTALL)
_XLA_IN_VALUE_RE = re.compile(r"(--xla_[A-Za-z0-9_]+)(?:=(\S*))?")
_PUNCTUATION = ";&|()"
_LEADING_WORDS = {"then", "else", "do", "{", "}", "!", "elif", "if", "while", "until"}


def _assignments(text: str) -> list[tuple[str, str]]:
    """(NAME, raw value) of every assignment or export, in order, outside heredoc bodies.

    Conditional branches are flattened: the inventory lists what the file can deploy.
    """
    found: list[tuple[str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        statement, i = lines[i], i + 1
        while statement.endswith("\\") and i < len(lines):
            statement, i = statement[:-1] + lines[i], i + 1
        heredoc = _HEREDOC_RE.search(statement)
        if heredoc:  # skip the body up to the terminator line
            while i < len(lines) and lines[i].strip() != heredoc.group(2):
                i += 1
            i += 1
            continue
        words: list[str] | None = None
        while words is None:
            try:
                words = _words(statement)
            except ValueError:  # an open quote continues on the next line
                words = [] if i >= len(lines) else None
                if words is None:
                    statement, i = statement + "\n" + lines[i], i + 1
        found += _command_assignments(words)
    return found


def _words(statement: str) -> list[str]:
    lexer = shlex.shlex(statement, posix=True, punctuation_chars=_PUNCTUATION)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def _command_assignments(words: list[str]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    command: list[str] = []
    for word in [*words, ";"]:
        if word.strip(_PUNCTUATION):  # shlex returns runs like "));" as one token
            command.append(word)
            continue
        while command and command[0] in _LEADING_WORDS:
            command = command[1:]
        if command and command[0] == "export":
            command = command[1:]
        for w in command:
            match = _ASSIGN_RE.fullmatch(w)
            if not match:
                break  # the command itself: later words are its arguments
            found.append((match.group(1), match.group(2)))
        command = []
    return found


def parse_env_sh(text: str) -> list[tuple[str, str]]:
    """What a configs/<MODEL_TAG>.env.sh deploys: ("--xla_flag", value) and ("ENV_NAME", value)."""
    deployed: list[tuple[str, str]] = []
    for name, value in _assignments(text):
        if name == "XLA_FLAGS":
            deployed += [(m.group(1), m.group(2) or "") for m in _XLA_IN_VALUE_RE.finditer(value)]
        elif ENV_NAME.matches(name):  # upper-case: skip the file's own helper variables
            deployed.append((name, value))
    return deployed


_DEFAULT_EXPANSION_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?-(.*)\}", re.DOTALL)
CONTAINER_KEYS = ("DOCKER_IMAGE", "MAXTEXT_PATCH_BRANCH", "MAXTEXT_REPO_DIR")


def parse_container_env(text: str) -> dict[str, str]:
    """DOCKER_IMAGE, MAXTEXT_PATCH_BRANCH, MAXTEXT_REPO_DIR as container_env.sh sets them
    when the submitting shell does not (`${X:-default}` gives its default)."""
    values: dict[str, str] = {}
    for name, value in _assignments(text):
        if name in CONTAINER_KEYS:
            match = _DEFAULT_EXPANSION_RE.fullmatch(value)
            values[name] = match.group(2) if match else value
    return values
