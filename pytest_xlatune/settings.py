"""The options read once into a frozen Settings (CLI > ini > default; the table is options.py),
and each cell's CellSettings resolved from them."""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .adaptive.values import Budget
from .cell.grammar import IMAGE_OPTION
from .options import OPTIONS, budget_value, check_lengths, mask_patterns, numerics_mode, option_value
from .safefs import file_kind, read_bytes_regular
from .triage.hang import HangSettings
from .triage.playbook import DEFAULT_PLAYBOOK, Playbook
from .triage.playbook_overrides import PolicyError, playbook_from_text
from .verdict.numerics import Mode

if TYPE_CHECKING:
    from .cell.values import Cell

HANG_FIELDS = ("k", "floor_s", "cap_s", "compile_allowance_s", "init_allowance_s")


# `[user@]host[:port]`: an ssh_config alias or a host name (IPv6 in brackets), never an option.
_SSH_HOST = re.compile(
    r"(?:[A-Za-z0-9_][A-Za-z0-9._-]*@)?(?:[A-Za-z0-9_][A-Za-z0-9._-]*|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?"
)


def check_ssh_host(host: str) -> None:
    """--xlatune-ssh-host is `[user@]host[:port]` (port 1-65535); else a usage error naming it."""
    if not host:
        return
    m = _SSH_HOST.fullmatch(host)
    if m is None or (m.group(1) is not None and not 0 < int(m.group(1)) < 65536):
        raise pytest.UsageError(
            f"--xlatune-ssh-host: expected [user@]host[:port] (an ssh_config alias or a host name, "
            f"port 1-65535), found {host[:80]!r}"
        )


def check_image(image: str) -> None:
    """--xlatune-image is a container image or an interpreter path (IMAGE_OPTION), whatever the
    backend: it reaches a command line, a job script and the lock; else a usage error naming it."""
    if image and not IMAGE_OPTION.matches(image):
        raise pytest.UsageError(f"--xlatune-image: expected {IMAGE_OPTION.expected}, found {image[:80]!r}")


POLICY_MAX_BYTES = 256 * 1024  # as a cell file (cell/load.py): YAML is parsed in pure Python


