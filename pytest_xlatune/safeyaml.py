"""The one YAML reader of the package: safe tags only, and no aliases.

`yaml.safe_load` refuses arbitrary objects but still expands aliases: a ~700-byte "billion
laughs" document (`a: &a [x, x, …]`, `b: &b [*a, *a, …]`, …) composes into a small graph that
every walk over it (validation, json.dumps, policy checks) sees as billions of nodes. A cell, a
policy or a MaxText config never needs an alias, so the composer refuses the first one, naming
the key path where it was used, before anything walks the tree.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode

from .errors import XlatuneError

__all__ = ["EXPECTED", "AliasRefused", "TooDeep", "compose", "construct", "load", "problem"]

EXPECTED = "plain YAML without anchors and aliases (write the value out)"


class AliasRefused(XlatuneError, ComposerError):
    """An alias (`*name`) in a document; `key` is the dotted key path where it was used."""

    def __init__(self, key: str, alias: str, mark: yaml.Mark | None) -> None:
        super().__init__(None, None, f"an alias (*{alias}); expected {EXPECTED}", mark)
        self.key = key
        self.alias = alias

    @property
    def line(self) -> int:
        """The 1-based line of the alias (0 when unknown)."""
        return self.problem_mark.line + 1 if self.problem_mark else 0

    @property
    def found(self) -> str:
        merge = self.key == "<<" or self.key.endswith(".<<")
        return f"a merge key with an alias (<<: *{self.alias})" if merge else f"an alias (*{self.alias})"

    def one_line(self, source: str) -> str:
        """`source:line: key: expected …, found an alias (*a)` for usage errors."""
        where = f"{source}:{self.line}" if self.line else source
        return f"{where}: {self.key or '(top level)'}: expected {EXPECTED}, found {self.found}"


class TooDeep(XlatuneError, yaml.YAMLError):
    """A document nested deeper than the parser's recursion allows (`[[[[…]]]]`)."""

    def __str__(self) -> str:
        return "a document nested too deeply"


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader whose composer raises AliasRefused at the first alias."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._keys: list[str] = []

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if isinstance(parent, MappingNode) and isinstance(index, ScalarNode):
            label: str | None = str(index.value)
        elif isinstance(index, int) and not isinstance(index, bool):
            label = f"[{index}]"
        else:
            label = None  # a mapping key itself, or the document root
        if self.check_event(AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            path = ".".join(self._keys + ([label] if label else [])).replace(".[", "[")
            raise AliasRefused(path, str(event.anchor), event.start_mark)
        if label is not None:
            self._keys.append(label)
        try:
            return super().compose_node(parent, index)
        finally:
            if label is not None:
                self._keys.pop()

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        """A scalar its tag cannot hold (`!!int abc`, `!!float x`, a 5000-digit integer) is a
        ConstructorError at the scalar, like any other YAML error, not a bare ValueError."""
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:
            tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
            found = f"{str(node.value)[:40]!r} under the tag {tag} ({exc})".split(";")[0]
            raise ConstructorError(None, None, found, node.start_mark) from None


def compose(text: str) -> Node | None:
    """The node tree of one YAML document (safe tags; AliasRefused at an alias)."""
    loader = _NoAliasLoader(text)
    try:
        return loader.get_single_node()
    except RecursionError:
        raise TooDeep() from None
    finally:
        loader.dispose()


def construct(node: Node) -> Any:
    """Python values of a composed node (from `compose`): errors carry the node's own marks."""
    loader = _NoAliasLoader("")
    try:
        return loader.construct_document(node)
    except RecursionError:
        raise TooDeep() from None
    finally:
        loader.dispose()


def load(text: str) -> Any:
    """Python values of one YAML (or JSON) document, like yaml.safe_load without aliases."""
    loader = _NoAliasLoader(text)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise TooDeep() from None
    finally:
        loader.dispose()


def problem(exc: yaml.MarkedYAMLError) -> str:
    """What a YAML error found, on one line: "unhashable key (while constructing a mapping)"."""
    found = (exc.problem or "a syntax error").removeprefix("found ")
    return f"{found} ({exc.context})" if exc.context else found
