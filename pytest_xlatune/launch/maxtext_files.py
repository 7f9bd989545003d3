"""Text in and out of a maxtext-slurm checkout: the TUNE_PROFILE block, submit.sh argv and output,
and the inventory files (pure: no I/O).

The TUNE_PROFILE block follows the xla-tuning skill's "train_env.sh editing pattern"; it is
wrapped in begin/end markers carrying the sweep id so it can be replaced and removed exactly.
The same markers wrap the small block for the end of configs/<M>.env.sh, which upstream sources
after train_env.sh (`render_env_file_block`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from ..grammar import ENV_NAME, ENV_VALUE, JOB_NAME_MAX, MODEL_TAG, NAME, NODELIST, OVERRIDE_KEY, OVERRIDE_VALUE
from ..grammar import PARTITION, XLA_FLAG, Grammar, GrammarError, job_name, job_name_bytes
HEARTBEAT_KEY = "jax_distributed_heartbeat_timeout_seconds"
HEARTBEAT = f"{HEARTBEAT_KEY}=99999"
TUNE_ENV_ARG = "_env_TUNE_PROFILE="

# Slurm --time: minutes, min:sec, h:min:sec, d-h, d-h:min, d-h:min:sec.
SLURM_TIME = Grammar("a Slurm time limit", r"[0-9]+(-[0-9]+)?(:[0-9]+){0,2}|UNLIMITED|INFINITE")
XLA_DUMP_ARG = "_env_ENABLE_XLA_DUMP=1"  # train_env.sh dumps HLO to <job dir>/xla_dump on rank 0
SWEEP_ID = Grammar("a sweep id", r"[A-Za-z0-9][A-Za-z0-9_.-]*", max_len=64)

_BEGIN = "# >>> xlatune TUNE_PROFILE sweep={sweep} (managed by pytest-xlatune; do not edit) >>>"
_BEGIN_RE = re.compile(r"^# >>> xlatune TUNE_PROFILE sweep=(\S*) .*>>>$", re.MULTILINE)
_END = "# <<< xlatune TUNE_PROFILE <<<"
_INDENT = "    "


# ---- the TUNE_PROFILE block ----------------------------------------------------------------

# A case arm's name: a profile name (NAME), maybe with `.<config tag>` and a counter after it.
ARM = Grammar("a TUNE_PROFILE arm name", r"[A-Za-z0-9][A-Za-z0-9_.+-]*", max_len=110)


@dataclass(frozen=True)
class Arm:
    """One TUNE_PROFILE case arm: everything one run adds to what the checkout deploys.

    `args` are MaxText `key=value` settings the arm appends to _train.sh's PASSTHROUGH_ARGS
    (train_env.sh is sourced before TRAIN_ARGS is built, and before configs/<M>.env.sh, which
    may read them); `env` pairs a variable with its value, None meaning unset.
    """

    name: str
    xla_flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str | None], ...] = ()
    args: tuple[str, ...] = ()

    def same_run(self, other: Arm) -> bool:
        return (self.xla_flags, self.env, self.args) == (other.xla_flags, other.env, other.args)


def render_tune_block(arms: Sequence[Arm], model_tag: str) -> tuple[str, str]:
    """Return (XLA/args case block, post-NCCL env case block) for train_env.sh, in the skill's pattern.

    Each arm prints what it appended, so the job log records exactly what ran. The env block is
    "" when no arm sets or unsets an env var.
    """
    names = [ARM.check(a.name) for a in arms]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"duplicate TUNE_PROFILE arms: {', '.join(dupes)}")
    MODEL_TAG.check(model_tag)
    xla = [
        "# ---- TUNE_PROFILE ----",
        'TUNE_PROFILE="${TUNE_PROFILE:-${EXTRACTED_ENV_MAP[TUNE_PROFILE]:-}}"',
        'TUNE_FLAGS=""',
        "TUNE_ARGS=()",
        'case "${TUNE_PROFILE}" in',
    ]
    for arm in arms:
        xla += [f"{_INDENT}{shlex.quote(arm.name)})", *_flag_lines(arm.xla_flags)]
        if arm.args:
            xla.append(f"{_INDENT * 2}TUNE_ARGS+=({' '.join(shlex.quote(_check_passthrough(a)) for a in arm.args)})")
        xla.append(f"{_INDENT * 2};;")
    xla += [
        f"{_INDENT}*)",
        f"""{_INDENT * 2}echo "[train_env.sh] WARNING: unknown TUNE_PROFILE='$TUNE_PROFILE'" >&2""",
        f"{_INDENT * 2};;",
        "esac",
        'if [[ -n "$TUNE_FLAGS" ]]; then',
        f'{_INDENT}XLA_FLAGS="${{XLA_FLAGS:+$XLA_FLAGS }}${{TUNE_FLAGS# }}"',
        f"{_INDENT}export XLA_FLAGS",
        "fi",
        "# _train.sh builds TRAIN_ARGS=(gpu.yml base_output_directory=… \"${PASSTHROUGH_ARGS[@]}\") after this.",
        "PASSTHROUGH_ARGS+=(\"${TUNE_ARGS[@]}\")",
        'echo "[TUNE_PROFILE] ${TUNE_PROFILE}: PASSTHROUGH_ARGS+=(${TUNE_ARGS[*]}) TUNE_FLAGS=${TUNE_FLAGS# }"',
    ]
    env = _env_case([(a.name, list(a.env)) for a in arms if a.env])
    if env:
        env.insert(0, "# ---- TUNE_PROFILE: post-NCCL overrides ----")
    return "\n".join(xla) + "\n", "\n".join(env) + "\n" if env else ""


def _env_case(arms: Sequence[tuple[str, list[tuple[str, str | None]]]]) -> list[str]:
    if not arms:
        return []
    env = ['case "${TUNE_PROFILE:-}" in']
    for name, pairs in arms:
        env.append(f"{_INDENT}{shlex.quote(ARM.check(name))})")
        env += [f"{_INDENT * 2}{_env_statement(var, value)}" for var, value in pairs]
        env.append(f"{_INDENT * 2};;")
    env.append("esac")
    return env


def render_env_file_block(arms: Sequence[Arm], model_tag: str) -> str:
    """Return the block for the END of configs/<MODEL_TAG>.env.sh that lets the TUNE block win.

    _train.sh sources train_env.sh, THEN configs/<M>.env.sh, THEN exports the `_env_` args: a
    flag or export the env file sets would beat the TUNE_PROFILE block at the end of
    train_env.sh, so restore_default would restore nothing. This block appends $TUNE_FLAGS
    again (XLA flags are last-wins) and re-runs the post-NCCL case after the file's own settings
    (the args are not appended twice).
    """
    lines = [
        f"# ---- TUNE_PROFILE: again after configs/{MODEL_TAG.check(model_tag)}.env.sh's own settings ----",
        'if [[ -n "${TUNE_FLAGS:-}" ]]; then',
        f'{_INDENT}XLA_FLAGS="${{XLA_FLAGS:+$XLA_FLAGS }}${{TUNE_FLAGS# }}"',
        f"{_INDENT}export XLA_FLAGS",
        "fi",
        *_env_case([(a.name, list(a.env)) for a in arms if a.env]),
    ]
    return "\n".join(lines) + "\n"


def _flag_lines(flags: Sequence[str]) -> list[str]:
    # shlex.quote(" --xla_x=1") is ' --xla_x=1': the leading space keeps TUNE_FLAGS space-separated.
    return [f"{_INDENT * 2}TUNE_FLAGS+={shlex.quote(' ' + XLA_FLAG.check(f))}" for f in flags]


def _env_statement(name: str, value: str | None) -> str:
    ENV_NAME.check(name)
    if value is None:
        return f"unset {name}"
    return f"export {name}={shlex.quote(ENV_VALUE.check(value))}"


def install_block(train_env_text: str, block_text: str, sweep_id: str) -> str:
    """Append our marked block at the end of train_env.sh, replacing our own earlier block.

    Installing the same block twice gives the same text; `remove_block` gives the original back.
    The block goes last so its post-NCCL case runs after every export in the file.
    """
    foreign = foreign_block(train_env_text, sweep_id)
    if foreign is not None:
        raise ValueError(f"train_env.sh already has TUNE_PROFILE content we did not write: {foreign}")
    base = remove_block(train_env_text, sweep_id)
    body = block_text if block_text.endswith("\n") or not block_text else block_text + "\n"
    # Exactly one "\n" goes before the begin marker, so remove_block can cut it off again.
    return f"{base}\n{_BEGIN.format(sweep=SWEEP_ID.check(sweep_id))}\n{body}{_END}\n"


def remove_block(text: str, sweep_id: str) -> str:
    """Return `text` without our block (unchanged when there is none)."""
    span = _own_span(text, sweep_id)
    if span is None:
        return text
    start, end = span
    return text[: max(start - 1, 0)] + text[end:]


def _own_span(text: str, sweep_id: str) -> tuple[int, int] | None:
    """(start of our begin marker, end of our end-marker line incl. its newline)."""
    begin = _BEGIN.format(sweep=SWEEP_ID.check(sweep_id))
    start = _line_index(text, begin)
    if start is None:
        return None
    end_at = _line_index(text, _END, start)
    if end_at is None:
        raise ValueError(f"our TUNE_PROFILE block (sweep {sweep_id}) has no end marker {_END!r}")
    end = end_at + len(_END)
    if text.startswith("\n", end):
        end += 1
    return start, end


def _line_index(text: str, line: str, start: int = 0) -> int | None:
    match = re.compile(rf"^{re.escape(line)}$", re.MULTILINE).search(text, start)
    return match.start() if match else None


def foreign_block(text: str, sweep_id: str) -> str | None:
    """Describe TUNE_PROFILE content we did not write (another sweep's block, a hand-made case)."""
    for match in _BEGIN_RE.finditer(text):
        if match.group(1) != sweep_id:
            return f"line {_line_no(text, match.start())}: a pytest-xlatune block of sweep {match.group(1)!r}"
    try:
        span = _own_span(text, sweep_id)
    except ValueError as exc:
        return str(exc)
    outside = text if span is None else text[: span[0]] + "\n" * text.count("\n", *span) + text[span[1]:]
    for number, line in enumerate(outside.splitlines(), 1):
        if "TUNE_PROFILE" in line:
            return f"line {number}: {line.strip()!r} (the skill's pre-flight expects no TUNE_PROFILE)"
    return None


def _line_no(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


# ---- submit.sh -------------------------------------------------------------------------------


def _check_passthrough(arg: str) -> str:
    key, sep, value = arg.partition("=")
    if not sep:
        raise GrammarError(f"expected key=value or _env_NAME=value, found {arg!r}")
    if key.startswith("_env_"):
        ENV_NAME.check(key[len("_env_"):])
        ENV_VALUE.check(value)
    else:
        OVERRIDE_KEY.check(key)
        OVERRIDE_VALUE.check(value)
    return arg


def submit_argv(model_name: str, exp_tag: str, nodes: int, nodelist: str | None, time: str, partition: str | None,
                env_args: Sequence[str], ray: bool, *, arm: str) -> list[str]:
    """Build the submit.sh command line: `./submit.sh <model>:<exp tag> <sbatch args> -- [_env_…]
    _env_TUNE_PROFILE=<arm>`. The run's MaxText settings live in the arm (render_tune_block), so
    JOB_NAME is `JAX-<model>-<exp tag>[-_env_ENABLE_XLA_DUMP_1]-_env_TUNE_PROFILE_<arm>`.

    Raises ValueError when an argument breaks its grammar or when submit.sh would refuse the
    JOB_NAME (over 243 bytes); the message says what each part costs.
    """
    MODEL_TAG.check(model_name)
    if exp_tag:
        NAME.check(exp_tag)  # no ':' — a second colon would make the tag a model alias
    if nodes < 1:
        raise ValueError(f"nodes must be at least 1, found {nodes}")
    args = [_check_passthrough(a) for a in env_args]
    if not all(a.startswith("_env_") for a in args) or any(a.startswith(TUNE_ENV_ARG) for a in args):
        raise ValueError(f"submit.sh gets only _env_ args besides {TUNE_ENV_ARG}<arm> (settings go in the arm), "
                         f"found {' '.join(args)}")
    args.append(TUNE_ENV_ARG + ARM.check(arm))
    name = job_name(model_name, exp_tag, args)
    size = job_name_bytes(name)
    if size > JOB_NAME_MAX:
        parts = [f"model name {model_name!r} {len(model_name.encode())}", f"exp tag {exp_tag!r} {len(exp_tag) + 1}",
                 *(f"{a.partition('=')[0]} {len(a) + 1}" for a in args)]
        raise ValueError(f"JOB_NAME would be {size} bytes; submit.sh refuses more than {JOB_NAME_MAX} "
                         f"(${{#JOB_NAME}}+12 > 255). Bytes per part: {', '.join(parts)}; shorten the "
                         f"profile name by {size - JOB_NAME_MAX} (it is both exp tag and arm) ({name[:60]}…)")
    sbatch: list[str] = []
    if partition:
        sbatch.append(f"--partition={PARTITION.check(partition)}")
    sbatch.append(f"--nodes={nodes}")
    if nodelist:
        sbatch.append(f"--nodelist={NODELIST.check(nodelist)}")
    sbatch.append(f"--time={SLURM_TIME.check(time)}")
    spec = f"{model_name}:{exp_tag}" if exp_tag else model_name
    prefix = ["env", "RAY=1"] if ray else []
    return [*prefix, "./submit.sh", spec, *sbatch, "--", *args]


# submit.sh takes the last field of this line; the word after "job" is the same id and also
# survives sbatch's "Submitted batch job N on cluster C" form.
_SUBMITTED_RE = re.compile(r"Submitted batch job (\S+)")
_PROLOG_RE = re.compile(r"^\[ERROR\] Job (\S+) died in prolog.*$", re.MULTILINE)


def parse_submit_output(text: str) -> str:
    """Return the job id from submit.sh's output (stdout and stderr merged)."""
    died = _PROLOG_RE.search(text)
    if died:
        raise ValueError(f"job {died.group(1)} was accepted but died before writing a log: {died.group(0)}")
    ids = [m.group(1) for m in _SUBMITTED_RE.finditer(text)]
    if not ids or not ids[-1].isdigit():  # a bare `sbatch: error:` line has no id
        tail = "\n".join(text.strip().splitlines()[-8:]) or "(no output)"
        raise ValueError(f"no 'Submitted batch job <id>' line in submit.sh output; it ended with:\n{tail}")
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
)  # fmt: skip
_PARALLELISM_RE = re.compile(r"(dcn|ici)_[a-z]+_parallelism")


def parse_gpu_yml(text: str) -> dict[str, Any]:
    """The inventory keys of configs/<MODEL_TAG>.gpu.yml: batch, sequence, remat, MoE, PP, parallelism."""
    try:
        data = yaml.safe_load(text)
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