@dataclass(frozen=True)
class CellSettings:
    """One cell's image, interpreter, playbook and hang thresholds, each resolved once."""

    image: str  # --xlatune-image, else the cell's `image`; "" for none
    image_source: str  # where the image came from, for errors: "--xlatune-image" or "image"
    python: str  # the local interpreter: the image (a Python path there), --xlatune-python, backend.python
    playbook: Playbook  # the cell's `policy:` on --xlatune-policy on the default
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
        values = {option.name: option_value(config, option) for option in OPTIONS}
        check_lengths(values)
        root = config.rootpath
        host_cmd = str(values["host-cmd"]).strip()
        if host_cmd and str(values["ssh-host"]).strip():
            raise pytest.UsageError(
                "--xlatune-host-cmd and --xlatune-ssh-host: expected one way to reach Slurm, found both"
            )
        check_ssh_host(str(values["ssh-host"]))
        check_image(str(values["image"]))
        if values["gate-advisory"] and not values["gate"]:
            raise pytest.UsageError("--xlatune-gate-advisory: expected with --xlatune-gate, found it alone")
        if values["gate-repair"] and not values["gate"]:
            raise pytest.UsageError("--xlatune-gate-repair: expected with --xlatune-gate, found it alone")
        try:  # split at a STOP to run it: a bad template would be a traceback then, not here
            shlex.split(str(values["notify"]))
        except ValueError as error:
            raise pytest.UsageError(
                f"--xlatune-notify: expected a command as shell words, found {str(values['notify'])[:60]!r} ({error})"
            ) from None
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
            budget=values["budget"] if isinstance(values["budget"], Budget) else budget_value(str(values["budget"])),
            numerics=values["numerics"]
            if isinstance(values["numerics"], Mode)
            else numerics_mode(str(values["numerics"])),
            mask=values["mask"] if isinstance(values["mask"], tuple) else mask_patterns(str(values["mask"])),
        )

    def for_cell(self, cell: Cell) -> CellSettings:
        """What this cell runs with, resolved once: the CLI/ini value, else the cell's, else the default."""
        image, source = (self.image, "--xlatune-image") if self.image else (cell.image, "image")
        base = self.base_playbook()
        playbook = playbook_from_text(cell.policy, base=base, source="policy") if cell.policy else base
        return CellSettings(
            image=image,
            image_source=source,
            python=self.python_for(cell, image),
            playbook=playbook,
            hang=self.hang_settings(),
        )

    def python_for(self, cell: Cell, image: str) -> str:
        """The local interpreter of a cell's jobs on `image` (a Python path there; "" = none)."""
        # --xlatune-python (CLI or ini; its default is this interpreter) > the cell's backend.python.
        given = self.python if self.python != sys.executable else ""
        own = cell.backend.option("python") or ""
        if "/" in own and not own.startswith("/"):  # relative to the cell file, like other paths
            # normpath, not resolve(): a venv's bin/python is a link to the base interpreter, and
            # the resolved path runs without the venv (no JAX there).
            own = os.path.normpath(os.path.join(cell.path.parent.absolute(), own))
        return image or given or own or self.python

    def hang_settings(self) -> HangSettings:
        """--xlatune-hang parsed; a bad value is a usage error naming the option."""
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in self.hang.split(","))):
            name, _, text = part.partition("=")
            if name not in HANG_FIELDS:
                raise pytest.UsageError(
                    f"--xlatune-hang: {name}: expected one of {', '.join(HANG_FIELDS)}, found {part!r}"
                )
            try:
                values[name] = float(text)
            except ValueError:
                raise pytest.UsageError(f"--xlatune-hang: {name}: expected a number, found {text!r}") from None
        try:
            return HangSettings(**values)
        except ValueError as error:
            raise pytest.UsageError(f"--xlatune-hang: {error}") from None

    def base_playbook(self) -> Playbook:
        """The playbook with --xlatune-policy applied (a cell's `policy:` goes on top): the value
        is a file when it names one (or looks like a path), else YAML/JSON text."""
        text = self.policy.strip()
        if not text:
            return DEFAULT_PLAYBOOK
        path = Path(os.path.expanduser(text))
        looks_like_path = (
            "\n" not in text
            and not text.startswith(("{", "["))
            and (path.suffix in (".yml", ".yaml", ".json") or "/" in text)
        )
        source = "xlatune_policy"
        if "\n" not in text and (_exists(path) or looks_like_path):
            if not path.is_file():
                found = file_kind(path.stat().st_mode) if path.exists() else "no such file"  # a FIFO too
                raise pytest.UsageError(
                    f"--xlatune-policy: expected a policy file or YAML text, found {text!r} ({found})"
                )
            try:
                data = read_bytes_regular(path, what="a policy file", limit=POLICY_MAX_BYTES) or b""
                text, source = data.decode("utf-8"), str(path)
            except (OSError, UnicodeDecodeError) as error:
                raise pytest.UsageError(f"--xlatune-policy: {path}: cannot read: {error}") from None
            if len(data) > POLICY_MAX_BYTES:
                raise pytest.UsageError(
                    f"--xlatune-policy: expected a policy file of at most {POLICY_MAX_BYTES // 1024} KiB, "
                    f"found {path.stat().st_size:,} bytes ({path})"
                )
        try:
            return playbook_from_text(text, source=source)
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
    problem = _dir_problem(directory)
    if problem:
        raise pytest.UsageError(f"{flag}: expected a writable directory, found {str(directory)!r} ({problem})")


def _dir_problem(directory: Path) -> str:
    target = directory
    try:
        while not target.exists() and target != target.parent:
            if target.is_symlink():  # dangling: mkdir there fails with a bare "File exists"
                return f"{target} is a symbolic link to {os.readlink(target)[:200]!r}, which does not exist"
            target = target.parent
        if not target.is_dir():
            return f"{target} is not a directory"
        tempfile.TemporaryFile(dir=target).close()
    except OSError as error:
        return f"{target}: {error.strerror or error}"
    return ""
