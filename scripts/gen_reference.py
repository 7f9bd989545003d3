"""Write the generated parts of the reference pages from the code's own tables.

Each generated part sits in a docs page between `<!-- generated: NAME -->` and
`<!-- end generated: NAME -->`; the prose around it is hand-written. The tables come from:

- cell-keys: `pytest_xlatune.cell.schema.KEYS` (the one table of top-level cell keys);
- options: `pytest_xlatune.options.OPTIONS` (the one table of options and their ini twins);
- verdicts: `pytest_xlatune.results.Verdict` (how a job ended, as stored);
- playbook: `pytest_xlatune.triage.playbook.DEFAULT_PLAYBOOK` and the signature table of
  `pytest_xlatune.triage.signatures` (failure classes, the lines that show them, what happens).

    python scripts/gen_reference.py          # rewrite the pages
    python scripts/gen_reference.py --check  # exit 1 when a committed page differs

tests/unit/test_docs.py runs the check, so a new key, option, verdict or failure class without
its reference row fails CI.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, cast

from pytest_xlatune.cell.schema import KEYS
from pytest_xlatune.options import OPTIONS
from pytest_xlatune.results import FailureClass, Verdict
from pytest_xlatune.triage.playbook import DEFAULT_PLAYBOOK
from pytest_xlatune.triage.signatures import SIGNATURES

DOCS = Path(__file__).resolve().parents[1] / "docs"

# What each stored verdict means to a user. The list of verdicts is the code's; a verdict
# without a sentence here stops the generator (and so the test) with its name.
VERDICT_MEANING = {
    "success": "ran every step; its steady-state TGS is the measurement",
    "soft_success": "Slurm reported a failure (exit 143) after the last step: the data are intact and count",
    "oom": "out of memory: the item XFAILs with the memory figures, never retried",
    "disk_full": "no space, quota or I/O error where the job writes: the session stops naming the path",
    "unknown_flag": "XLA rejected a flag (`Unknown flag in XLA_FLAGS`): the item fails naming it",
    "rccl_init_flake": "RCCL/NCCL failed before the first step: retried on the same nodelist",
    "coordination_timeout": "the JAX coordinator was unreachable or timed out: retried",
    "heartbeat_timeout": "a JAX distributed heartbeat timed out, or the coordination service stopped the task "
    "(another task died): retried",
    "nccl_timeout": "a collective timed out after training started: retried",
    "xla_compile_fail": "XLA failed to compile (the fusion is quoted): the item fails",
    "python_exception": "the trainer raised (the exception line is quoted): the item fails",
    "node_fail": "Slurm or srun reported a node failure: the node is RESUMEd and the job retried",
    "gpu_runtime_error": "a GPU runtime error: cancelled on sight, retried after a wait",
    "nic_fault": "the node's NIC reported a fault: cancelled on sight, retried after a NIC reset",
    "hang": "no progress for too long (or XLA's rendezvous-stuck line): cancelled and retried once",
    "cancelled": "cancelled by someone else (`scancel`, a kill): the item fails",
    "failed": "failed after at least one step, with no known cause: the log tail is quoted",
    "no_steps": "ended with no step (or no TGS in the steady window), no known cause",
    "infra_flake": "dropped after repeated RCCL init flakes: the item is SKIPPED",
    "stopped_early": "cancelled by the adaptive sweep once its steady steps decided it: a measurement",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def cell_keys() -> str:
    rows = ["| key | required | what it sets |", "|---|---|---|"]
    for key in KEYS:
        required = f"yes: {key.required}" if key.required else "no"
        rows.append(f"| `{key.name}` | {_cell(required)} | {_cell(key.doc)} |")
    return "\n".join(rows)


# The ini-only setting plugin.py registers beside the options (no command-line flag).
INI_ONLY = (
    "| — | `xlatune_cells` | `cells/*.yml cells/*.yaml` | cell files collected without naming them; "
    "any `.yml` named on the command line is collected too |"
)


def options() -> str:
    rows = ["| option | ini | default | meaning |", "|---|---|---|---|"]
    for option in OPTIONS:
        flag = option.flag if option.kind == "bool" else f"{option.flag}={option.metavar}"
        if option.const is not None:
            flag = f"{option.flag}[={option.metavar}]"
        if option.default is False:
            default = "off"
        elif option.name == "python":
            default = "this Python"
        elif option.default == "":
            # what an empty value does, as --help says it (a value in backticks, a phrase as it is)
            meaning = option.empty_means
            default = "(none)" if not meaning else meaning if "`" in meaning else f"`{meaning}`"
        else:
            default = f"`{option.default:g}`" if isinstance(option.default, float) else f"`{option.default}`"
        rows.append(f"| `{_cell(flag)}` | `{option.ini}` | {default} | {_cell(option.help)} |")
    return "\n".join([*rows, INI_ONLY])


def verdicts() -> str:
    # Verdict is built with Enum's functional API (results.py), which mypy cannot iterate.
    members: list[Any] = list(cast("type[Enum]", Verdict))
    missing = [v.value for v in members if v.value not in VERDICT_MEANING]
    if missing:
        raise SystemExit(f"scripts/gen_reference.py: VERDICT_MEANING has no sentence for {missing}")
    rows = ["| verdict | a measurement | meaning |", "|---|---|---|"]
    for verdict in members:
        rows.append(
            f"| `{verdict.value}` | {'yes' if verdict.measured else 'no'} | {_cell(VERDICT_MEANING[verdict.value])} |"
        )
    return "\n".join(rows)


def playbook() -> str:
    labels: dict[FailureClass, list[str]] = {}
    for signature in SIGNATURES:
        found = labels.setdefault(signature.failure, [])
        if signature.label not in found:
            found.append(signature.label)
    table = DEFAULT_PLAYBOOK.markdown().splitlines()
    rows = [table[0] + " signatures (job-log-triage labels) |", table[1] + "---|"]
    for failure, row in zip(FailureClass, table[2:], strict=True):
        names = ", ".join(f"`{label}`" for label in labels.get(failure, [])) or "—"
        rows.append(f"{row} {names} |")
    return "\n".join(rows)


PARTS: dict[str, tuple[str, Callable[[], str]]] = {
    "cell-keys": ("reference/cell.md", cell_keys),
    "options": ("reference/options.md", options),
    "verdicts": ("reference/outcomes.md", verdicts),
    "playbook": ("reference/failures.md", playbook),
}


def render(text: str, name: str, body: str) -> str:
    """The page with the part NAME replaced by `body`."""
    pattern = re.compile(rf"(<!-- generated: {name} -->\n).*?(<!-- end generated: {name} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"scripts/gen_reference.py: no '<!-- generated: {name} -->' part to fill")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def generated(docs: Path = DOCS) -> dict[Path, str]:
    """Every page that holds a generated part, as it should read."""
    pages: dict[Path, str] = {}
    for name, (page, make) in PARTS.items():
        path = docs / page
        pages[path] = render(pages.get(path, path.read_text(encoding="utf-8")), name, make())
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page differs")
    args = parser.parse_args(argv)
    stale = []
    for path, text in generated().items():
        if path.read_text(encoding="utf-8") != text:
            stale.append(path)
            if not args.check:
                path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print(
            "stale generated reference (run python scripts/gen_reference.py): " + " ".join(str(p) for p in stale),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
