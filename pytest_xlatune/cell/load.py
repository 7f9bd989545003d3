"""Load a cell YAML file into frozen dataclasses; every error names file, line, key, expectation."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import yaml
from yaml.nodes import Node

from pytest_xlatune.plan import catalog as C
from pytest_xlatune.cell import schema as S
from pytest_xlatune.cell import grammar as G
from pytest_xlatune.cell.schema import Fields, describe, kind_of, line_of, show, sub_key
from pytest_xlatune.cell.waves import WaveReader
from pytest_xlatune.judge.policy import PolicyError, policy_from_mapping
from pytest_xlatune.cell.model import (
    Backend, BackendKind, Cell, ClusterSlot, ConfigTag, EnvFileEntry, Parallelism, PipelineShape,
    Thresholds,
)


class CellError(Exception):
    """A cell file is invalid; `line` is 1-based (0 when the file could not be read)."""

    def __init__(
        self, path: Path, line: int, key: str, expected: str, found: str,
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
        text = f"{self.path}:{self.line}: {self.key}: expected {self.expected}, found {self.found}"
        if self.suggestion:
            text += f" (did you mean {self.suggestion!r}?)"
        return text.replace("\r", "\\r").replace("\n", "\\n")


def load_cell(path: Path) -> Cell:
    """Read, validate and freeze one cell file; raise CellError at the first problem."""
    path = Path(path)
    return _Reader(path).cell(_compose(path, _read(path)))


def _read(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        found = exc.strerror or repr(exc)
        raise CellError(path, 0, "file", "a readable cell file", found) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CellError(path, line, "file", "UTF-8 text", f"byte 0x{data[exc.start]:02x}") from None


def _compose(path: Path, text: str) -> Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        found = exc.problem or exc.context or "a syntax error"
        found = found.removeprefix("found ")  # "found unexpected end of stream"
        raise CellError(path, mark.line + 1 if mark else 0, "yaml", "valid YAML", found) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        char = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        raise CellError(path, line, "yaml", "valid YAML", f"{exc.reason} ({char})") from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise CellError(path, 0, "yaml", "valid YAML", type(exc).__name__) from None


class _Reader(WaveReader):
    """Read the cell's sections; every failure raises CellError at a node's line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name_at = {}

    def fail(
        self, at: Node | int, key: str, expected: str, found: str | None = None,
        suggestion: str | None = None,
    ) -> NoReturn:
        line = at if isinstance(at, int) else line_of(at)
        if found is None:
            assert not isinstance(at, int)
            found = describe(at)
        raise CellError(self.path, line, key or "cell", expected, found, suggestion)

    def overrides(self, node: Node, key: str) -> tuple[tuple[str, str], ...]:
        pairs = []
        for name, (knode, vnode) in self.mapping(node, key).items():
            sub = sub_key(key, name)
            if not G.OVERRIDE_KEY.matches(name):
                self.fail(knode, sub, G.OVERRIDE_KEY.expected, show(name))
            if name in S.OWNED_KEYS:
                self.fail(knode, sub, f"a key xlatune does not own ({S.OWNED_KEYS[name]})",
                          show(name))
            if name.startswith(S.ENV_PASSTHROUGH_PREFIX):
                self.fail(knode, sub, "a MaxText key (set env vars in a profile's env)", show(name))
            pairs.append((name, self.render(vnode, sub, G.OVERRIDE_VALUE)))
        return tuple(pairs)

    def env(self, node: Node, key: str) -> tuple[tuple[str, str], ...]:
        pairs = []
        for name, (knode, vnode) in self.mapping(node, key).items():
            sub = sub_key(key, name)
            if not G.ENV_NAME.matches(name):
                self.fail(knode, sub, G.ENV_NAME.expected, show(name))
            if name in S.OWNED_ENV:
                self.fail(knode, sub, f"an env var xlatune does not own ({S.OWNED_ENV[name]})",
                          show(name))
            pairs.append((name, self.render(vnode, sub, G.ENV_VALUE)))
        return tuple(pairs)

    def xla_flags(self, node: Node, key: str) -> tuple[str, ...]:
        flags: list[str] = []
        first: dict[str, int] = {}
        for i, item in enumerate(self.sequence(node, key, "a list of XLA flags")):
            flag = self.string(item, f"{key}[{i}]", G.XLA_FLAG)
            name = G.split_xla_flag(flag)[0]
            if name in first:
                self.fail(item, f"{key}[{i}]",
                          "each XLA flag once per profile (XLA keeps the last)",
                          f"{name} again (first at {key}[{first[name]}])")
            first[name] = i
            flags.append(flag)
        return tuple(flags)

    def env_file(self, node: Node, key: str) -> tuple[EnvFileEntry, ...]:
        entries: list[EnvFileEntry] = []
        first: dict[str, int] = {}
        for i, item in enumerate(self.sequence(node, key, "a list of env-file entries")):
            sub = f"{key}[{i}]"
            fields = self.mapping(item, sub, S.ENV_FILE_KEYS)
            forms = [form for form in ("flag", "env") if form in fields]
            if len(forms) != 1:
                self.fail(item, sub, "exactly one of 'flag' or 'env'",
                          " and ".join(forms) or "neither")
            form = forms[0]
            if "image_default" not in fields:
                self.fail(item, sub_key(sub, "image_default"),
                          "the image's default value (null for an env var the image leaves unset)",
                          "no 'image_default' key")
            text_node, default_node = fields[form][1], fields["image_default"][1]
            default: str | None
            text_key, default_key = sub_key(sub, form), sub_key(sub, "image_default")
            if form == "flag":
                name, value = G.split_xla_flag(self.string(text_node, text_key, G.XLA_FLAG))
                default = self.render(default_node, default_key, G.XLA_FLAG_VALUE)
            else:
                expected = f"NAME=value ({G.ENV_NAME.expected}; value {G.ENV_VALUE.expected})"
                text = self.string(text_node, text_key, expected=expected)
                name, eq, value = text.partition("=")
                if not (eq and G.ENV_NAME.matches(name) and G.ENV_VALUE.matches(value)):
                    self.fail(text_node, text_key, expected)
                default = (None if kind_of(default_node) == "null" else
                           self.render(default_node, default_key, G.ENV_VALUE))
            if name in first:
                self.fail(text_node, text_key, "each setting once",
                          f"{name} again (first on line {first[name]})")
            first[name] = line_of(text_node)
            entries.append(EnvFileEntry("xla" if form == "flag" else "env", name, value, default))
        return tuple(entries)

    def config_tags(self, node: Node, key: str) -> tuple[ConfigTag, ...]:
        tags = []
        for name, (knode, vnode) in self.mapping(node, key).items():
            if not G.NAME.matches(name):
                self.fail(knode, sub_key(key, name), G.NAME.expected, show(name))
            empty = kind_of(vnode) == "null"
            tags.append(ConfigTag(name, () if empty else self.overrides(vnode, sub_key(key, name))))
        if not tags:
            self.fail(node, key, "at least one config tag (name: {overrides})", "an empty mapping")
        return tuple(tags)

    def pipeline_shapes(self, node: Node, key: str) -> tuple[PipelineShape, ...]:
        shapes: list[PipelineShape] = []
        for i, item in enumerate(self.sequence(node, key, "a list of pipeline shapes")):
            sub = f"{key}[{i}]"
            fields = self.mapping(item, sub, S.SHAPE_KEYS)
            if "microbatches" not in fields:
                self.fail(item, sub_key(sub, "microbatches"), "an integer >= 1",
                          "no 'microbatches' key")
            mb = self.integer(fields["microbatches"][1], sub_key(sub, "microbatches"), 1)
            v = 1
            if "virtual_stages" in fields:
                v = self.integer(fields["virtual_stages"][1], sub_key(sub, "virtual_stages"), 1)
            shape = PipelineShape(mb, v, line=line_of(item))
            twin = next((s for s in shapes if (s.microbatches, s.virtual_stages) == (mb, v)), None)
            if twin:
                self.fail(item, sub, "each (microbatches, virtual_stages) once",
                          f"{shape.name} again (first on line {twin.line})")
            shapes.append(shape)
        return tuple(shapes)

    def thresholds(self, node: Node, key: str) -> Thresholds:
        values: dict[str, Any] = {}
        for name, (_, vnode) in self.mapping(node, key, S.THRESHOLD_KEYS).items():
            sub = sub_key(key, name)
            if name in S.THRESHOLD_COUNTS:
                values[name] = self.integer(vnode, sub, S.THRESHOLD_COUNTS[name])
            else:
                values[name] = self.number(vnode, sub)
        return Thresholds(**values)

    def backend(self, node: Node, key: str) -> Backend:
        fields = self.mapping(node, key)
        kind = "local"
        if "kind" in fields:
            kind_node, kinds = fields["kind"][1], f"one of {', '.join(S.BACKEND_KINDS)}"
            kind = self.string(kind_node, "backend.kind", expected=kinds)
            if kind not in S.BACKEND_KINDS:
                close = difflib.get_close_matches(kind, S.BACKEND_KINDS, n=1)
                self.fail(kind_node, "backend.kind", kinds, suggestion=close[0] if close else None)
        allowed = S.BACKEND_OPTIONS[kind]
        options = []
        for name, (knode, vnode) in fields.items():
            sub = sub_key(key, name)
            if name == "kind":
                continue
            if name not in allowed:
                close = difflib.get_close_matches(name, list(allowed), n=1)
                self.fail(knode, sub, f"an option of backend kind {kind}: {', '.join(allowed)}",
                          f"unknown option {name!r}", close[0] if close else None)
            options.append((name, self.option(vnode, sub, allowed[name])))
        return Backend(BackendKind(kind), tuple(sorted(options)))

    def option(self, node: Node, key: str, kind: str) -> str:
        if kind == "bool":
            if kind_of(node) != "bool":
                self.fail(node, key, "true or false")
            return "true" if self.construct(node, key, "true or false") else "false"
        if kind == "time":
            # Unquoted 45:00 is a YAML 1.1 base-60 integer (2700); the text as written is wanted.
            if kind_of(node) not in ("str", "int") or not S.is_slurm_time(str(node.value)):
                self.fail(node, key, S.TIME_EXPECTED)
            return str(node.value)
        if kind == "partition":
            return self.string(node, key, G.PARTITION)
        what = "a path" if kind == "path" else "text"
        return self.string(node, key, expected=f"{what} on one line")

    def parallelism(self, node: Node, key: str) -> Parallelism:
        text = self.string(node, key, expected=S.PARALLELISM_EXPECTED)
        try:
            return Parallelism(S.parse_parallelism(text))
        except ValueError as exc:
            self.fail(node, key, S.PARALLELISM_EXPECTED, str(exc))

    # -- the whole cell ------------------------------------------------------------------------

    def cell(self, root: Node | None) -> Cell:
        if root is None:
            self.fail(1, "cell", "a mapping of cell keys", "an empty document")
        if kind_of(root) != "map":
            self.fail(root, "cell", "a mapping of cell keys")
        self.check_tags(root, "", set())
        top = self.mapping(root, "", S.TOP_KEYS)
        if "schema" in top:
            self.integer(top["schema"][1], "schema", S.SCHEMA_VERSION, S.SCHEMA_VERSION,
                         expected=f"schema version {S.SCHEMA_VERSION}")
        readers: dict[str, Callable[[Node, str], Any]] = {
            "schema": lambda n, k: None,
            "model_tag": lambda n, k: self.string(n, k, G.MODEL_TAG),
            "nodelist": lambda n, k: self.string(n, k, G.NODELIST),
            "partition": lambda n, k: self.string(n, k, G.PARTITION),
            "nodes": lambda n, k: self.integer(n, k, 1),
            "parallelism": self.parallelism,
            "pdbs": lambda n, k: None if kind_of(n) == "null" else self.integer(n, k, 1),
            "steps": lambda n, k: self.integer(n, k, S.MIN_STEPS, expected=S.STEPS_EXPECTED),
            "baseline_repeats": lambda n, k: self.integer(n, k, 1, S.MAX_BASELINE_REPEATS),
            "overrides": self.overrides,
            "config_tags": self.config_tags,
            "env_file": self.env_file,
            "waves": self.waves,
            "pipeline_shapes": self.pipeline_shapes,
            "thresholds": self.thresholds,
            "backend": self.backend,
            "image": lambda n, k: "" if kind_of(n) == "null" else self.string(n, k),
            "hardware": lambda n, k: "" if kind_of(n) == "null" else self.string(n, k),
            "policy": self.policy,
        }
        values = {name: readers[name](vnode, name) for name, (_, vnode) in top.items()}
        for required in ("model_tag", "parallelism"):
            if required not in values:
                expected = {"model_tag": G.MODEL_TAG.expected}.get(required, S.PARALLELISM_EXPECTED)
                self.fail(root, required, expected, f"no {required!r} key")
        slot = self.slot(root, top, values)
        for name in ("schema", "nodelist", "partition", "nodes"):
            values.pop(name, None)
        profiles, catalog_waves, stacks = values.pop("waves", ((), (), ()))
        parallelism: Parallelism = values["parallelism"]
        if "pipeline_shapes" in values and parallelism.size("PP") <= 1:
            self.fail(top["pipeline_shapes"][0], "pipeline_shapes",
                      "a PP axis > 1 in parallelism (wave 5 tunes pipelines only)",
                      f"parallelism {parallelism.text}")
        cell = Cell(path=self.path, slot=slot, profiles=profiles, catalog_waves=catalog_waves,
                    stacks=stacks, **values)
        self.check_job_names(cell)
        return cell

    def policy(self, node: Node, key: str) -> str:
        """Playbook overrides (see policy.py), validated here, kept as JSON text."""
        raw = yaml.safe_load(yaml.serialize(node))
        try:
            policy_from_mapping(raw, source=key)
        except PolicyError as error:
            self.fail(node, key, "playbook overrides (README: Failure handling)", str(error))
        return json.dumps(raw, sort_keys=True)

    def slot(self, root: Node, top: Fields, values: dict[str, Any]) -> ClusterSlot:
        present = [name for name in ("nodelist", "partition", "nodes") if name in top]
        expected = "exactly one cluster slot: nodelist | partition + nodes | nodes"
        if not present:
            self.fail(root, "nodes", expected, "none of nodelist, partition, nodes")
        if "nodelist" in present and len(present) > 1:
            last = max(present, key=lambda name: line_of(top[name][0]))
            self.fail(top[last][0], last, expected, " and ".join(present))
        if present == ["partition"]:
            self.fail(top["partition"][0], "partition",
                      "nodes alongside partition (partition + nodes)", "no 'nodes' key")
        return ClusterSlot(values.get("nodelist"), values.get("partition"), values.get("nodes"))

    def check_job_names(self, cell: Cell) -> None:
        """Fail early where maxtext-slurm would refuse the submission for its JOB_NAME length.

        Its JOB_NAME is `JAX-<model>-<profile>-_env_TUNE_PROFILE_<arm>`, the arm being the
        profile or `<profile>.<config tag>` (every other setting goes into the arm, not the
        name); pre-flight checks it again with the model name resolved in the checkout. Other
        backends have no such limit."""
        if cell.backend.kind is not BackendKind.MAXTEXT_SLURM:
            return
        tag = max((t.name for t in cell.config_tags), key=len)

        def size(name: str) -> int:
            return G.job_name_bytes(G.job_name(cell.model_tag, name, [f"_env_TUNE_PROFILE={name}.{tag}"]))

        expected = f"a JOB_NAME of at most {G.JOB_NAME_MAX} bytes (maxtext-slurm's limit)"
        names = [p.name for p in cell.profiles]
        names += [c.name for group in cell.catalog_waves for c in C.get(group.catalog).candidates]
        for name in names:
            if (n := size(name)) > G.JOB_NAME_MAX:
                key, line = self.name_at[name]
                self.fail(line, key, expected, f"{n} bytes for profile {name!r} (it is the exp tag and the "
                                               f"TUNE_PROFILE arm): shorten it by {n - G.JOB_NAME_MAX}")
