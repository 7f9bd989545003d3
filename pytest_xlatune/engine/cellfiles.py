"""Which files are cells, and xdist's scheduling of their items: the plugin's collection entry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .. import shareable

CELL_SUFFIXES = (".yml", ".yaml")


def is_cell_file(file_path: Path, config: pytest.Config) -> bool:
    """A YAML file named on the command line, or matched by an `xlatune_cells` pattern."""
    if file_path.suffix not in CELL_SUFFIXES:
        return False
    named = any(Path(arg.split("::")[0]).resolve() == file_path.resolve() for arg in config.args)
    root = config.rootpath
    return named or any(
        file_path.resolve() in {p.resolve() for p in root.glob(pattern)} for pattern in config.getini("xlatune_cells")
    )


def check_cell_paths(config: pytest.Config) -> None:
    """A directory named like a cell (named, or matched by xlatune_cells) is a usage error, not
    a silent "no tests ran"."""
    named = [Path(arg.split("::")[0]) for arg in config.args]
    globbed = [p for pattern in config.getini("xlatune_cells") for p in config.rootpath.glob(pattern)]
    for path in named + globbed:
        if path.suffix in CELL_SUFFIXES and shareable.strip_controls(str(path)) != str(path):
            # pytest prints node ids as they are: no escape code reaches the terminal that way.
            raise pytest.UsageError(f"{str(path)!r}: expected a cell file name without control characters")
        if path.suffix in CELL_SUFFIXES and path.is_dir():
            raise pytest.UsageError(f"{path}: expected a cell file ({'/'.join(CELL_SUFFIXES)}), found a directory")


def uncollected_hint(config: pytest.Config) -> str:
    """Why a session that collected nothing did not take the YAML files of a directory it was
    given ("" when none was given): cells are the files named, or matched by `xlatune_cells`."""
    for arg in config.args:
        path = Path(arg.split("::")[0])
        found = sorted(p.name for p in path.glob("*") if p.suffix in CELL_SUFFIXES) if path.is_dir() else []
        if found:
            shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
            return (
                f"xlatune: {arg} holds {shown}, not collected: cells are the YAML files named "
                f"(pytest {path / '*.yml'}) or matched by the xlatune_cells ini patterns "
                f"(default cells/*.yml; e.g. -o xlatune_cells='{path / '*.yml'}')"
            )
    return ""


def dist_given(config: pytest.Config) -> bool:
    """Whether the user chose xdist's `--dist` (else `-n N` keeps each cell on one worker)."""
    args = [*config.invocation_params.args, *config.getini("addopts"), *os.environ.get("PYTEST_ADDOPTS", "").split()]
    return any(a in ("--dist", "-d", "--distload") or a.startswith("--dist=") for a in args)
