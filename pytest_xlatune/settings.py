"""Every xlatune option in one place: CLI > ini > default, read once into a frozen Settings."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .adaptive.model import Budget
from .judge.hang import HangSettings
from .judge.numerics import Mode
from .judge.policy import DEFAULT_POLICY, Policy, PolicyError, policy_from_text

if TYPE_CHECKING:
    from .cell.model import Cell

HANG_FIELDS = ("k", "floor_s", "cap_s", "compile_allowance_s", "init_allowance_s")


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
    number, unit = (value[:-2], "nh") if value.endswith("nh") else (value[:-1], "h") \
        if value.endswith("h") else (value, "")
    try:
        hours = float(number)
    except ValueError:
        hours = math.nan
    if not unit or not (math.isfinite(hours) and hours > 0):
        raise argparse.ArgumentTypeError(f"expected node-hours like 2.5nh, queue hours like 8h, or "
                                         f"none, found {text!r}")
    return Budget(node_hours=hours) if unit == "nh" else Budget(queue_hours=hours)


def mask_patterns(text: str) -> tuple[re.Pattern[str], ...]:
    """argparse type: regular expressions of more text to mask, one per line (a named group
    `secret` masks only that part of a match)."""
    patterns = []
    for line in filter(None, (line.strip() for line in text.splitlines())):
        try:
            patterns.append(re.compile(line))
        except re.error as error:
            raise argparse.ArgumentTypeError(f"expected a regular expression, found {line!r} "
                                             f"({error})") from None
        if patterns[-1].fullmatch(""):
            raise argparse.ArgumentTypeError(f"expected a pattern that matches some text, found "
                                             f"{line!r} (it matches the empty string)")
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

    @property
    def flag(self) -> str:
        return f"--xlatune-{self.name}"

    @property
    def ini(self) -> str:
        return "xlatune_" + self.name.replace("-", "_")


OPTIONS = (
    Option("store", "directory of the results store (one .jsonl per cell)", ".xlatune",
           metavar="DIR"),
    Option("report-dir", "where <MODEL_TAG>-tuning.md is written at session end", ".",
           metavar="DIR"),
    Option("no-report", "do not write the tuning report at session end", False, "bool"),
    Option("remeasure", "run every selected item again instead of reusing stored results",
           False, "bool"),
    Option("poll-interval", "seconds between scheduler polls and log reads", 0.5, "float",
           positive_float, "SECONDS"),
    Option("python", "python interpreter that runs the embedded workload", sys.executable,
           metavar="PATH"),
    Option("workload", "python module the local backend runs as `python -m MODULE key=value...`",
           "pytest_xlatune.workload", metavar="MODULE"),
    Option("ssh-host", "reach Slurm over SSH on this host (a ~/.ssh/config alias or user@host:port);"
           " empty runs Slurm commands on this machine", "", metavar="HOST"),
    Option("ssh-config", "ssh config file to read instead of ~/.ssh/config", "", metavar="PATH"),
    Option("host-cmd", "run Slurm commands, submit.sh and notifications on the host through the "
           "`.host-cmd` bridge of this maxtext-slurm checkout (from inside its container; a bare "
           "--xlatune-host-cmd means /maxtext-slurm, a relative path is under the rootdir); files "
           "stay local", "", metavar="CHECKOUT", const="/maxtext-slurm"),
    Option("ssh-accept-new-host-key", "trust and save an unknown SSH host key (refused otherwise)",
           False, "bool"),
    Option("workdir", "directory on the cluster side for sbatch scripts and job logs "
           "(relative: under the remote home over SSH, under the store locally)", "xlatune-jobs",
           metavar="DIR"),
    Option("gate", "image-upgrade gate: re-run only the baselines and the recipes locked in "
           "<cell>.lock.json, and fail on a removed flag or a regression", False, "bool"),
    Option("gate-advisory", "with --xlatune-gate: report, do not fail: a regression or a failed "
           "run is an expected failure (x) and <MODEL_TAG>-gate.md says so; the exit code stays 0",
           False, "bool"),
    Option("gate-repair", "with --xlatune-gate: when a locked recipe regressed, lost a flag or has an "
           "inert flag, re-tune on the new image in the same session (the previous sweep's top 3 and "
           "the evidence's suggestion) and write <cell>.lock.proposed.json; exit code 6 when one is proposed",
           False, "bool"),
    Option("image", "the image to run: a container image for maxtext-slurm, the Python "
           "interpreter (a venv with its JAX/XLA build) for the local and sbatch backends",
           "", metavar="IMAGE"),
    Option("notify", "command template for notifications, e.g. 'utils/telegram_bot.sh send "
           "{message}' (run through the transport, the message as one argument)", "",
           metavar="COMMAND"),
    Option("policy", "playbook overrides: the path of a YAML/JSON file, or the YAML/JSON itself, "
           "e.g. '{rccl_init_flake: {retries: 3}}' (a cell's `policy:` wins)", "",
           metavar="FILE|YAML"),
    Option("hang", "hang detection: k × median step time within [floor_s, cap_s], and "
           "compile_allowance_s before step 0, e.g. 'k=5,floor_s=120,cap_s=1800'", "",
           metavar="K=V,..."),
    Option("fresh-baseline", "start a new sweep on a different frozen nodelist instead of "
           "refusing to mix its results with the stored ones", False, "bool"),
    Option("export", "also write each cell's latest results as CSV and JSON into this directory "
           "at session end; empty writes none", "", metavar="DIR"),
    Option("numerics", "what a run whose loss trajectory left the baseline's is: 'fail' (never "
           "the recipe, the stack or the lock) or 'warn' (marked, and may still win: numerics "
           "changed on purpose, e.g. fp8)", "fail", parse=numerics_mode, metavar="fail|warn"),
    Option("fixed-protocol", "run every selected item once, as listed, each to its end in its own "
           "job: no sharing of duplicates, no controls, repeats, early stops, stop conditions, "
           "budget or compilation cache", False, "bool"),
    Option("budget", "when an adaptive sweep concludes: node-hours (2.5nh), queue hours (8h) or "
           "none", "8h", parse=budget_value, metavar="SPEC"),
    Option("mask", "more text to mask in every shareable output (reports, HTML, junit, terminal, "
           "exports, lock): regular expressions, one per line in the ini; a named group `secret` "
           "masks only that part", "", parse=mask_patterns, metavar="REGEX"),
    Option("zh", "also write the Chinese mirror <MODEL_TAG>-tuning.zh.md (always rewritten when "
           "it already exists)", False, "bool"),
)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("xlatune", "xlatune (XLA/NCCL flag tuning cells)")
    for option in OPTIONS:
        help_text = f"{option.help} (default: {option.default})"
        if option.const is not None:
            group.addoption(option.flag, nargs="?", const=option.const, default=None,
                            metavar=option.metavar, help=help_text)
            parser.addini(option.ini, help_text, default=str(option.default))
        elif option.kind == "bool":
            group.addoption(option.flag, action="store_true", default=None, help=help_text)
            parser.addini(option.ini, help_text, type="bool", default=option.default)
        else:
            group.addoption(option.flag, default=None, type=option.parse, metavar=option.metavar,
                            help=help_text)
            parser.addini(option.ini, help_text, default=str(option.default))


def _value(config: pytest.Config, option: Option) -> Any:
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


@dataclass(frozen=True)
class CellSettings:
    """One cell's image, interpreter, playbook and hang thresholds, each resolved once."""

    image: str  # --xlatune-image, else the cell's `image`; "" for none
    image_source: str  # where the image came from, for errors: "--xlatune-image" or "image"
    python: str  # the local interpreter: the image (a Python path there), --xlatune-python, backend.python
    policy: Policy
    hang: HangSettings


