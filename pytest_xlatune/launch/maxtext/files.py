"""The TUNE_PROFILE block text in a maxtext-slurm checkout: render, install, remove, find a foreign one (pure).

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

from ...cell.grammar import (
    ENV_NAME,
    ENV_VALUE,
    MODEL_TAG,
    OVERRIDE_KEY,
    OVERRIDE_VALUE,
    XLA_FLAG,
    Grammar,
    GrammarError,
)
from ...evidence.inert import PROGRAM_DIR, program_dump_flags
from ...jaxcache import CACHE_DIR, ENABLE, MAXTEXT_KEY, THRESHOLDS

SWEEP_ID = Grammar("a sweep id", r"[A-Za-z0-9][A-Za-z0-9_.-]*", max_len=64)

_BEGIN = "# >>> xlatune TUNE_PROFILE sweep={sweep} (managed by pytest-xlatune; do not edit) >>>"
_BEGIN_RE = re.compile(r"^# >>> xlatune TUNE_PROFILE sweep=(\S*) .*>>>$", re.MULTILINE)
_END = "# <<< xlatune TUNE_PROFILE <<<"
_INDENT = "    "


# ---- the TUNE_PROFILE block ----------------------------------------------------------------

# A case arm's name: a profile name (NAME), maybe with `.<config tag>` and a counter after it.
ARM = Grammar("a TUNE_PROFILE arm name", r"[A-Za-z0-9][A-Za-z0-9_.+-]*", max_len=110)
# A run's compilation cache, `<cell stem>/<digest>` (adaptive.cache), under CACHE_ROOT.
CACHE = Grammar("a compilation cache directory", r"[A-Za-z0-9_][A-Za-z0-9_.-]*/[0-9a-f]+", max_len=120)
# Where the caches live in the job's container: beside the job dirs in the outputs tree all nodes
# see (upstream's own commented example: $OUTPUT_PATH/../jax_cache). $OUTPUT_PATH is the job's
# dir (or the model's, when it checkpoints) in that tree; JOB_WORKSPACE moves both.
CACHE_ROOT = "xlatune-jax-cache"


@dataclass(frozen=True)
class Arm:
    """One TUNE_PROFILE case arm: everything one run adds to what the checkout deploys.

    `args` are MaxText `key=value` settings the arm appends to _train.sh's PASSTHROUGH_ARGS
    (train_env.sh is sourced before TRAIN_ARGS is built, and before configs/<M>.env.sh, which
    may read them); `env` pairs a variable with its value, None meaning unset; `compile_cache`
    is the run's JAX compilation cache under CACHE_ROOT ("" for none).
    """

    name: str
    xla_flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str | None], ...] = ()
    args: tuple[str, ...] = ()
    compile_cache: str = ""

    def same_run(self, other: Arm) -> bool:
        return (self.xla_flags, self.env, self.args, self.compile_cache) == (
            other.xla_flags,
            other.env,
            other.args,
            other.compile_cache,
        )


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
            xla.append(f"{_INDENT * 2}TUNE_ARGS+=({' '.join(shlex.quote(check_passthrough(a)) for a in arm.args)})")
        xla += _cache_lines(arm.compile_cache)
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
        *_PROGRAM_DUMP,
        *(_DUMP_GUARD if any(a.compile_cache for a in arms) else []),
        '# _train.sh builds TRAIN_ARGS=(gpu.yml base_output_directory=… "${PASSTHROUGH_ARGS[@]}") after this.',
        'PASSTHROUGH_ARGS+=("${TUNE_ARGS[@]}")',
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


# The train step's program, dumped into the job's own dir under the outputs tree for the
# inert-flag fingerprint (evidence/inert.py; MaxTextJobFiles.program_dump reads it back through
# the transport): by rank 0 only, as upstream's own XLA dump, and not when the run already dumps
# (upstream's ENABLE_XLA_DUMP, a profile's own --xla_dump_to): that dump is kept as asked (no
# fingerprint, so never cut). `${OUTPUT_PATH%/*}/$JOB_DIR` is the job's dir with or without
# checkpointing (utils/job_dir.sh); a compilation-cache hit compiles nothing and dumps nothing.
_PROGRAM_DUMP = (
    "# The train step's program for pytest-xlatune's inert flags (rank 0; not when the run dumps already).",
    'if [[ -n "${JOB_DIR:-}" && -n "${OUTPUT_PATH:-}" && "${GLOBAL_RANK:-${NODE_RANK:-0}}" == "0"'
    ' && " ${XLA_FLAGS:-} " != *" --xla_dump"* ]]; then',
    f'{_INDENT}XLA_FLAGS="${{XLA_FLAGS:+$XLA_FLAGS }}'
    + " ".join(program_dump_flags(f"${{OUTPUT_PATH%/*}}/${{JOB_DIR}}/{PROGRAM_DIR}"))
    + '"',
    f"{_INDENT}export XLA_FLAGS",
    "fi",
)


# An XLA dump (the evidence runs: _env_ENABLE_XLA_DUMP=1, read as upstream's train_env.sh reads
# it) needs a real compile: a cache hit skips the passes the dump records. JAX then opens no cache,
# whatever jax_cache_dir says.
_DUMP_GUARD = (
    "# An XLA dump compiles: no compilation cache (a hit would skip the passes the dump records).",
    '_xlatune_dump="${ENABLE_XLA_DUMP:-${EXTRACTED_ENV_MAP[ENABLE_XLA_DUMP]:-0}}"',
    'if [[ "${_xlatune_dump,,}" =~ ^(1|y|yes|true)$ ]]; then',
    f"{_INDENT}export {ENABLE}=false",
    "fi",
    "unset _xlatune_dump",
)


def _cache_lines(directory: str) -> list[str]:
    """Export the run's compilation cache and give MaxText the same dir as `jax_cache_dir` (its
    pyconfig applies that key over the variable)."""
    if not directory:
        return []
    return [
        f'{_INDENT * 2}export {CACHE_DIR}="${{OUTPUT_PATH%/*}}/{CACHE_ROOT}/{CACHE.check(directory)}"',
        *(f"{_INDENT * 2}export {name}={value}" for name, value in THRESHOLDS),
        f'{_INDENT * 2}TUNE_ARGS+=("{MAXTEXT_KEY}=${CACHE_DIR}")',
    ]


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
    outside = text if span is None else text[: span[0]] + "\n" * text.count("\n", *span) + text[span[1] :]
    for number, line in enumerate(outside.splitlines(), 1):
        if "TUNE_PROFILE" in line:
            return f"line {number}: {line.strip()!r} (the skill's pre-flight expects no TUNE_PROFILE)"
    return None


def _line_no(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def check_passthrough(arg: str) -> str:
    key, sep, value = arg.partition("=")
    if not sep:
        raise GrammarError(f"expected key=value or _env_NAME=value, found {arg!r}")
    if key.startswith("_env_"):
        ENV_NAME.check(key[len("_env_") :])
        ENV_VALUE.check(value)
    else:
        OVERRIDE_KEY.check(key)
        OVERRIDE_VALUE.check(value)
    return arg
