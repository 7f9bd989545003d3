"""The package type-checks (`mypy --strict`, settings in pyproject.toml); the repository's Python
lints (`ruff check`) and is formatted (`ruff format --check`).

Never skipped: scripts/venv.sh installs both through the `lint` extra. A failure prints the
tool's own report, file:line first.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_xlatune

REPO = Path(pytest_xlatune.__file__).resolve().parent.parent


def _run(tool: str, *args: str) -> None:
    if importlib.util.find_spec(tool) is None:
        pytest.fail(
            f"{tool} is not installed in {sys.prefix}: run `source scripts/venv.sh` "
            "(it installs the `lint` extra of pyproject.toml)",
            pytrace=False,
        )
    done = subprocess.run([sys.executable, "-m", tool, *args], cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"`{tool} {' '.join(args)}` exited {done.returncode}:\n{done.stdout}{done.stderr}", pytrace=False)


def test_mypy_strict_passes_on_the_package() -> None:
    # Files, strictness and per-module exceptions come from [tool.mypy] in pyproject.toml; the
    # cache (.mypy_cache, git-ignored) makes a second run take seconds.
    _run("mypy")


def test_ruff_check_passes_on_the_repository() -> None:
    # The package, the tests, the benches and the scripts (per-file exceptions in pyproject.toml).
    _run("ruff", "check", "pytest_xlatune", "tests", "bench", "scripts", "conftest.py")


def test_ruff_format_leaves_the_code_as_it_is() -> None:
    # The whole repository's Python is formatted (`ruff format`, line length 120 from pyproject.toml).
    _run("ruff", "format", "--check", "pytest_xlatune", "tests", "bench", "scripts", "conftest.py")
