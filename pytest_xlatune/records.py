"""One frozen dataclass per store event, with its JSON form (the store's lines are these).

A store line is `{"schema": 1, "event": <EVENT>, "time": <seconds>, **record.to_json(), "sum": ...}`
(store_lines.py adds the envelope and the checksum). `to_json` gives exactly the fields the line
holds; a field marked `optional` is left out while it has its default (older lines lack it, and a
run without a compilation cache writes no `compile_cache`). `from_json` reads a line's fields
back (the envelope and unknown keys are ignored, missing ones take their defaults), so
`R.from_json(r.to_json()) == r` for every record. RECORDS maps each event name to its class: the
store writes a record (`ResultStore.write`) and refuses an event it does not name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from types import MappingProxyType
from typing import ClassVar, TypeAlias, TypeVar

from .errors import XlatuneError
from .results import JobResult

# A JSON value as `json.loads` gives it back.
Json: TypeAlias = "str | int | float | bool | list[Json] | dict[str, Json] | None"
JsonObject = dict[str, Json]
R = TypeVar("R", bound="Record")


class RecordError(XlatuneError):
    """A store record of an event kind records.py does not know (a programming error)."""


def optional() -> dict[str, bool]:
    """Field metadata: left out of the line while the field has its default."""
    return {"optional": True}


@dataclass(frozen=True)
class Record:
    """A store event's fields; subclasses set EVENT."""

    EVENT: ClassVar[str] = ""

    def to_json(self) -> JsonObject:
        """The line's fields (without the envelope: schema, event, time, sum)."""
        out: JsonObject = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.metadata.get("optional") and value == _default(f):
                continue
            out[f.name] = _json(value)
        return out

    @classmethod
    def from_json(cls: type[R], record: Mapping[str, object]) -> R:
        """Read a line's fields back (the envelope and keys the class does not name are ignored)."""
        values = {
            f.name: _tuples(record[f.name]) if str(f.type).startswith("tuple") else record[f.name]
            for f in fields(cls)
            if f.name in record
        }
        return cls(**values)


def _default(f: Field[object]) -> object:
    if f.default is not MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not MISSING else MISSING


def _tuples(value: object) -> object:
    """JSON's lists as the tuples a frozen record holds (nested too: env pairs)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def _json(value: object) -> Json:
    """A field's value as JSON holds it (tuples as lists; everything else as written)."""
    if isinstance(value, (tuple, list)):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)  # as json.dumps(default=str) wrote it


@dataclass(frozen=True)
class SweepOpened(Record):
    """The cell's frozen nodelist and backend (first run of the cell, or a fresh baseline)."""

    EVENT: ClassVar[str] = "sweep"
    nodelist: str
    backend: str = ""
    model_tag: str = ""
    parallelism: str = ""


@dataclass(frozen=True)
class Environment(Record):
    """What each image ran on, as the local backend's pre-flight saw it (a lock's measured_on)."""

    EVENT: ClassVar[str] = "environment"
    images: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Inventory(Record):
    """maxtext-slurm's pre-flight inventory: gpu.yml, the deployed env file, container_env.sh,
    a prior tuning doc, the compilation cache root (launch/maxtext/launcher.py)."""

    EVENT: ClassVar[str] = "inventory"
    checkout: str = ""
    model_tag: str = ""
    model_name: str = ""
    sweep_id: str = ""
    gpu_yml: Mapping[str, object] = field(default_factory=dict)
    env_file: Mapping[str, object] = field(default_factory=dict)
    container_env: Mapping[str, object] = field(default_factory=dict)
    tuning_md: Mapping[str, object] = field(default_factory=dict)
    compile_cache: Mapping[str, object] = field(default_factory=dict, metadata=optional())


@dataclass(frozen=True)
class Submitting(Record):
    """A submission about to be made, with its mark, before the scheduler is asked (engine/recover.py)."""

    EVENT: ClassVar[str] = "submitting"
    key: str
    mark: str
    job_name: str
    item: str = ""
    compile_cache: str = field(default="", metadata=optional())


@dataclass(frozen=True)
class Submitted(Record):
    """A job id for a run key: a rerun re-attaches to it instead of submitting again."""

    EVENT: ClassVar[str] = "submitted"
    key: str
    job_id: str | int  # int in stores of old versions
    item: str = ""
    log_path: str = ""
    job_dir: str = ""
    handle: str = ""
    mark: str = ""
    recovered: bool = field(default=False, metadata=optional())
    compile_cache: str = field(default="", metadata=optional())


@dataclass(frozen=True)
class Unsubmitted(Record):
    """A `submitting` mark the rerun found no job for: the run is submitted again."""

    EVENT: ClassVar[str] = "unsubmitted"
    key: str
    mark: str
    item: str = ""


