"""The playbook's overrides read onto a `Playbook`: a cell's `policy:` section, the ini option
`xlatune_policy`; a wrong value is one `PolicyError` line naming the key and what was expected."""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import yaml

from .. import safeyaml
from ..errors import XlatuneError
from .diagnosis import FailureClass
from .playbook import DEFAULT_PLAYBOOK, Playbook, Remedy, Rule, StopOn

__all__ = ["PolicyError", "playbook_from_mapping", "playbook_from_text"]


class PolicyError(XlatuneError, ValueError):
    """A playbook override is wrong; the message names the key and says what was expected."""


_SETTINGS = {
    "max_retries_per_job": "an integer ≥ 0",
    "resume_permitted": "true or false",
    "max_failed_nodes_per_wave": "an integer ≥ 1",
}
_RULE_KEYS = ("action", "retries", "exhausted", "stop_on", "stop_after", "cancel_on_sight", "wait_s", "recovery")


def playbook_from_text(text: str, base: Playbook = DEFAULT_PLAYBOOK, source: str = "xlatune_policy") -> Playbook:
    """Parse YAML or JSON text (the ini option) into a Playbook on top of `base`."""
    try:
        data = safeyaml.load(text) if text.strip() else None
    except safeyaml.AliasRefused as exc:
        raise PolicyError(exc.one_line(source)) from None
    except yaml.MarkedYAMLError as exc:  # the problem ("found unhashable key"), not its context
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark else source
        raise PolicyError(f"{where}: not valid YAML/JSON: {safeyaml.problem(exc)}") from None
    except yaml.YAMLError as exc:
        raise PolicyError(f"{source}: not valid YAML/JSON: {str(exc).splitlines()[0]}") from None
    return base if data is None else playbook_from_mapping(data, base, source)


def playbook_from_mapping(mapping: Any, base: Playbook = DEFAULT_PLAYBOOK, source: str = "policy") -> Playbook:
    """Validate `{class: {retries: 3}, setting: value}` and apply it on top of `base`."""
    if not isinstance(mapping, Mapping):
        raise PolicyError(f"{source}: expected a mapping of failure class → settings, got {type(mapping).__name__}")
    classes = {c.value: c for c in FailureClass}
    settings: dict[str, Any] = {}
    rules = dict(base.rules)
    for key, value in mapping.items():
        where = f"{source}.{_key(key)}"
        if key in _SETTINGS:
            settings[key] = _setting(where, key, value)
        elif key in classes:
            rules[classes[key]] = _rule(where, base.rule(classes[key]), value)
        else:
            close = difflib.get_close_matches(str(key), [*classes, *_SETTINGS], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise PolicyError(
                f"{where}: unknown key; expected a failure class ({', '.join(classes)}) "
                f"or a setting ({', '.join(_SETTINGS)}){hint}"
            )
    return dataclasses.replace(base, rules=MappingProxyType(rules), **settings)


def _setting(where: str, key: str, value: Any) -> Any:
    if key == "resume_permitted":
        if not isinstance(value, bool):
            raise PolicyError(f"{where}: expected true or false, got {_shown(value)}")
        return value
    return _int(where, value, 1 if key == "max_failed_nodes_per_wave" else 0)


def _rule(where: str, rule: Rule, value: Any) -> Rule:
    if not isinstance(value, Mapping):
        raise PolicyError(f"{where}: expected a mapping with keys {', '.join(_RULE_KEYS)}, got {_shown(value)}")
    changes: dict[str, Any] = {}
    for key, item in value.items():
        at = f"{where}.{_key(key)}"
        if key in ("action", "exhausted"):
            changes[key] = _enum(at, Remedy, item)
        elif key == "stop_on":
            changes[key] = _enum(at, StopOn, item)
        elif key == "retries":
            changes[key] = None if item is None else _int(at, item, 0)
        elif key == "stop_after":
            changes[key] = None if item is None else _number(at, item, above=0)
        elif key == "wait_s":
            changes[key] = _number(at, item, above=None)
        elif key == "cancel_on_sight":
            if not isinstance(item, bool):
                raise PolicyError(f"{at}: expected true or false, got {_shown(item)}")
            changes[key] = item
        elif key == "recovery":
            changes[key] = str(item)
        else:
            raise PolicyError(f"{at}: unknown key; expected one of {', '.join(_RULE_KEYS)}")
    if (
        "stop_after" in changes
        and changes["stop_after"] is not None
        and "stop_on" not in changes
        and rule.stop_on is StopOn.NEVER
    ):
        changes["stop_on"] = StopOn.IN_A_ROW  # `stop_after: N` alone: N in a row
    if changes.get("stop_after", 0) is None and "stop_on" not in changes:
        changes["stop_on"] = StopOn.NEVER  # `stop_after: null` switches the trigger off
    new = dataclasses.replace(rule, **changes)
    if new.stop_on is not StopOn.NEVER and new.stop_after is None:
        raise PolicyError(f"{where}.stop_after: stop_on {new.stop_on.value} needs a number")
    if (
        new.stop_on in (StopOn.IN_A_ROW, StopOn.FAILED_RESUMES)
        and new.stop_after is not None
        and new.stop_after != int(new.stop_after)
    ):
        raise PolicyError(f"{where}.stop_after: expected a whole count, got {new.stop_after:g}")
    retries, limit = new.retries, new.stop_after
    if new.stop_on is StopOn.IN_A_ROW and retries is not None and limit is not None:
        if "retries" not in changes and "stop_after" in changes:
            new = dataclasses.replace(new, retries=int(limit) - 1)  # retry up to the stop
        elif retries + 1 < limit:
            raise PolicyError(
                f"{where}.stop_after: {limit:g} in a row is never reached with retries "
                f"{retries} (the item gives up at {retries + 1} in a row); "
                f"raise retries to {int(limit) - 1}"
            )
    return new


def _enum(where: str, enum: type[Remedy] | type[StopOn], value: Any) -> Any:
    try:
        return enum(value)
    except ValueError:
        raise PolicyError(f"{where}: expected one of {', '.join(m.value for m in enum)}, got {_shown(value)}") from None


def _int(where: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise PolicyError(f"{where}: expected an integer ≥ {low}, got {_shown(value)}")
    return value


def _number(where: str, value: Any, above: float | None) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or (above is not None and value <= above)
        or value < 0
    ):
        bound = f"> {above:g}" if above is not None else "≥ 0"
        raise PolicyError(f"{where}: expected a number {bound}, got {_shown(value)}")
    return float(value)


def _shown(value: object) -> str:
    """A found value for the one-line error: repr, at most 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _key(key: object) -> str:
    """A key of the policy in a key path: its control characters escaped, at most 60 characters."""
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(key))
    return text if len(text) <= 60 else text[:57] + "..."
