"""Typed reads of a composed YAML node tree; each failure raises CellError at a node's line."""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, SequenceNode

from pytest_xlatune.cell import grammar as G

from ..errors import XlatuneError


class CellError(XlatuneError):
    """A cell file is invalid; `line` is 1-based (0 when the file could not be read)."""

    def __init__(
        self,
        path: Path,
        line: int,
        key: str,
        expected: str,
        found: str,
        suggestion: str | None = None,
    ) -> None:
        super().__init__(path, line, key, expected, found, suggestion)
        self.path = path
        self.line = line
        self.key = key
        self.expected = expected
        self.found = found
        self.suggestion = suggestion

    def __str__(self) -> str:
        # A key path holds the cell's own key names: escape what a terminal would act on (or
        # what the terminal cleaner would silently drop) and keep it short.
        key = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in self.key)
        key = key if len(key) <= 120 else key[:117] + "..."
        text = f"{self.path}:{self.line}: {key}: expected {self.expected}, found {self.found}"
        if self.suggestion:
            text += f" (did you mean {self.suggestion!r}?)"
        return text.replace("\r", "\\r").replace("\n", "\\n")


_TAG = "tag:yaml.org,2002:"
_KINDS = {
    **{_TAG + kind: kind for kind in ("str", "int", "float", "bool", "null", "map", "seq")},
    _TAG + "timestamp": "str",
}  # an unquoted date such as 2024-01-01: keep the text as written
_KIND_NAMES = {"int": "an integer", "float": "a number", "bool": "a boolean"}
Fields = dict[str, tuple[Node, Node]]


def line_of(node: Node) -> int:
    """Return the 1-based line where a node starts."""
    return int(node.start_mark.line) + 1


def kind_of(node: Node) -> str:
    """Return str|int|float|bool|null|map|seq, or "tag" for anything outside plain YAML."""
    return _KINDS.get(node.tag, "tag")


def sub_key(key: str, name: str) -> str:
    """Join a key path: "" + "steps" -> "steps", "backend" + "time" -> "backend.time"."""
    return f"{key}.{name}" if key else name


def show(text: str) -> str:
    """Quote a found text for a one-line message (repr escapes newlines)."""
    return repr(text if len(text) <= 60 else text[:57] + "...")


def describe(node: Node) -> str:
    """Show what a node holds, for the "found" part of a message."""
    kind = kind_of(node)
    if kind == "map":
        return "a mapping"
    if kind == "seq":
        return "a list"
    if kind == "null":
        return "null"
    if kind == "str":
        return show(node.value)
    text = str(node.value)
    text = text if len(text) <= 60 else f"{text[:57]}... ({len(text)} characters)"
    return f"{text} ({_KIND_NAMES.get(kind, kind)})"


# The longest free text a cell key takes (a label, a path, a plugin's option) unless it says less.
TEXT_MAX = 1024


