"""Read a recipe lock by hand-checkable rules: every key of the type the gate uses, every
problem one LockError line naming the file, the key path, what was expected and what was found.

A lock is committed and edited by hand; the gate replays it on the cluster and prints its
values in the gate report. A string where the code expects one, a finite number, the cell
grammars for what is replayed: a lock that breaks them is refused before anything runs.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..cell import grammar
from ..cell.sections import PARALLELISM_EXPECTED, parse_parallelism
from ..errors import XlatuneError
from ..safefs import FileRefused, decode_utf8, read_bytes_regular

T = TypeVar("T")
Pair = tuple[str, str]
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # a newline, a terminal escape
TEXT_MAX = 4096  # a lock's free text (measured_on): one option value's limit
TGS_MAX = 1e9  # tokens/s/device: far above any accelerator; a lock's TGS is above 0 and below it
PCT_MAX = 1e6  # a percentage (a delta, an interval bound): within ±PCT_MAX


class LockError(XlatuneError):
    """The lock file is missing or unusable; one line naming the file and the key."""


def read_json(path: Path, schema: int) -> dict[str, Any]:
    """The lock's JSON object, its schema checked; LockError otherwise."""
    try:
        raw = read_bytes_regular(path, what="a recipe lock file")
        if raw is None:
            raise LockError(
                f"{path}: expected a recipe lock written by a finished sweep (run the sweep first), found no file"
            )
        data = json.loads(decode_utf8(path, raw), parse_constant=_no_constant)
    except FileRefused as error:
        raise LockError(str(error)) from None
    except OSError as error:
        raise LockError(f"{path}: expected a readable recipe lock, found {error.strerror or error}") from None
    except ValueError as error:
        raise LockError(f"{path}: expected JSON, found {error}") from None
    except RecursionError:
        raise LockError(f"{path}: expected JSON, found a document nested too deeply") from None
    if not isinstance(data, dict):
        raise LockError(f"{path}: expected a JSON object (a recipe lock), found {_kind(data)}")
    if data.get("schema") != schema or isinstance(data.get("schema"), bool):
        raise LockError(f"{path}: schema: expected {schema}, found {_shown(data.get('schema'))}")
    return data


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} (a lock holds finite numbers)")


class Reader:
    """Typed reads of one lock's JSON, each failure a LockError at its key path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, expected: str, found: str) -> LockError:
        return LockError(f"{self.path}: {key}: expected {expected}, found {found}")

    def field(self, data: dict[str, Any], key: str, at: str, read: Callable[[object, str], T], default: Any = ...) -> T:
        where = f"{at}.{key}" if at else key
        if key not in data:
            if default is not ...:
                return read(default, where)
            raise self.fail(where, "a key written by the sweep (write the lock again: rerun the sweep)", "none")
        return read(data[key], where)

    def text(self, value: object, key: str) -> str:
        if not isinstance(value, str):
            raise self.fail(key, "a string", _kind(value))
        if len(value) > TEXT_MAX or _CONTROL.search(value):
            raise self.fail(key, f"one line of at most {TEXT_MAX} characters, no control characters", _shown(value))
        return value

    def date(self, value: object, key: str) -> str:
        text = self.text(value, key)
        if not DATE.fullmatch(text):
            raise self.fail(key, "a date YYYY-MM-DD", _shown(text))
        return text

    def number(self, value: object, key: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, "a number", _shown(value) if isinstance(value, str) else _kind(value))
        if not math.isfinite(value):
            raise self.fail(key, "a finite number", _shown(value))
        return float(value)

    def tgs(self, value: object, key: str) -> float:
        """A throughput: above 0 and below TGS_MAX (the gate divides by it and prints it)."""
        number = self.number(value, key)
        if not 0 < number < TGS_MAX:
            raise self.fail(key, f"tokens/s/device above 0 and below {TGS_MAX:.0e}", _shown(value))
        return number

    def pct(self, value: object, key: str) -> float:
        number = self.number(value, key)
        if not -PCT_MAX <= number <= PCT_MAX:
            raise self.fail(key, f"a percentage within ±{PCT_MAX:.0e}", _shown(value))
        return number

    def optional(self, value: object, key: str, check: grammar.Grammar) -> str:
        """ "" (the backend did not say) or a text of `check`'s grammar (the cell's own)."""
        return "" if value == "" else self.checked(value, key, check)

    def nodelist(self, value: object, key: str) -> str:
        """ "" or a Slurm hostlist whose ranges run low-high, as the cell loader holds it."""
        text = self.optional(value, key, grammar.NODELIST)
        if backwards := grammar.backwards_range(text):
            raise self.fail(key, grammar.NODELIST_LOW_HIGH, f"{_shown(text)} (the range {backwards} runs backwards)")
        return text

    def parallelism(self, value: object, key: str) -> str:
        text = self.text(value, key)
        try:
            parse_parallelism(text)
        except ValueError:
            raise self.fail(key, PARALLELISM_EXPECTED, _shown(text)) from None
        return text

    def items(self, value: object, key: str) -> list[object]:
        if not isinstance(value, list):
            raise self.fail(key, "a list", _kind(value))
        return value

    def mapping(self, value: object, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, "a JSON object", _kind(value))
        return value

    def texts(self, value: object, key: str, check: grammar.Grammar | None = None) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(key, "a list of strings", _kind(value))
        return tuple(self.checked(v, f"{key}[{i}]", check) for i, v in enumerate(value))

    def pairs(
        self, value: object, key: str, name: grammar.Grammar, val: grammar.Grammar
    ) -> tuple[tuple[str, str], ...]:
        if not isinstance(value, list):
            raise self.fail(key, "a list of [name, value] pairs", _kind(value))
        out = []
        for i, pair in enumerate(value):
            if not isinstance(pair, list) or len(pair) != 2:
                raise self.fail(f"{key}[{i}]", "a [name, value] pair", _shown(pair))
            out.append((self.checked(pair[0], f"{key}[{i}][0]", name), self.checked(pair[1], f"{key}[{i}][1]", val)))
        return tuple(out)

    def checked(self, value: object, key: str, check: grammar.Grammar | None) -> str:
        text = self.text(value, key)
        if check is not None:
            try:
                check.check(text)
            except grammar.GrammarError:
                raise self.fail(key, check.expected, _shown(text)) from None
        return text


def _kind(value: object) -> str:
    kinds = {list: "a list", dict: "an object", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return kinds.get(type(value), "null")


def _shown(value: object) -> str:
    """A found value for a one-line message: repr, at most 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
