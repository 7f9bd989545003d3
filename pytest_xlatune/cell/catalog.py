"""The flag catalogs (catalog.yml): every candidate profile by catalog name, checked by the cell grammars.

A catalog wave (`waves: {2: {catalog: fsdp, max: 6}}`) names a catalog of this table; the cell
loader checks the name and sizes each candidate's JOB_NAME. Which candidates run, and in what
order, is the plan's (plan/catalog.py).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from .. import safeyaml
from ..errors import XlatuneError
from . import grammar as G

KINDS = ("all-gather", "reduce-scatter", "all-reduce", "collective-permute", "all-to-all")
ANY_COLLECTIVE = "collectives"
ALWAYS = ("compute", "memory")
MECHANISMS = (*KINDS, ANY_COLLECTIVE, *ALWAYS)


class CatalogError(XlatuneError, ValueError):
    """catalog.yml is malformed (a packaging bug, not a cell error)."""


@dataclass(frozen=True)
class Candidate:
    """One value of one catalog entry: a profile the plan can run."""

    name: str
    entry: str
    xla_flags: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    mechanism: str
    why: str


@dataclass(frozen=True)
class Catalog:
    name: str
    title: str
    candidates: tuple[Candidate, ...]


def _candidates(entry: Mapping[str, Any]) -> list[Candidate]:
    name, mechanism = str(entry["name"]), str(entry["mechanism"])
    if mechanism not in MECHANISMS:
        raise CatalogError(f"{name}: mechanism {mechanism!r} is not one of {', '.join(MECHANISMS)}")
    if "value" in entry:
        values = {"": str(entry["value"])}
    else:
        values = {str(label): str(value) for label, value in entry["values"].items()}
    out = []
    for label, value in values.items():
        flags = tuple(f"{flag}={value}" for flag in entry.get("flags", ()))
        env = ((str(entry["env"]), value),) if "env" in entry else ()
        profile = f"{name}_{label}" if label else name
        for flag in flags:
            G.XLA_FLAG.check(flag)
        for env_name, env_value in env:
            G.ENV_NAME.check(env_name)
            G.ENV_VALUE.check(env_value)
        G.NAME.check(profile)
        out.append(Candidate(profile, name, flags, env, mechanism, str(entry.get("why", ""))))
    return out


@functools.lru_cache(maxsize=1)
def catalogs() -> dict[str, Catalog]:
    """Every catalog of the package data, by name."""
    raw = safeyaml.load(resources.files("pytest_xlatune.cell").joinpath("catalog.yml").read_text("utf-8"))
    out: dict[str, Catalog] = {}
    for name, body in raw.items():  # includes name catalogs defined above them
        cands: list[Candidate] = []
        for included in body.get("include", ()):
            cands += [c for c in out[included].candidates if c.name not in {x.name for x in cands}]
        for entry in body.get("entries", ()):
            cands += _candidates(entry)
        if len({c.name for c in cands}) != len(cands):
            raise CatalogError(f"{name}: a candidate name is used twice")
        out[name] = Catalog(name, str(body["title"]), tuple(cands))
    return out


def names() -> tuple[str, ...]:
    return tuple(catalogs())


def get(name: str) -> Catalog:
    return catalogs()[name]


# What a flag or env var outside the catalogs acts on, from its name (the first pattern that
# matches; none: no mechanism known, so the evidence run says nothing of it).
_NAME_PATTERNS = (
    ("all_gather", "all-gather"),
    ("reduce_scatter", "reduce-scatter"),
    ("all_reduce", "all-reduce"),
    ("collective_permute", "collective-permute"),
    ("p2p", "collective-permute"),
    ("all_to_all", "all-to-all"),
    ("collective", ANY_COLLECTIVE),
    ("async", ANY_COLLECTIVE),
    ("latency_hiding", ANY_COLLECTIVE),
    ("nccl_", ANY_COLLECTIVE),
    ("rccl_", ANY_COLLECTIVE),
)


@functools.lru_cache(maxsize=1)
def _known() -> dict[str, str]:
    """Every catalog flag and env var name → its entry's mechanism (the first catalog's; an entry
    setting one name before one setting several: `agrs_combine` acts on all-gather, its
    reduce-scatter flag alone on reduce-scatter)."""
    found: dict[str, str] = {}
    candidates = [c for catalog in catalogs().values() for c in catalog.candidates]
    for c in sorted(candidates, key=lambda c: len(c.xla_flags) + len(c.env) > 1):
        for name in (*(f.split("=", 1)[0] for f in c.xla_flags), *(k for k, _ in c.env)):
            found.setdefault(name, c.mechanism)
    return found


def mechanisms_of(xla_flags: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """What a profile's settings act on: each flag's or env var's catalog mechanism, else the one
    its name says (`--xla_gpu_all_gather_…` → all-gather, `NCCL_…` → collectives); () when none
    is known. A flag disabling HLO passes acts on what its pass names say."""
    found: list[str] = []
    for name, value in [(f.partition("=")[0], f.partition("=")[2]) for f in xla_flags] + list(env):
        known = _known().get(name) if name != "--xla_disable_hlo_passes" else None
        text = (name if name != "--xla_disable_hlo_passes" else value).lower().replace("-", "_")
        mechanism = known or next((m for pattern, m in _NAME_PATTERNS if pattern in text), None)
        if mechanism is not None and mechanism not in found:
            found.append(mechanism)
    return tuple(found)
