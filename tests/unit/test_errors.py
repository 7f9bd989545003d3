"""Every exception class the package defines derives from errors.XlatuneError."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest_xlatune
from pytest_xlatune.errors import XlatuneError

PACKAGE = Path(pytest_xlatune.__file__).parent


def _modules_with_classes() -> list[str]:
    """The modules that define a class (read from the source: modules without one, such as the
    JAX workload's, are not imported)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(isinstance(node, ast.ClassDef) for node in ast.walk(ast.parse(path.read_text()))):
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _exception_classes() -> list[type[BaseException]]:
    found = []
    for name in _modules_with_classes():
        module = importlib.import_module(name)
        found += [
            cls
            for _, cls in inspect.getmembers(module, inspect.isclass)
            if issubclass(cls, BaseException) and cls.__module__ == name
        ]
    return found


def test_every_exception_class_of_the_package_is_an_xlatune_error() -> None:
    classes = _exception_classes()
    assert len(classes) >= 20  # the walk found the package's exceptions (not an empty pass)
    strays = [f"{cls.__module__}.{cls.__qualname__}" for cls in classes if not issubclass(cls, XlatuneError)]
    assert strays == []


def test_the_value_errors_stay_value_errors() -> None:
    """Re-parenting kept each old base: code that catches ValueError still catches these."""
    from pytest_xlatune.cell.grammar import GrammarError
    from pytest_xlatune.slurm.parsers import SlurmParseError
    from pytest_xlatune.triage.playbook_overrides import PolicyError

    for cls in (GrammarError, PolicyError, SlurmParseError):
        assert issubclass(cls, ValueError) and issubclass(cls, XlatuneError)