def _one_line(text: str) -> bool:
    """No control character (C0, DEL, C1), line or paragraph separator, nor an invisible format
    character (bidi overrides, zero-width): what a terminal, a report or a diff would hide."""
    return all(unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp") for ch in text)


# A plugin backend kind's check of one of its keys: (key, value as written) → None, or what was expected.
KindCheck = Callable[[str, str], "str | None"]


@dataclass(frozen=True)
class Ctx:
    """One cell file being read: where errors point, the profile names claimed so far, and the
    backend kinds plugins added (kind → the check of one of its keys: None when fine, else what
    was expected)."""

    path: Path
    kinds: Mapping[str, KindCheck] = field(default_factory=dict)
    # name -> (key, line, what made it up: "" for a profile the cell wrote, "catalog fsdp", "stack")
    name_at: dict[str, tuple[str, int, str]] = field(default_factory=dict)

    def fail(
        self,
        at: Node | int,
        key: str,
        expected: str,
        found: str | None = None,
        suggestion: str | None = None,
    ) -> NoReturn:
        """Raise CellError for `key` at a node (or a line); `found` defaults to the node shown."""
        line = at if isinstance(at, int) else line_of(at)
        if found is None:
            assert not isinstance(at, int)
            found = describe(at)
        raise CellError(self.path, line, key or "cell", expected, found, suggestion)


def check_tags(r: Ctx, node: Node, key: str, seen: set[int]) -> None:
    """Reject any tag outside plain YAML (`!!python/object`, `!custom`, `<<` merges)."""
    if id(node) in seen:  # aliases share nodes; recursive aliases would loop
        return
    seen.add(id(node))
    if kind_of(node) == "tag":
        tag = node.tag.replace(_TAG, "!!")
        found = "a '<<' merge key" if tag == "!!merge" else f"the tag {tag}"
        r.fail(node, key, "plain YAML values (no tags or merge keys)", found)
    if isinstance(node, MappingNode):
        for knode, vnode in node.value:
            check_tags(r, knode, sub_key(key, str(knode.value)), seen)
            check_tags(r, vnode, sub_key(key, str(knode.value)), seen)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            check_tags(r, item, f"{key}[{i}]", seen)


def mapping(
    r: Ctx,
    node: Node,
    key: str,
    allowed: Sequence[str] | None = None,
    key_kinds: tuple[str, ...] = ("str",),
    key_expected: str = "a string key",
    expected: str = "a mapping",
    nested: Mapping[str, str] | None = None,
) -> Fields:
    """The mapping's fields by name; an unknown key fails naming the closest allowed one, or
    the section it belongs under (`nested`: a key of a section → that section, e.g.
    win_pct → thresholds)."""
    if kind_of(node) != "map":
        r.fail(node, key, expected)
    fields: Fields = {}
    for knode, vnode in node.value:
        if kind_of(knode) not in key_kinds:
            r.fail(knode, key, key_expected)
        name = str(knode.value)
        if allowed is not None and name not in allowed:
            close = difflib.get_close_matches(name, allowed, n=1)
            inner = [] if close else difflib.get_close_matches(name, list(nested or {}), n=1)
            section = (nested or {}).get(inner[0]) if inner else None
            r.fail(
                knode,
                sub_key(key, name),
                f"one of {', '.join(allowed)}",
                f"unknown key {name!r}" + (f" (a key of {section})" if inner and inner[0] == name else ""),
                close[0] if close else f"{section}: {{{inner[0]}: {_flow(vnode)}}}" if section else None,
            )
        if name in fields:
            first = line_of(fields[name][0])
            r.fail(knode, sub_key(key, name), "each key once", f"{name!r} again (first on line {first})")
        fields[name] = (knode, vnode)
    return fields


def _flow(node: Node) -> str:
    """A scalar's text as a one-line YAML value for a suggestion (`...` for anything else)."""
    text = str(node.value) if kind_of(node) in ("str", "int", "float", "bool") else ""
    return text if re.fullmatch(r"[A-Za-z0-9._:/+-]{1,60}", text) else "..."


def sequence(r: Ctx, node: Node, key: str, expected: str = "a list") -> list[Node]:
    if kind_of(node) != "seq":
        r.fail(node, key, expected)
    return list(node.value)


def construct(r: Ctx, node: Node, key: str, expected: str) -> Any:
    try:
        return SafeConstructor().construct_object(node)
    except Exception:  # e.g. `!!int abc`: the explicit tag does not fit the text
        r.fail(node, key, expected)


def string(
    r: Ctx,
    node: Node,
    key: str,
    grammar: G.Grammar | None = None,
    expected: str = "text on one line",
    max_len: int | None = TEXT_MAX,
) -> str:
    """A string node's text: matching `grammar`, else non-empty, on one line, at most `max_len`
    (None: the caller's own grammar check bounds it)."""
    if grammar is None and max_len:
        expected = f"{expected}, at most {max_len} characters"
    expected = grammar.expected if grammar else expected
    if kind_of(node) != "str":
        r.fail(node, key, expected)
    text = str(node.value)
    if not (grammar.matches(text) if grammar else text and _one_line(text) and len(text) <= (max_len or len(text))):
        limit = grammar.max_len if grammar else max_len
        too_long = limit is not None and len(text) > limit
        found = f"{show(text)} ({len(text)} characters)" if too_long else None
        r.fail(node, key, expected, found, G.suggestion(grammar, text) if grammar else None)
    return text


def _quoted_number(node: Node) -> str | None:
    """The found text of a number written in quotes (`steps: "10"`), saying what to do."""
    if kind_of(node) == "str" and (m := re.fullmatch(r"([+-]?[0-9]+(\.[0-9]*)?)\s*(%?)", str(node.value).strip())):
        if m.group(3):
            return f"{show(node.value)} (text: write the number alone, {m.group(1)}, without %)"
        return f"{show(node.value)} (text, in quotes: write the number without them)"
    return None


def integer(r: Ctx, node: Node, key: str, low: int, high: int | None = None, expected: str | None = None) -> int:
    if expected is None:
        expected = f"an integer from {low} to {high}" if high else f"an integer >= {low}"
    if kind_of(node) != "int":
        r.fail(node, key, expected, _quoted_number(node))
    value = int(construct(r, node, key, expected))
    if value < low or (high is not None and value > high):
        r.fail(node, key, expected)
    return value


def number(r: Ctx, node: Node, key: str, high: float | None = None) -> float:
    expected = f"a number > 0 and at most {high:g}" if high is not None else "a number > 0"
    if kind_of(node) not in ("int", "float"):
        r.fail(node, key, expected, _quoted_number(node))
    value = float(construct(r, node, key, expected))
    if not (value > 0 and math.isfinite(value)) or (high is not None and value > high):
        r.fail(node, key, expected)
    return value


def render(r: Ctx, node: Node, key: str, grammar: G.Grammar) -> str:
    """Render a scalar as command-line text: numbers as written, booleans as true/false."""
    kind = kind_of(node)
    expected = f"a string, number or boolean ({grammar.expected})"
    if kind == "bool":
        text = "true" if construct(r, node, key, expected) else "false"
    elif kind in ("str", "int", "float"):
        text = str(node.value)
    else:
        r.fail(node, key, expected)
    if not grammar.matches(text):
        too_long = grammar.max_len is not None and len(text) > grammar.max_len
        found = f"{show(text)} ({len(text)} characters)" if too_long else None
        r.fail(node, key, grammar.expected, found, suggestion=G.suggestion(grammar, text))
    return text
