"""The package's shape rules that a linter does not check: no `Any` in the engine's annotations,
and no module-level container that the module changes after import (a registry one session
fills and the next inherits)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_xlatune

PACKAGE = Path(pytest_xlatune.__file__).resolve().parent
_CONTAINERS = frozenset({"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "Counter"})
_MUTATORS = frozenset(
    {
        "append",
        "add",
        "update",
        "pop",
        "popitem",
        "setdefault",
        "clear",
        "extend",
        "insert",
        "remove",
        "discard",
        "move_to_end",
        "appendleft",
    }
)


def _annotations(tree: ast.AST) -> list[ast.expr]:
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = [
                *node.args.posonlyargs,
                *node.args.args,
                *node.args.kwonlyargs,
                *(a for a in (node.args.vararg, node.args.kwarg) if a is not None),
            ]
            found += [a.annotation for a in args if a.annotation is not None]
            found += [node.returns] if node.returns is not None else []
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return found


def _names_any(annotation: ast.expr) -> bool:
    text = ast.unparse(annotation)
    return any(
        (isinstance(n, ast.Name) and n.id == "Any") or (isinstance(n, ast.Attribute) and n.attr == "Any")
        for n in ast.walk(ast.parse(text.strip("'\""), mode="eval"))
    )


def mutated_registries(source: str) -> list[str]:
    """Module-level containers the module changes after binding them: `X[k] = v`, `X.append(…)`,
    `X |= …`, `del X[k]`."""
    tree = ast.parse(source)
    containers = set()
    for node in tree.body:
        target, value = (
            (node.targets[0], node.value)
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else (node.target, node.value)
            if isinstance(node, ast.AnnAssign)
            else (None, None)
        )
        if not isinstance(target, ast.Name) or target.id == "__all__" or value is None:
            continue
        call = value.func if isinstance(value, ast.Call) else None
        called = call.id if isinstance(call, ast.Name) else call.attr if isinstance(call, ast.Attribute) else ""
        if (
            isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp))
            or called in _CONTAINERS
        ):
            containers.add(target.id)
    changed = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            name = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            name = node.func.value
        elif isinstance(node, ast.AugAssign):
            name = node.target
        else:
            continue
        if isinstance(name, ast.Name) and name.id in containers:
            changed.append(f"{name.id} (line {node.lineno})")
    return changed


def test_no_engine_annotation_names_any() -> None:
    found = [
        f"{path.name}:{a.lineno}: {ast.unparse(a)}"
        for path in sorted((PACKAGE / "engine").glob("*.py"))
        for a in _annotations(ast.parse(path.read_text()))
        if _names_any(a)
    ]
    assert not found, "engine annotations with Any:\n" + "\n".join(found)


def test_no_module_changes_a_module_level_container() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name in mutated_registries(path.read_text())
    ]
    assert not found, "module-level registries changed at run time:\n" + "\n".join(found)


def test_the_checks_see_what_they_look_for() -> None:
    assert mutated_registries("_SEEN: dict[str, int] = {}\ndef f(k):\n    _SEEN[k] = 1\n") == ["_SEEN (line 3)"]
    assert mutated_registries("_HOOKS = []\ndef f(h):\n    _HOOKS.append(h)\n") == ["_HOOKS (line 3)"]
    assert mutated_registries("_KINDS = {'a': 1}\ndef f(k):\n    return _KINDS.get(k)\n") == []
    assert _names_any(ast.parse("def f(x: 'dict[str, Any]') -> None: ...").body[0].args.args[0].annotation)  # type: ignore[attr-defined]
    assert not _names_any(ast.parse("x: Mapping[str, object]").body[0].annotation)  # type: ignore[attr-defined]
