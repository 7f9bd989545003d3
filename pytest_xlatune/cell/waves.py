"""Cell schema, the `waves` section: hand-written profiles, catalog waves and stack runs."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from yaml.nodes import Node

from pytest_xlatune.plan import catalog as C
from pytest_xlatune.cell import schema as S
from pytest_xlatune.cell import grammar as G
from pytest_xlatune.cell.schema import Fields, kind_of, line_of, show, sub_key
from pytest_xlatune.cell.model import CatalogWave, Profile, Stack


class WaveReader(S.NodeReader):
    """Reads `waves`; the cell reader supplies xla_flags, env and overrides."""

    name_at: dict[str, tuple[str, int]]  # profile name -> (key, line of its name)

    def xla_flags(self, node: Node, key: str) -> tuple[str, ...]:
        raise NotImplementedError

    def env(self, node: Node, key: str) -> tuple[tuple[str, str], ...]:
        raise NotImplementedError

    def overrides(self, node: Node, key: str) -> tuple[tuple[str, str], ...]:
        raise NotImplementedError

    def profile(self, node: Node, key: str, wave: int) -> Profile:
        fields = self.mapping(node, key, S.PROFILE_KEYS)
        if "name" not in fields:
            self.fail(node, sub_key(key, "name"), "a profile name", "no 'name' key")
        name_node, name_key = fields["name"][1], sub_key(key, "name")
        name = self.string(name_node, name_key, G.NAME)
        if name in S.RESERVED_NAMES or S.RESERVED_PATTERN.fullmatch(name):
            reserved = ", ".join(S.RESERVED_NAMES)
            self.fail(name_node, name_key,
                      f"a name other than {reserved}, stack_topN (xlatune's own runs)", show(name))
        self.claim(name, name_key, name_node)

        def read(field: str, reader: Callable[[Node, str], Any]) -> Any:
            return reader(fields[field][1], sub_key(key, field)) if field in fields else ()

        flags = read("xla_flags", self.xla_flags)
        env = read("env", self.env)
        overrides = read("overrides", self.overrides)
        if not (flags or env or overrides):
            self.fail(node, key, "at least one of xla_flags, env, overrides", "none of them")
        return Profile(name, wave, flags, env, overrides, line=line_of(node))

    def claim(self, name: str, key: str, node: Node, what: str = "a profile name") -> None:
        """Profile names (hand-written, catalog, stack) are unique across all waves."""
        if name in self.name_at:
            first_line = self.name_at[name][1]
            self.fail(node, key, f"{what} unique across all waves",
                      f"{name!r} again (first on line {first_line})")
        self.name_at[name] = (key, line_of(node))

    def waves(self, node: Node, key: str) -> tuple[tuple[Profile, ...], tuple[CatalogWave, ...],
                                                   tuple[Stack, ...]]:
        profiles: list[Profile] = []
        catalogs: list[CatalogWave] = []
        stacks: list[Stack] = []
        fields = self.mapping(node, key, key_kinds=("str", "int"), key_expected=S.WAVES_EXPECTED)
        for wave, (knode, vnode) in fields.items():
            sub = sub_key(key, wave)
            # `2` and "2" share the text "2", so mapping() already refused the pair.
            if wave not in map(str, S.WAVES):
                self.fail(knode, sub, S.WAVES_EXPECTED, show(wave))
            if kind_of(vnode) == "null":  # every profile of the wave commented out
                continue
            items: Node | None = vnode
            body: Fields = {}
            if kind_of(vnode) == "map":
                body = self.mapping(vnode, sub, S.WAVE_KEYS)
                if "max" in body and "catalog" not in body:
                    self.fail(body["max"][0], sub_key(sub, "max"),
                              "a 'catalog' key next to max (max caps a catalog's candidates)",
                              "no 'catalog' key")
                if not {"profiles", "catalog", "stack"} & set(body):
                    self.fail(vnode, sub, "at least one of profiles, catalog, stack", "none of them")
                items = body["profiles"][1] if "profiles" in body else None
            elif kind_of(vnode) != "seq":
                self.fail(vnode, sub, S.WAVE_EXPECTED)
            psub = sub_key(sub, "profiles") if body else sub
            if items is not None and kind_of(items) != "null":
                for i, item in enumerate(self.sequence(items, psub, "a list of profiles")):
                    profiles.append(self.profile(item, f"{psub}[{i}]", int(wave)))
            if "catalog" in body:
                catalogs.append(self.catalog_wave(body, sub, int(wave)))
            if "stack" in body:
                stacks.append(self.stack(body["stack"][1], sub_key(sub, "stack"), int(wave)))
        return (tuple(sorted(profiles, key=lambda p: p.wave)),
                tuple(sorted(catalogs, key=lambda c: c.wave)), tuple(sorted(stacks, key=lambda s: s.wave)))

    def catalog_wave(self, body: Fields, key: str, wave: int) -> CatalogWave:
        node, ckey = body["catalog"][1], sub_key(key, "catalog")
        known = C.names()
        expected = f"a flag catalog: one of {', '.join(known)}"
        name = self.string(node, ckey, expected=expected)
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            self.fail(node, ckey, expected, suggestion=close[0] if close else None)
        limit = self.integer(body["max"][1], sub_key(key, "max"), 1) if "max" in body else None
        for candidate in C.get(name).candidates:
            self.claim(candidate.name, ckey, node, "a catalog candidate name")
        return CatalogWave(wave, name, limit, line=line_of(node))

    def stack(self, node: Node, key: str, wave: int) -> Stack:
        if kind_of(node) == "bool" and self.construct(node, key, S.STACK_EXPECTED) is True:
            top = 2
        else:
            top = self.integer(node, key, 2, expected=S.STACK_EXPECTED)
        stack = Stack(wave, top, line=line_of(node))
        self.claim(stack.name, key, node, "a stack size")
        return stack
