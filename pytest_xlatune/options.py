"""The options' table: one row per option (CLI flag, ini twin, parser to the typed value,
default), the argparse types, and the checks every value passes before Settings reads it."""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import pytest

from .adaptive.values import Budget
from .triage.hang import HangSettings
from .verdict.numerics import Mode

POLL_RANGE = (0.01, 300.0)  # below: a busy loop on the scheduler; above: verdicts minutes late


def positive_float(text: str) -> float:
    """argparse type: a finite number of seconds within POLL_RANGE (fails at parse time)."""
    low, high = POLL_RANGE
    expected = f"expected a number of seconds > 0, from {low:g} to {high:g}, found {text!r}"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(expected) from None
    if not math.isfinite(value) or not low <= value <= high:
        raise argparse.ArgumentTypeError(expected)
    return value


def numerics_mode(text: str) -> Mode:
    """argparse type: fail | warn."""
    try:
        return Mode(text.strip().lower())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected fail or warn, found {text!r}") from None


def budget_value(text: str) -> Budget:
    """argparse type: node-hours `2.5nh` (the skill's 8 h of queue time still applies), queue
    hours `8h`, or `none`."""
    value = text.strip().lower()
    if value == "none":
        return Budget(queue_hours=None)
    number, unit = (
        (value[:-2], "nh") if value.endswith("nh") else (value[:-1], "h") if value.endswith("h") else (value, "")
    )
    try:
        hours = float(number)
    except ValueError:
        hours = math.nan
    if not unit or not (math.isfinite(hours) and hours > 0):
        raise argparse.ArgumentTypeError(
            f"expected node-hours like 2.5nh, queue hours like 8h, or none, found {text!r}"
        )
    return Budget(node_hours=hours) if unit == "nh" else Budget(queue_hours=hours)


def mask_patterns(text: str) -> tuple[re.Pattern[str], ...]:
    """argparse type: regular expressions of more text to mask, one per line (a named group
    `secret` masks only that part of a match)."""
    patterns = []
    for line in filter(None, (line.strip() for line in text.splitlines())):
        try:
            patterns.append(re.compile(line))
        except re.error as error:
            raise argparse.ArgumentTypeError(f"expected a regular expression, found {line!r} ({error})") from None
        if patterns[-1].fullmatch(""):
            raise argparse.ArgumentTypeError(
                f"expected a pattern that matches some text, found {line!r} (it matches the empty string)"
            )
    return tuple(patterns)


# Linux limits: a path segment (NAME_MAX) and a whole path (PATH_MAX), in bytes; an option value
# longer than PATH_MAX is a mistake whatever it is.
SEGMENT_MAX = 255
VALUE_MAX = 4096
PATH_METAVARS = ("DIR", "PATH", "CHECKOUT", "MODULE", "IMAGE", "FILE|YAML")


@dataclass(frozen=True)
class Option:
    name: str  # CLI --xlatune-<name>, ini xlatune_<name with _>
    help: str
    default: Any
    kind: str = "string"  # string | bool | float
    parse: Callable[[str], Any] | None = None
    metavar: str = "VALUE"
    const: str | None = None  # the value of a bare `--xlatune-<name>` (the option's value is optional)
    empty_means: str = ""  # what an empty default does ("" = nothing: `none`), as --help and the docs say

    @property
    def default_text(self) -> str:
        """The default as `--help` states it: the value, or what an empty one means."""
        if self.default == "":
            return self.empty_means or "none"
        return str(self.default)

    @property
    def flag(self) -> str:
        return f"--xlatune-{self.name}"

    @property
    def ini(self) -> str:
        return "xlatune_" + self.name.replace("-", "_")