@dataclass(frozen=True)
class Result(Record):
    """A finished job (JobResult's fields)."""

    EVENT: ClassVar[str] = "result"
    result: JobResult

    def to_json(self) -> JsonObject:
        return {k: _json(v) for k, v in self.result.to_dict().items()}

    @classmethod
    def from_json(cls: type[R], record: Mapping[str, object]) -> R:
        return cls(**{"result": JobResult.from_dict(dict(record))})


@dataclass(frozen=True)
class Attempt(Result):
    """A failed job the playbook retried (the item's final `result` comes later)."""

    EVENT: ClassVar[str] = "attempt"


@dataclass(frozen=True)
class Cancelled(Record):
    """A submitted job this session cancelled before its result (submitted again next run);
    `noted_by`: the pid of the session that could only note it in the lock file."""

    EVENT: ClassVar[str] = "cancelled"
    job_id: str | int
    key: str = ""
    noted_by: int | str | None = field(default=None, metadata=optional())


@dataclass(frozen=True)
class Stop(Record):
    """A stop trigger fired (a rerun resumes from the store)."""

    EVENT: ClassVar[str] = "stop"
    reason: str
    pending: tuple[str, ...] = ()


@dataclass(frozen=True)
class Quarantined(Record):
    """A damaged record of this key was set aside (its submission is not waited for)."""

    EVENT: ClassVar[str] = "quarantined"
    key: str
    of: str = ""
    line: int = 0
    why: str = ""


@dataclass(frozen=True)
class NodeResume(Record):
    """A pinned node the playbook resumed, and how it came back."""

    EVENT: ClassVar[str] = "node_resume"
    node: str
    was: str = ""
    now: str = ""


@dataclass(frozen=True)
class Drift(Record):
    """What the adaptive sweep's controls have seen so far (the report's drift line)."""

    EVENT: ClassVar[str] = "drift"
    text: str


@dataclass(frozen=True)
class PlannedOrder(Record):
    """The adaptive sweep's candidate order where a prior or the evidence run's hints changed
    list order, and why (the report's order line)."""

    EVENT: ClassVar[str] = "order"
    text: str


@dataclass(frozen=True)
class Concluded(Record):
    """The adaptive sweep concluded: why, and the items it skips."""

    EVENT: ClassVar[str] = "conclude"
    why: str
    reason: str = ""
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skipped(Record):
    """An item the adaptive sweep did not run, and why."""

    EVENT: ClassVar[str] = "skipped"
    item: str
    reason: str = ""


@dataclass(frozen=True)
class EarlyStop(Record):
    """A candidate's job stopped early by the planner (recorded before the cancel is sent)."""

    EVENT: ClassVar[str] = "early_stop"
    job_id: str
    key: str
    item: str = ""
    kind: str = ""
    reason: str = ""


@dataclass(frozen=True)
class Cleanup(Record):
    """maxtext-slurm's TUNE_PROFILE blocks removed at the end of a session (or not: errors)."""

    EVENT: ClassVar[str] = "cleanup"
    restored: tuple[str, ...] = ()
    errors: Mapping[str, str] = field(default_factory=dict)
    ssh_connections: int = 0


@dataclass(frozen=True)
class TuneArmAdded(Record):
    """A TUNE_PROFILE arm added to the installed block for a run."""

    EVENT: ClassVar[str] = "tune_arm_added"
    profile: str
    xla_flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class FingerprintTaken(Record):
    """A job's compiled train step, fingerprinted at compile-done (evidence/fingerprint.py)."""

    EVENT: ClassVar[str] = "fingerprint"
    key: str
    job_id: str | int
    digest: str
    hlo_digest: str = ""
    code_files: int = 0
    complete: bool = True


@dataclass(frozen=True)
class Inert(Record):
    """A candidate whose program and runtime settings equal a measured run's: stored before its job
    is cut after compile (engine/inert.py); it shares `source_key`'s result."""

    EVENT: ClassVar[str] = "inert"
    key: str
    item: str
    job_id: str | int
    source_key: str
    source_item: str
    reason: str = ""


RECORDS: Mapping[str, type[Record]] = MappingProxyType(
    {
        cls.EVENT: cls
        for cls in (
            SweepOpened,
            Environment,
            Inventory,
            Submitting,
            Submitted,
            Unsubmitted,
            Result,
            Attempt,
            Cancelled,
            Stop,
            Quarantined,
            NodeResume,
            Drift,
            PlannedOrder,
            Concluded,
            Skipped,
            EarlyStop,
            Cleanup,
            TuneArmAdded,
            FingerprintTaken,
            Inert,
        )
    }
)


def record_class(event: str) -> type[Record]:
    """The class of an event kind; RecordError for one this module does not know."""
    try:
        return RECORDS[event]
    except KeyError:
        raise RecordError(
            f"store event {event!r}: expected one of {', '.join(sorted(RECORDS))} (add its dataclass to records.py)"
        ) from None


def read(record: Mapping[str, object]) -> Record:
    """A stored line (its `event` names the class) as its dataclass."""
    return record_class(str(record.get("event"))).from_json(record)
