"""The backend seam is the Launcher Protocol alone: the package never probes a launcher for a
method with getattr/hasattr (a plugin's launcher implements the Protocol, or it is not one)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_xlatune

PACKAGE = Path(pytest_xlatune.__file__).parent


def probes(source: str) -> list[str]:
    """`getattr(…launcher…, …)` / `hasattr(…launcher…, …)` calls in `source`, as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr"}
            and node.args
            and "launcher" in ast.unparse(node.args[0]).lower()
        ):
            found.append(ast.unparse(node))
    return found


def test_the_probe_finder_finds_a_probe() -> None:
    assert probes("find = getattr(self.launcher, 'find_submission', None)\nhasattr(launcher, 'x')") == [
        "getattr(self.launcher, 'find_submission', None)",
        "hasattr(launcher, 'x')",
    ]
    assert probes("getattr(spec, 'kind')\nlauncher.find_submission(m, n, 0)") == []


def test_no_module_probes_a_launcher_for_a_method() -> None:
    found = {
        str(path.relative_to(PACKAGE)): hits
        for path in sorted(PACKAGE.rglob("*.py"))
        if (hits := probes(path.read_text()))
    }
    assert found == {}