OPTIONS = (
    Option("store", "directory of the results store (one .jsonl per cell)", ".xlatune", metavar="DIR"),
    Option("report-dir", "where <MODEL_TAG>-tuning.md is written at session end", ".", metavar="DIR"),
    Option("no-report", "do not write the tuning report at session end", False, "bool"),
    Option("remeasure", "run every selected item again instead of reusing stored results", False, "bool"),
    Option("poll-interval", "seconds between scheduler polls and log reads", 0.5, "float", positive_float, "SECONDS"),
    Option("python", "python interpreter that runs the embedded workload", sys.executable, metavar="PATH"),
    Option(
        "workload",
        "python module the local backend runs as `python -m MODULE key=value...`",
        "pytest_xlatune.workload",
        metavar="MODULE",
    ),
    Option(
        "ssh-host",
        "reach Slurm over SSH on this host (a ~/.ssh/config alias or user@host:port);"
        " empty runs Slurm commands on this machine",
        "",
        metavar="HOST",
    ),
    Option(
        "ssh-config",
        "ssh config file to read instead of ~/.ssh/config",
        "",
        metavar="PATH",
        empty_means="~/.ssh/config",
    ),
    Option(
        "host-cmd",
        "run Slurm commands, submit.sh and notifications on the host through the "
        "`.host-cmd` bridge of this maxtext-slurm checkout (from inside its container; a bare "
        "--xlatune-host-cmd means /maxtext-slurm, a relative path is under the rootdir); files "
        "stay local",
        "",
        metavar="CHECKOUT",
        const="/maxtext-slurm",
    ),
    Option("ssh-accept-new-host-key", "trust and save an unknown SSH host key (refused otherwise)", False, "bool"),
    Option(
        "workdir",
        "directory on the cluster side for sbatch scripts and job logs "
        "(relative: under the remote home over SSH, under the store locally)",
        "xlatune-jobs",
        metavar="DIR",
    ),
    Option(
        "gate",
        "image-upgrade gate: re-run only the baselines and the recipes locked in "
        "<cell>.lock.json, and fail on a removed flag or a regression",
        False,
        "bool",
    ),
    Option(
        "gate-advisory",
        "with --xlatune-gate: report, do not fail: a regression or a failed "
        "run is an expected failure (x) and <MODEL_TAG>-gate.md says so; the exit code stays 0",
        False,
        "bool",
    ),
    Option(
        "gate-repair",
        "with --xlatune-gate: when a locked recipe regressed, lost a flag or has an "
        "inert flag, re-tune on the new image in the same session (the previous sweep's top 3 and "
        "the evidence's suggestion) and write <cell>.lock.proposed.json; exit code 6 when one is proposed",
        False,
        "bool",
    ),
    Option(
        "image",
        "the image to run: a container image for maxtext-slurm, the Python "
        "interpreter (a venv with its JAX/XLA build) for the local and sbatch backends",
        "",
        metavar="IMAGE",
        empty_means="the cell's `image`",
    ),
    Option(
        "notify",
        "command template for notifications, e.g. 'utils/telegram_bot.sh send "
        "{message}' (run through the transport, the message as one argument): kickoff, each "
        "positive result, the mid-point, a STOP and the end of each cell",
        "",
        metavar="COMMAND",
    ),
    Option(
        "policy",
        "playbook overrides: the path of a YAML/JSON file, or the YAML/JSON itself, "
        "e.g. '{rccl_init_flake: {retries: 3}}' (a cell's `policy:` wins)",
        "",
        metavar="FILE|YAML",
    ),
    Option(
        "hang",
        "hang detection: k × median step time within [floor_s, cap_s], and "
        "compile_allowance_s before step 0, e.g. 'k=5,floor_s=120,cap_s=1800'",
        "",
        metavar="K=V,...",
        empty_means=", ".join(f"{f.name}={f.default:g}" for f in fields(HangSettings)),
    ),
    Option(
        "fresh-baseline",
        "start a new sweep on a different frozen nodelist instead of refusing to mix its results with the stored ones",
        False,
        "bool",
    ),
    Option(
        "export",
        "also write each cell's latest results as CSV and JSON into this directory at session end; empty writes none",
        "",
        metavar="DIR",
    ),
    Option(
        "numerics",
        "what a run whose loss trajectory left the baseline's is: 'fail' (never "
        "the recipe, the stack or the lock) or 'warn' (marked, and may still win: numerics "
        "changed on purpose, e.g. fp8)",
        "fail",
        parse=numerics_mode,
        metavar="fail|warn",
    ),
    Option(
        "fixed-protocol",
        "run every selected item once, as listed, each to its end in its own "
        "job: no sharing of duplicates, no controls, repeats, early stops, stop conditions, "
        "budget or compilation cache",
        False,
        "bool",
    ),
    Option(
        "budget",
        "when an adaptive sweep concludes: node-hours (2.5nh), queue hours (8h) or none",
        "8h",
        parse=budget_value,
        metavar="SPEC",
    ),
    Option(
        "mask",
        "more text to mask in every shareable output (reports, HTML, junit, terminal, "
        "exports, lock): regular expressions, one per line in the ini; a named group `secret` "
        "masks only that part",
        "",
        parse=mask_patterns,
        metavar="REGEX",
    ),
    Option(
        "zh",
        "also write the Chinese mirror <MODEL_TAG>-tuning.zh.md (always rewritten when it already exists)",
        False,
        "bool",
    ),
)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("xlatune", "xlatune (XLA/NCCL flag tuning cells)")
    for option in OPTIONS:
        help_text = f"{option.help} (default: {option.default_text})"
        if option.const is not None:
            group.addoption(
                option.flag, nargs="?", const=option.const, default=None, metavar=option.metavar, help=help_text
            )
            parser.addini(option.ini, help_text, default=str(option.default))
        elif option.kind == "bool":
            group.addoption(option.flag, action="store_true", default=None, help=help_text)
            parser.addini(option.ini, help_text, type="bool", default=option.default)
        else:
            group.addoption(option.flag, default=None, type=option.parse, metavar=option.metavar, help=help_text)
            parser.addini(option.ini, help_text, default=str(option.default))


def option_value(config: pytest.Config, option: Option) -> Any:
    """The option's value: the command line's, else the ini file's (parsed), else the default."""
    cli = config.getoption(option.flag)
    if cli is not None:
        return cli
    ini = config.getini(option.ini)
    if option.parse and isinstance(ini, str):
        try:
            return option.parse(ini)
        except argparse.ArgumentTypeError as error:
            raise pytest.UsageError(f"ini {option.ini}: {error}") from None
    return ini


def check_lengths(values: dict[str, Any]) -> None:
    """No option value over VALUE_MAX bytes, no path segment over SEGMENT_MAX: a usage line, not
    an OSError (ENAMETOOLONG) after the sweep."""
    for option in OPTIONS:
        value = values.get(option.name)
        if not isinstance(value, str):
            continue
        size = len(value.encode())
        if size > VALUE_MAX:
            raise pytest.UsageError(
                f"{option.flag}: expected at most {VALUE_MAX} bytes, found {size} bytes ({value[:40]!r}...)"
            )
        looks_like_text = option.name == "policy" and ("\n" in value or value.lstrip().startswith(("{", "[")))
        if option.metavar in PATH_METAVARS and not looks_like_text:
            longest = max(value.split("/"), key=lambda part: len(part.encode()))
            if len(longest.encode()) > SEGMENT_MAX:
                raise pytest.UsageError(
                    f"{option.flag}: expected path segments of at most {SEGMENT_MAX} "
                    f"bytes, found one of {len(longest.encode())} bytes "
                    f"({longest[:40]!r}...)"
                )
