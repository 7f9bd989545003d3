"""Every store event is one frozen dataclass of records.py: its JSON form reads back as itself,
through the store too, and the store writes no event kind records.py does not know."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import pytest_xlatune
from pytest_xlatune import records
from pytest_xlatune.records import RecordError
from pytest_xlatune.results import JobResult, RunKind, Verdict
from pytest_xlatune.store import ResultStore

RESULT = JobResult(
    key="k1",
    item="wave2::fast[default]",
    wave="wave2",
    profile="fast",
    config_tag="default",
    kind=RunKind.PROFILE,
    job_id="17",
    verdict=Verdict.SUCCESS,
    xla_flags=("--xla_a=1",),
    env=(("NCCL_X", "1"),),
    tgs=600.5,
    tgs_values=(600.0, 601.0),
    losses=((1, 2.5),),
    runs=(("17", 600.5),),
)

SAMPLES: tuple[records.Record, ...] = (
    records.SweepOpened(nodelist="node[01-02]", backend="local", model_tag="demo", parallelism="FSDP=2"),
    records.Environment(images={"": "python 3.11, jax 0.4"}),
    records.Inventory(
        checkout="/c",
        model_tag="m",
        model_name="llama",
        sweep_id="s1",
        gpu_yml={"path": "/c/gpu.yml", "settings": {"a": 1}},
        env_file={"path": "/c/e.sh", "exists": True, "deployed": [["A", "1"]], "not_restored": []},
        container_env={"path": "/c/container_env.sh", "DOCKER_IMAGE": "img"},
        tuning_md={"path": "/c/m-tuning.md", "exists": False, "fresh_start": True, "text": ""},
        compile_cache={"root": "/c/outputs/cache", "user_setting": ""},
    ),
    records.Submitting(
        key="k1", item="wave2::fast[default]", job_name="xlt-fast", mark="xlatune-ab", compile_cache="/cache/a"
    ),
    records.Submitted(
        key="k1",
        job_id="17",
        item="wave2::fast[default]",
        log_path="/l/17.log",
        job_dir="/l",
        handle="4242",
        mark="xlatune-ab",
        recovered=True,
        compile_cache="/cache/a",
    ),
    records.Unsubmitted(key="k1", mark="xlatune-ab", item="wave2::fast[default]"),
    records.Result(RESULT),
    records.Attempt(RESULT),
    records.Cancelled(job_id="17", key="k1", noted_by=4242),
    records.Stop(reason="node_down: node01", pending=("wave2::slow[default]",)),
    records.Quarantined(key="k1", of="result", line=3, why="it fails its checksum"),
    records.NodeResume(node="node01", was="drain", now="usable"),
    records.Drift(text="drift: +0.4 % over 3 controls"),
    records.PlannedOrder(
        text="candidates in planned order wave2::b[default], wave2::a[default]; ahead of list order: …"
    ),
    records.Concluded(why="no_better", reason="nothing beats the baseline", skipped=("wave3::x[default]",)),
    records.Skipped(item="wave3::x[default]", reason="concluded"),
    records.EarlyStop(job_id="17", key="k1", item="wave2::fast[default]", kind="slower", reason="slower"),
    records.Cleanup(restored=("/c/configs/m.env.sh",), errors={}, ssh_connections=1),
    records.TuneArmAdded(profile="fast", xla_flags=("--xla_a=1",), env=(("NCCL_X", "1"),), args=("a=1",)),
    records.FingerprintTaken(key="k2", job_id="18", digest="ab12", hlo_digest="cd34", code_files=164, complete=True),
    records.Inert(
        key="k2",
        item="wave2::vec256[default]",
        job_id="18",
        source_key="k1",
        source_item="wave1::baseline[default]",
        reason="inert here: compiles to `baseline`'s program",
    ),
)


def test_the_samples_cover_every_record_kind() -> None:
    assert sorted(type(s).EVENT for s in SAMPLES) == sorted(records.RECORDS)


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: type(r).EVENT)
def test_a_record_reads_back_as_itself_from_its_json(record: records.Record) -> None:
    line = json.loads(json.dumps(record.to_json()))  # as a store line holds it
    assert type(record).from_json(line) == record
    assert records.read({"event": type(record).EVENT, "schema": 1, "time": 1.0, **line}) == record


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: type(r).EVENT)
def test_a_record_reads_back_as_itself_through_the_store(record: records.Record, tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "c.jsonl")
    store.write(record)
    assert store.records(type(record)) == [record]
    (event,) = store.events()
    assert event["event"] == type(record).EVENT


def test_optional_fields_stay_out_of_the_line_at_their_default() -> None:
    # A run without a compilation cache, a submission not recovered: the lines written before.
    line = records.Submitted(key="k", job_id="1", item="i", log_path="l", job_dir="d", handle="", mark="m").to_json()
    assert line == {"key": "k", "job_id": "1", "item": "i", "log_path": "l", "job_dir": "d", "handle": "", "mark": "m"}
    assert "compile_cache" not in records.Submitting(key="k", mark="m", job_name="j", item="i").to_json()
    assert "noted_by" not in records.Cancelled(job_id="1", key="k").to_json()


def test_a_result_record_is_the_job_results_own_dict() -> None:
    assert json.dumps(records.Result(RESULT).to_json(), sort_keys=True) == json.dumps(RESULT.to_dict(), sort_keys=True)


def test_the_store_refuses_an_event_kind_records_does_not_know(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "c.jsonl")
    with pytest.raises(RecordError, match=r"store event 'made_up': expected one of .*add its dataclass"):
        store.append("made_up", key="k")
    assert not store.path.exists()


def _written_kinds() -> dict[str, str]:
    """Every event kind the package writes by name: `….append("kind", …)` on a store and the
    maxtext launcher's `self.record("kind", …)` (its `record` is the store's append)."""
    package = Path(pytest_xlatune.__file__).parent
    found: dict[str, str] = {}
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
                continue
            first, on = node.args[0], ast.unparse(node.func.value)
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            if (node.func.attr == "append" and "store" in on) or (node.func.attr == "record" and on == "self"):
                found[first.value] = f"{path.relative_to(package)}:{node.lineno}"
    return found


def test_the_package_writes_no_event_kind_records_does_not_know() -> None:
    written = _written_kinds()
    assert {"drift", "conclude", "cleanup", "tune_arm_added"} <= set(written)  # the scan sees them
    assert {kind: where for kind, where in written.items() if kind not in records.RECORDS} == {}
