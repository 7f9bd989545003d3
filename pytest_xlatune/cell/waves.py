"""Cell schema, the `waves` section: hand-written profiles, catalog waves and stack runs."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any

from yaml.nodes import Node

from pytest_xlatune.cell import grammar as G
from pytest_xlatune.cell import nodes as N
from pytest_xlatune.cell import sections
from pytest_xlatune.cell.nodes import Fields, kind_of, line_of, show, sub_key
from pytest_xlatune.cell.values import RESERVED_NAMES, STACK_PREFIX, CatalogWave, Profile, Stack

from . import catalog as C

PROFILE_KEYS = ("name", "xla_flags", "env", "overrides")
WAVES = (2, 3, 4)
WAVES_EXPECTED = "a wave number 2, 3 or 4 (wave 5 is pipeline_shapes)"
# A wave is a list of profiles, or a mapping of these keys (at least one of profiles/catalog/stack).
WAVE_KEYS = ("profiles", "catalog", "max", "stack")
WAVE_EXPECTED = "a list of profiles, or a mapping of profiles, catalog, max, stack"
PROFILE_EXPECTED = "a profile: a mapping of name and xla_flags, env or overrides"
STACK_MAX = 999  # it names the run (stack_top<k>); no cell has that many profiles
STACK_EXPECTED = f"true or an integer from 2 to {STACK_MAX} (how many winning profiles to combine)"

RESERVED_PATTERN = re.compile(re.escape(STACK_PREFIX) + "[0-9]+")  # the stack run's name


def profile(r: N.Ctx, node: Node, key: str, wave: int) -> Profile:
    if kind_of(node) == "map":  # `- catalog: fsdp` in a wave's list: a wave key, one level up
        for knode, _ in node.value:
            if knode.value in WAVE_KEYS and knode.value != "profiles":
                r.fail(
                    knode,
                    sub_key(key, str(knode.value)),
                    f"one of {', '.join(PROFILE_KEYS)} ({knode.value} is a key of the wave itself: "
                    f"`{wave}: {{{knode.value}: ...}}`, not of a profile in its list)",
                    f"{knode.value!r}",
                )
    fields = N.mapping(r, node, key, PROFILE_KEYS, expected=PROFILE_EXPECTED)
    if "name" not in fields:
        r.fail(node, sub_key(key, "name"), "a profile name", "no 'name' key")
    name_node, name_key = fields["name"][1], sub_key(key, "name")
    name = N.string(r, name_node, name_key, G.NAME)
    if name in RESERVED_NAMES or RESERVED_PATTERN.fullmatch(name):
        reserved = ", ".join(RESERVED_NAMES)
        r.fail(name_node, name_key, f"a name other than {reserved}, {STACK_PREFIX}N (xlatune's own runs)", show(name))
    claim(r, name, name_key, name_node)

    def read(field: str, reader: Callable[[N.Ctx, Node, str], Any]) -> Any:
        return reader(r, fields[field][1], sub_key(key, field)) if field in fields else ()

    flags = read("xla_flags", sections.xla_flags)
    env = read("env", sections.env)
    overrides = read("overrides", sections.overrides)
    if not (flags or env or overrides):
        r.fail(node, key, "at least one of xla_flags, env, overrides", "none of them")
    return Profile(name, wave, flags, env, overrides, line=line_of(node))


def claim(r: N.Ctx, name: str, key: str, node: Node, owner: str = "") -> None:
    """Profile names (hand-written, catalog, stack) are unique across all waves. `owner` is what
    made the name up ("catalog fsdp", "stack"; "" for a profile the cell wrote): a clash between a
    profile and a catalog candidate blames the profile, the one name the cell can change."""
    line = line_of(node)
    if name not in r.name_at:
        r.name_at[name] = (key, line, owner)
        return
    first_key, first_line, first = r.name_at[name]
    again = f"{name!r} again (first on line {first_line})"
    if owner == first == "":
        r.fail(node, key, "a profile name unique across all waves", again)
    if owner == first == "stack":
        r.fail(node, key, "a stack size unique across all waves", again)
    if owner and first:  # the same catalog twice, or two catalogs that share an entry
        catalog = owner.removeprefix("catalog ")
        if owner == first:
            r.fail(node, key, "each catalog once", f"{catalog!r} again (first on line {first_line})")
        r.fail(
            node,
            key,
            "catalogs that share no candidate (fsdp, pp and tp share entries: "
            "`catalog: hybrid` sweeps all three in one wave)",
            f"{catalog!r}, whose candidate {name!r} {first} (line {first_line}) has too",
        )
    at, at_key, source, source_line = (first_line, first_key, owner, line) if owner else (line, key, first, first_line)
    r.fail(at, at_key, f"a profile name that is not a candidate of {source} (line {source_line})", repr(name))


def waves(r: N.Ctx, node: Node, key: str) -> tuple[tuple[Profile, ...], tuple[CatalogWave, ...], tuple[Stack, ...]]:
    profiles: list[Profile] = []
    catalogs: list[CatalogWave] = []
    stacks: list[Stack] = []
    fields = N.mapping(
        r,
        node,
        key,
        key_kinds=("str", "int"),
        key_expected=WAVES_EXPECTED,
        expected="a mapping of wave numbers (2, 3, 4) to their profiles, e.g. {2: [{name: a, xla_flags: [...]}]}",
    )
    for wave, (knode, vnode) in fields.items():
        sub = sub_key(key, wave)
        # `2` and "2" share the text "2", so mapping() already refused the pair.
        if wave not in map(str, WAVES):
            r.fail(knode, sub, WAVES_EXPECTED, show(wave))
        if kind_of(vnode) == "null":  # every profile of the wave commented out
            continue
        items: Node | None = vnode
        body: Fields = {}
        if kind_of(vnode) == "map":
            body = N.mapping(r, vnode, sub, WAVE_KEYS)
            if "max" in body and "catalog" not in body:
                r.fail(
                    body["max"][0],
                    sub_key(sub, "max"),
                    "a 'catalog' key next to max (max caps a catalog's candidates)",
                    "no 'catalog' key",
                )
            if not {"profiles", "catalog", "stack"} & set(body):
                r.fail(vnode, sub, "at least one of profiles, catalog, stack", "none of them")
            items = body["profiles"][1] if "profiles" in body else None
        elif kind_of(vnode) != "seq":
            r.fail(vnode, sub, WAVE_EXPECTED)
        psub = sub_key(sub, "profiles") if body else sub
        if items is not None and kind_of(items) != "null":
            for i, item in enumerate(N.sequence(r, items, psub, "a list of profiles")):
                profiles.append(profile(r, item, f"{psub}[{i}]", int(wave)))
        if "catalog" in body:
            catalogs.append(catalog_wave(r, body, sub, int(wave)))
        if "stack" in body:
            stacks.append(stack(r, body["stack"][1], sub_key(sub, "stack"), int(wave)))
    return (
        tuple(sorted(profiles, key=lambda p: p.wave)),
        tuple(sorted(catalogs, key=lambda c: c.wave)),
        tuple(sorted(stacks, key=lambda s: s.wave)),
    )


def catalog_wave(r: N.Ctx, body: Fields, key: str, wave: int) -> CatalogWave:
    node, ckey = body["catalog"][1], sub_key(key, "catalog")
    known = C.names()
    expected = f"a flag catalog: one of {', '.join(known)}"
    name = N.string(r, node, ckey, expected=expected)
    if name not in known:
        close = [k for k in known if k == name.strip().lower()] or difflib.get_close_matches(name, known, n=1)
        r.fail(node, ckey, expected, suggestion=close[0] if close else None)
    limit = N.integer(r, body["max"][1], sub_key(key, "max"), 1) if "max" in body else None
    for candidate in C.get(name).candidates:
        claim(r, candidate.name, ckey, node, f"catalog {name}")
    return CatalogWave(wave, name, limit, line=line_of(node))


def stack(r: N.Ctx, node: Node, key: str, wave: int) -> Stack:
    if kind_of(node) == "bool" and N.construct(r, node, key, STACK_EXPECTED) is True:
        top = 2
    else:
        top = N.integer(r, node, key, 2, STACK_MAX, expected=STACK_EXPECTED)
    stack = Stack(wave, top, line=line_of(node))
    claim(r, stack.name, key, node, "stack")
    return stack