@dataclass(frozen=True)
class Settings:
    store_dir: Path
    report_dir: Path
    write_report: bool
    remeasure: bool
    poll_interval: float
    python: str
    workload: str = "pytest_xlatune.workload"
    ssh_host: str = ""
    ssh_config: str = ""
    accept_new_host_key: bool = False
    host_cmd: str = ""  # the maxtext-slurm checkout whose .host-cmd bridge runs commands
    workdir: str = "xlatune-jobs"
    fresh_baseline: bool = False
    gate: bool = False
    gate_advisory: bool = False
    gate_repair: bool = False
    image: str = ""
    notify: str = ""
    policy: str = ""
    hang: str = ""
    export_dir: Path | None = None
    write_zh: bool = False
    numerics: Mode = Mode.FAIL
    fixed_protocol: bool = False
    budget: Budget = field(default_factory=Budget)
    mask: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        values = {option.name: _value(config, option) for option in OPTIONS}
        check_lengths(values)
        root = config.rootpath
        host_cmd = str(values["host-cmd"]).strip()
        if host_cmd and str(values["ssh-host"]).strip():
            raise pytest.UsageError("--xlatune-host-cmd and --xlatune-ssh-host: expected one way to "
                                    "reach Slurm, found both")
        if values["gate-advisory"] and not values["gate"]:
            raise pytest.UsageError("--xlatune-gate-advisory: expected with --xlatune-gate, found it alone")
        if values["gate-repair"] and not values["gate"]:
            raise pytest.UsageError("--xlatune-gate-repair: expected with --xlatune-gate, found it alone")
        return cls(
            store_dir=root / values["store"],
            report_dir=root / values["report-dir"],
            write_report=not values["no-report"],
            remeasure=bool(values["remeasure"]),
            poll_interval=float(values["poll-interval"]),
            python=str(values["python"]),
            workload=str(values["workload"]),
            ssh_host=str(values["ssh-host"]),
            ssh_config=str(values["ssh-config"]),
            accept_new_host_key=bool(values["ssh-accept-new-host-key"]),
            host_cmd=str(root / host_cmd) if host_cmd else "",
            workdir=str(values["workdir"]),
            fresh_baseline=bool(values["fresh-baseline"]),
            gate=bool(values["gate"]),
            gate_advisory=bool(values["gate-advisory"]),
            gate_repair=bool(values["gate-repair"]),
            image=str(values["image"]),
            notify=str(values["notify"]),
            policy=str(values["policy"]),
            hang=str(values["hang"]),
            export_dir=root / values["export"] if values["export"] else None,
            write_zh=bool(values["zh"]),
            fixed_protocol=bool(values["fixed-protocol"]),
            budget=values["budget"] if isinstance(values["budget"], Budget)
            else budget_value(str(values["budget"])),
            numerics=values["numerics"] if isinstance(values["numerics"], Mode)
            else numerics_mode(str(values["numerics"])),
            mask=values["mask"] if isinstance(values["mask"], tuple) else mask_patterns(str(values["mask"])),
        )

    def for_cell(self, cell: Cell) -> CellSettings:
        """What this cell runs with, resolved once: the CLI/ini value, else the cell's, else the default."""
        image, source = (self.image, "--xlatune-image") if self.image else (cell.image, "image")
        base = self.base_policy()
        policy = policy_from_text(cell.policy, base=base, source="policy") if cell.policy else base
        return CellSettings(image=image, image_source=source, python=self.python_for(cell, image),
                            policy=policy, hang=self.hang_settings())

    def python_for(self, cell: Cell, image: str) -> str:
        """The local interpreter of a cell's jobs on `image` (a Python path there; "" = none)."""
        # --xlatune-python (CLI or ini; its default is this interpreter) > the cell's backend.python.
        given = self.python if self.python != sys.executable else ""
        own = cell.backend.option("python") or ""
        if "/" in own and not own.startswith("/"):  # relative to the cell file, like other paths
            own = str((cell.path.parent / own).resolve())
        return image or given or own or self.python

    def hang_settings(self) -> HangSettings:
        """--xlatune-hang parsed; a bad value is a usage error naming the option."""
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in self.hang.split(","))):
            name, _, text = part.partition("=")
            if name not in HANG_FIELDS:
                raise pytest.UsageError(f"--xlatune-hang: {name}: expected one of "
                                        f"{', '.join(HANG_FIELDS)}, found {part!r}")
            try:
                values[name] = float(text)
            except ValueError:
                raise pytest.UsageError(f"--xlatune-hang: {name}: expected a number, "
                                        f"found {text!r}") from None
        try:
            return HangSettings(**values)
        except ValueError as error:
            raise pytest.UsageError(f"--xlatune-hang: {error}") from None

    def base_policy(self) -> Policy:
        """The playbook with --xlatune-policy applied (a cell's `policy:` goes on top): the value
        is a file when it names one (or looks like a path), else YAML/JSON text."""
        text = self.policy.strip()
        if not text:
            return DEFAULT_POLICY
        path = Path(os.path.expanduser(text))
        looks_like_path = "\n" not in text and not text.startswith(("{", "[")) and (
            path.suffix in (".yml", ".yaml", ".json") or "/" in text)
        source = "xlatune_policy"
        if "\n" not in text and (_exists(path) or looks_like_path):
            if not path.is_file():
                found = "a directory" if path.is_dir() else "no such file"
                raise pytest.UsageError(f"--xlatune-policy: expected a policy file or YAML text, "
                                        f"found {text!r} ({found})")
            try:
                text, source = path.read_text(encoding="utf-8"), str(path)
            except (OSError, UnicodeDecodeError) as error:
                raise pytest.UsageError(f"--xlatune-policy: {path}: cannot read: {error}") from None
        try:
            return policy_from_text(text, source=source)
        except PolicyError as error:
            raise pytest.UsageError(f"--xlatune-policy: {error}") from None

    def check_store(self) -> None:
        """The store directory is (or can be made) a writable directory: a usage error otherwise."""
        check_writable_dir("--xlatune-store", self.store_dir)

    def check_outputs(self) -> None:
        """Where the session will write (report dir, export dir) and the files it will read
        (--xlatune-python, --xlatune-ssh-config): checked before anything runs."""
        if self.write_report:
            check_writable_dir("--xlatune-report-dir", self.report_dir)
        if self.export_dir is not None:
            check_writable_dir("--xlatune-export", self.export_dir)
        for flag, text in (("--xlatune-ssh-config", self.ssh_config), ("--xlatune-python", self.python)):
            path = Path(os.path.expanduser(text))
            if text and "/" in text and path.is_dir():
                raise pytest.UsageError(f"{flag}: expected a file, found {text!r} (a directory)")


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # ENAMETOOLONG and the like: not a file we can read
        return False


