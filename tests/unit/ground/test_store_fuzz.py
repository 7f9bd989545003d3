"""Property-based: whatever bytes the store holds, reading and healing it never raise a
traceback; a line that is no usable record is set aside with one line (fixed budget, derandomized)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.store import ResultStore, StoreError
from pytest_xlatune.store_lines import encode

GOOD = [
    encode(
        {
            "schema": 1,
            "event": "result",
            "time": 1.0,
            **JobResult(
                key=f"k{i}",
                item=f"wave2::k{i}[default]",
                wave="wave2",
                profile=f"k{i}",
                config_tag="default",
                kind="profile",
                job_id=str(i),
                verdict=Verdict.SUCCESS,
                tgs=1000.0 + i,
                tgs_values=(999.0 + i, 1001.0 + i),
            ).to_dict(),
        }
    )
    for i in range(3)
] + [
    encode({"schema": 1, "event": "submitted", "time": 1.0, "key": "k9", "job_id": "9"}),
    encode({"schema": 1, "event": "sweep", "time": 1.0, "nodelist": "n1"}),
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)
records = st.fixed_dictionaries(
    {
        "schema": st.sampled_from([1, 1, 1, 2, "1"]),
        "event": st.sampled_from(["result", "attempt", "submitted", "submitting", "sweep", "cancelled", "x"]),
    },
    optional={
        "key": json_values,
        "job_id": json_values,
        "item": json_values,
        "verdict": json_values,
        "tgs": json_values,
        "tgs_values": json_values,
        "losses": json_values,
        "mark": json_values,
        "nodelist": json_values,
        "wave": json_values,
        "profile": json_values,
        "config_tag": json_values,
        "kind": json_values,
        "env": json_values,
    },
)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    line = draw(st.sampled_from(GOOD))
    how = draw(st.sampled_from(["flip", "cut", "insert", "keep"]))
    at = draw(st.integers(0, len(line) - 1))
    if how == "flip":
        return line[:at] + bytes([line[at] ^ draw(st.integers(1, 255))]) + line[at + 1 :]
    if how == "cut":
        return line[:at] + b"\n"
    if how == "insert":
        return line[:at] + draw(st.binary(max_size=4)) + line[at:]
    return line


lines = st.one_of(
    st.sampled_from(GOOD),
    mutated(),
    records.map(lambda r: (json.dumps(r) + "\n").encode()),
    records.map(encode),  # well summed, but of any shape
    st.binary(max_size=40).map(lambda b: b + b"\n"),
)


@settings(
    max_examples=100, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.lists(lines, max_size=8), st.binary(max_size=30))
def test_reading_and_healing_any_store_never_raises(body: list[bytes], tail: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.jsonl"
        path.write_bytes(b"".join(body) + tail)
        reader = ResultStore(path)
        try:
            reader.results(), reader.jobs(), reader.latest_by_key(), reader.pending_submissions()
            reader.unconfirmed_submissions(), reader.sweep_info(), reader.max_job_number()
        except StoreError as error:  # a foreign schema: one line naming the line
            assert "\n" not in str(error) and "schema: expected 1" in str(error)
            return
        owner = ResultStore(path)
        notes = owner.acquire()
        assert all("\n" not in note for note in notes)
        owner.results(), owner.pending_submissions(), owner.max_job_number()
        kept = path.read_bytes().splitlines(keepends=True)
        assert all(line.endswith(b"\n") for line in kept)
        owner.release()
        assert ResultStore(path).acquire() == []  # healed once, then quiet


# A result's field set to a value of the wrong type or out of range: each one reached a traceback
# when the report was rendered (Spent.of summed a dict, pandas dated 1e308 s, `0.isdigit()`...).
HOSTILE_FIELDS = [
    ("node_minutes", {"a": [1]}),
    ("node_minutes", "12"),
    ("finished_at", -1e308),
    ("submitted_at", "1e999"),
    ("submitted_at", [[None, None]]),
    ("step_seconds", "<script>"),
    ("step_seconds", []),
    ("steps_used", "x"),
    ("backend", []),
    ("env", "WANDB_KEY=abcdef123456"),
    ("unset_env", [[None, None]]),
    ("losses", [[0, "x"]]),
    ("extra_losses", [["mtp", [[None, 1.0]]]]),
    ("nodes", -1),
    ("exit_code", "1"),
    ("inert", "yes"),
    ("node_minutes", float("nan")),
    ("runs", [["1", "fast"]]),
    ("kind", "nonsense"),
    ("xla_flags", [1]),
]


def _result(**change: object) -> dict[str, object]:
    record = json.loads(GOOD[0])
    del record["sum"]
    record.update(change)
    return record


@pytest.mark.parametrize(("field", "value"), HOSTILE_FIELDS, ids=[f"{f}-{type(v).__name__}" for f, v in HOSTILE_FIELDS])
def test_a_result_field_of_the_wrong_type_is_refused_naming_it(tmp_path: Path, field: str, value: object) -> None:
    """The line is set aside with one line naming the field; the other results stay readable."""
    with pytest.raises(ValueError, match=rf"^{field}: expected .+, found "):
        JobResult.from_dict(_result(**{field: value}))
    path = tmp_path / "s.jsonl"
    path.write_bytes(encode(_result(**{field: value})) + GOOD[1])
    assert [r.key for r in ResultStore(path).results()] == ["k1"]
    notes = ResultStore(path).acquire()
    assert any(f"{field}: expected" in note and "\n" not in note for note in notes), notes


def test_a_job_id_stored_as_a_number_reads_as_its_text() -> None:
    assert JobResult.from_dict(_result(job_id=42)).job_id == "42"


@pytest.mark.parametrize("job_id", ["\x1b]0;title\x07", "12 34", "a" * 65, "1;reboot", ""])
def test_a_job_id_no_scheduler_writes_is_refused(tmp_path: Path, job_id: str) -> None:
    """A stored job id reaches the terminal's final-figures lines, junit and HTML: an escape code or
    a space there is no scheduler's id, and the line is set aside naming it."""
    path = tmp_path / "s.jsonl"
    submitted = {"schema": 1, "event": "submitted", "time": 1.0, "key": "k8", "job_id": job_id}
    path.write_bytes(encode(_result(job_id=job_id)) + encode(submitted) + GOOD[1])
    store = ResultStore(path)
    assert [r.key for r in store.results()] == ["k1"] and "k8" not in store.pending_submissions()
    notes = ResultStore(path).acquire()
    assert sum("job_id: expected a job id" in note for note in notes) >= 1, notes
    assert all("\x1b" not in note for note in notes)
