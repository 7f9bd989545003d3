"""A damaged or hostile store: checksums, quarantine, links, a folder in its place, old stores."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pytest_xlatune import store_lines
from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.store import ResultStore, StoreError, StoreWriteError


def result(key: str, job_id: str, tgs: float = 1000.0) -> JobResult:
    return JobResult(
        key=key,
        item=f"wave2::{key}[default]",
        wave="wave2",
        profile=key,
        config_tag="default",
        kind="profile",
        job_id=job_id,
        verdict=Verdict.SUCCESS,
        tgs=tgs,
        tgs_values=(tgs - 2.5, tgs, tgs + 2.5),
        steps_used=(5, 6, 7),
    )


def flip_digit(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert data.count(old) == 1
    path.write_bytes(data.replace(old, new))


def test_every_record_carries_a_checksum_of_its_bytes() -> None:
    line = store_lines.encode({"schema": 1, "event": "sweep", "nodelist": "n[1-2]"})
    assert line.endswith(b'"}\n') and b'"sum": "' in line
    assert store_lines.parse(line).record == {"schema": 1, "event": "sweep", "nodelist": "n[1-2]"}
    assert store_lines.parse(line.replace(b"n[1-2]", b"n[1-3]")).problem == "it fails its checksum"


def test_a_flipped_tgs_digit_is_quarantined_with_one_line_and_its_item_runs_again(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    store = ResultStore(path)
    store.append("submitted", key="a", job_id="1")
    store.add_result(result("a", "1", 1000.0))
    store.append("submitted", key="b", job_id="2")
    store.add_result(result("b", "2", 1010.0))
    flip_digit(path, b'"tgs": 1010.0', b'"tgs": 9010.0')  # +790 % from one digit
    fresh = ResultStore(path)
    assert sorted(fresh.latest_by_key()) == ["a"]  # never used, even before it is set aside
    notes = fresh.acquire()
    assert len(notes) == 1
    assert notes[0].startswith(
        f"{path}:4: the result record of wave2::b[default] was quarantined into "
        f"{path}.quarantine (it fails its checksum)"
    )
    assert "9010.0" in (tmp_path / "s.jsonl.quarantine").read_text()
    assert b"9010.0" not in path.read_bytes()
    assert sorted(fresh.latest_by_key()) == ["a"]
    assert fresh.pending_submissions() == {}  # not waited for, not re-attached: it runs again
    fresh.release()
    assert ResultStore(path).acquire() == []  # said once


def test_a_record_whose_tgs_is_not_the_mean_of_its_steps_is_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    store = ResultStore(path)
    store.add_result(result("a", "1", 1000.0))
    record = result("b", "2").to_dict() | {"tgs": 9000.0}  # a well-summed line that lies
    store.append("result", **record)
    assert sorted(store.latest_by_key()) == ["a"]
    notes = ResultStore(path).acquire()
    assert (
        len(notes) == 1 and "it contradicts itself: tgs 9000 vs 1000, the mean of its own 3 per-step values" in notes[0]
    )


def test_an_older_result_is_not_reused_after_the_newer_one_is_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    store = ResultStore(path)
    store.add_result(result("a", "1", 1000.0))
    store.add_result(result("a", "2", 1200.0))
    flip_digit(path, b'"job_id": "2"', b'"job_id": "3"')
    healed = ResultStore(path)
    healed.acquire()
    assert "a" not in healed.latest_by_key()
    healed.add_result(result("a", "4", 1100.0))
    assert healed.latest_by_key()["a"].job_id == "4"


def test_a_store_written_before_checksums_stays_readable(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    old = {"schema": 1, "event": "result", "time": 1.0, **result("a", "1").to_dict()}
    path.write_text(json.dumps(old, sort_keys=True) + "\n")
    store = ResultStore(path)
    assert store.acquire() == []
    store.add_result(result("b", "2"))
    assert sorted(store.latest_by_key()) == ["a", "b"]
    # After the first summed record, a line without a sum is not taken on trust.
    with path.open("a") as handle:
        handle.write(json.dumps(old | {"key": "c"}, sort_keys=True) + "\n")
    assert sorted(store.latest_by_key()) == ["a", "b"]


@pytest.mark.parametrize("name", ["s.jsonl", "s.jsonl.lock", "s.jsonl.torn", "s.jsonl.quarantine"])
def test_a_planted_symlink_is_refused_naming_it_and_its_target_is_untouched(tmp_path: Path, name: str) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    ResultStore(tmp_path / "s.jsonl").add_result(result("a", "1")) if name != "s.jsonl" else None
    (tmp_path / name).symlink_to(target)
    with pytest.raises(StoreError) as refused:
        ResultStore(tmp_path / "s.jsonl").acquire()
    assert str(refused.value).startswith(f"{tmp_path / name}: is a symbolic link")
    assert "\n" not in str(refused.value)
    assert target.read_text() == "keep me\n"


def test_a_link_planted_during_the_session_is_not_written_through(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    store = ResultStore(tmp_path / "s.jsonl")
    store.acquire()
    store.add_result(result("a", "1"))
    (tmp_path / "s.jsonl").unlink()
    (tmp_path / "s.jsonl").symlink_to(target)
    with pytest.raises(StoreWriteError, match=r"s\.jsonl: is a symbolic link"):
        store.add_result(result("b", "2"))
    with pytest.raises(StoreError, match=r"s\.jsonl: is a symbolic link"):
        store.results()
    assert target.read_text() == "keep me\n"


def test_a_directory_in_place_of_the_store_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "s.jsonl").mkdir()
    with pytest.raises(StoreError) as refused:
        ResultStore(tmp_path / "s.jsonl").acquire()
    assert str(refused.value) == (
        f"{tmp_path / 's.jsonl'}: expected the results store (a file of "
        "JSON lines), found a directory; move it away or pass another "
        "--xlatune-store"
    )
    with pytest.raises(StoreError, match="found a directory"):
        ResultStore(tmp_path / "s.jsonl").results()


def test_store_files_respect_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        store = ResultStore(tmp_path / "s.jsonl")
        store.acquire()
        store.add_result(result("a", "1"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "s.jsonl").stat().st_mode) == 0o644


def test_reads_are_incremental_and_see_a_rewritten_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    store = ResultStore(path)
    store.add_result(result("a", "1"))
    assert [r.key for r in store.results()] == ["a"]
    store.add_result(result("b", "2"))
    assert [r.key for r in store.results()] == ["a", "b"]
    other = ResultStore(tmp_path / "t.jsonl")
    other.add_result(result("c", "3"))
    os.replace(tmp_path / "t.jsonl", path)  # another file now: parsed from its start
    assert [r.key for r in store.results()] == ["c"]


def test_store_names_are_unique_per_cell_path(tmp_path: Path) -> None:
    from pytest_xlatune.paths import cell_slug

    root = tmp_path / "proj"
    cells = [
        root / "a" / "x.yml",
        root / "b" / "x.yml",
        root / "a__x.yml",
        root / "a" / "x.yaml",
        tmp_path / "elsewhere" / "x.yml",
        tmp_path / "other" / "x.yml",
        root / "x.yml",
    ]
    slugs = [cell_slug(cell, root) for cell in cells]
    assert len(set(slugs)) == len(cells), slugs
    assert slugs[0] == "a__x" and slugs[-1] == "x"  # a plain .yml cell keeps its store's name


def test_a_store_under_the_former_name_of_a_yaml_cell_is_moved(tmp_path: Path) -> None:
    from pytest_xlatune.paths import CellPaths

    (tmp_path / "x.yaml").write_text("")
    paths = CellPaths(tmp_path / "x.yaml", tmp_path, tmp_path / ".xlatune")
    old = ResultStore(tmp_path / ".xlatune" / "x.jsonl")
    old.add_result(result("a", "1"))
    assert paths.legacy_store == old.path and paths.store != old.path
    store = ResultStore(paths.store)
    assert store.adopt(paths.legacy_store) == [
        f"{old.path}: moved to {paths.store} (store names are now unique per cell path)"
    ]
    assert [r.key for r in store.results()] == ["a"] and not old.path.exists()
    (tmp_path / "x.yml").write_text("")  # the old name is now another cell's own: never taken
    assert paths.legacy_store is None


def test_healing_on_a_full_disk_is_one_line_and_keeps_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    path = tmp_path / "s.jsonl"
    ResultStore(path).add_result(result("a", "1"))
    with path.open("ab") as handle:
        handle.write(b"42\n")
    before = path.read_bytes()

    def full(target: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(target))

    monkeypatch.setattr(ResultStore, "_write_raw", staticmethod(full))
    with pytest.raises(StoreError) as refused:
        ResultStore(path).acquire()
    assert str(refused.value) == (
        f"{path}.quarantine: cannot heal the results store (No space left "
        "on device); free space or fix the disk, then rerun"
    )
    assert path.read_bytes() == before


@pytest.mark.parametrize("name", ["s.jsonl", "s.jsonl.lock"])
def test_a_fifo_in_place_of_a_store_file_is_one_line_naming_it(tmp_path: Path, name: str) -> None:
    """A FIFO as the store's lock read as 'cannot heal the results store (Illegal seek); free
    space or fix the disk', naming the store, not the lock."""
    os.mkfifo(tmp_path / name)
    with pytest.raises(StoreError) as refused:
        ResultStore(tmp_path / "s.jsonl").acquire()
    assert str(refused.value).startswith(f"{tmp_path / name}: expected the ")
    assert "a FIFO" in str(refused.value) or "no regular file" in str(refused.value)
    assert "\n" not in str(refused.value) and "disk" not in str(refused.value)