def check_writable_dir(flag: str, directory: Path) -> None:
    """`directory` is (or can be made) a writable directory: a one-line usage error otherwise."""
    target = directory
    try:
        while not target.exists() and target != target.parent:
            target = target.parent
        problem = ""
        if not target.is_dir():
            problem = f"{target} is not a directory"
        else:
            tempfile.TemporaryFile(dir=target).close()
    except OSError as error:
        problem = f"{target}: {error.strerror or error}"
    if problem:
        raise pytest.UsageError(f"{flag}: expected a writable directory, found {str(directory)!r} ({problem})")


def check_lengths(values: dict[str, Any]) -> None:
    """No option value over VALUE_MAX bytes, no path segment over SEGMENT_MAX: a usage line, not
    an OSError (ENAMETOOLONG) after the sweep."""
    for option in OPTIONS:
        value = values.get(option.name)
        if not isinstance(value, str):
            continue
        size = len(value.encode())
        if size > VALUE_MAX:
            raise pytest.UsageError(f"{option.flag}: expected at most {VALUE_MAX} bytes, found "
                                    f"{size} bytes ({value[:40]!r}...)")
        looks_like_text = option.name == "policy" and ("\n" in value or value.lstrip().startswith(("{", "[")))
        if option.metavar in PATH_METAVARS and not looks_like_text:
            longest = max(value.split("/"), key=lambda part: len(part.encode()))
            if len(longest.encode()) > SEGMENT_MAX:
                raise pytest.UsageError(f"{option.flag}: expected path segments of at most {SEGMENT_MAX} "
                                        f"bytes, found one of {len(longest.encode())} bytes "
                                        f"({longest[:40]!r}...)")
