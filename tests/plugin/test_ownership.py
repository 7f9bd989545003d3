"""Nothing lost, nothing twice (local backend, real processes): one session per store, a store
that heals, SIGTERM/SIGHUP/Ctrl-C cancel the session's jobs (re-attached ones too), option values
checked at start-up. Each case counts the jobs: one `submitted` record and one job log per run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cells import cell_yaml

# Job counts of the fixed protocol (no confirming runs), on the real local backend: these tests
# are about its processes (signals, kill -9, reattach, one session per store).
from tests.conftest import FIXED
from tests.conftest import REAL_FIXED as FAKE
from tests.integration.waits import ENDS_S, OUTER_S

CELL = cell_yaml("own", ("a", "--xla_fake_tgs=1100"), ("b", "--xla_fake_tgs=1200"), step_sleep=0.15)
ITEMS = 5  # baseline, evidence, a, b, the winner's evidence run
HELD = "wave2::a[default]"  # the item whose run the `cell` fixture holds (after two results)


def events(store: Path) -> list[dict]:
    if not store.exists():
        return []
    found = [json.loads(line) for line in store.read_bytes().splitlines(keepends=True) if line.endswith(b"\n")]
    return [e for e in found if isinstance(e, dict)]  # the tests plant a `42`


def default_signals() -> None:
    """In the child: SIGINT, SIGHUP and SIGTERM at their defaults, as in a terminal, however this
    test was started (a background job or nohup ignores SIGINT/SIGHUP, and so would the session)."""
    for number in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)


def start(cwd: Path, *args: str, out: str = "out.txt") -> subprocess.Popen[str]:
    """pytest on the cell in a child process; its output goes to a file the test can read live."""
    handle = (cwd / out).open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "cell.yml", "-v", *FAKE, *args],
        cwd=cwd,
        stdout=handle,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_signals,  # noqa: PLW1509  (the test process starts no thread before it)
    )


def wait_for(what: str, condition, timeout: float = OUTER_S) -> None:  # type: ignore[no-untyped-def]
    """Poll a state; the outer bound is reached only when it never comes (tests/integration/waits.py)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}")


def in_flight(store: Path) -> list[dict]:
    """`submitted` records without a later result/cancel/attempt."""
    pending: dict[str, dict] = {}
    for e in events(store):
        if e["event"] == "submitted":
            pending[e["key"]] = e
        elif e["event"] in ("result", "cancelled", "attempt"):
            pending.pop(e.get("key", ""), None)
    return list(pending.values())


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def assert_nothing_twice(tmp_path: Path, store: Path) -> None:
    """One job log per submitted job id, each job id submitted once, each run key measured once."""
    submitted = [e for e in events(store) if e["event"] == "submitted"]
    ids = Counter(e["job_id"] for e in submitted)
    assert all(n == 1 for n in ids.values()), ids
    logs = sorted((tmp_path / ".xlatune" / "cell" / "jobs").glob("*.log"))
    assert len(logs) == len(ids), (logs, ids)
    results = Counter(e["key"] for e in events(store) if e["event"] == "result")
    assert all(n == 1 for n in results.values()), results


@pytest.fixture
def cell(tmp_path: Path, fake_trainer_env: None) -> Iterator[Path]:
    """The cell whose profile `a` holds its run before step 0 until the test calls `release`: a's
    job is in flight, and the session running, for as long as a test needs it, whatever the load."""
    (tmp_path / "cell.yml").write_text(
        cell_yaml(
            "own",
            ("a", f"--xla_fake_tgs=1100, --xla_fake_hold={tmp_path / 'release'}"),
            ("b", "--xla_fake_tgs=1200"),
            step_sleep=0.15,
        )
    )
    yield tmp_path / ".xlatune" / "cell.jsonl"
    release(tmp_path)  # a run still held (a failed test) ends as any other


def release(tmp_path: Path) -> None:
    """Let profile a's held run go on to its steps."""
    (tmp_path / "release").touch()


def held(store: Path) -> list[dict]:
    """Profile a's job in flight (the store's `submitted` record), or nothing yet."""
    return [e for e in in_flight(store) if e.get("item") == HELD]


@pytest.mark.realproc
def test_a_second_session_on_the_store_refuses_at_once_and_the_first_finishes(tmp_path: Path, cell: Path) -> None:
    first = start(tmp_path)
    wait_for("the held job", lambda: held(cell))  # the first session runs until it is released
    second = start(tmp_path, out="second.txt")
    assert second.wait(timeout=ENDS_S) != 0
    refused = (tmp_path / "second.txt").read_text()
    assert first.poll() is None, "the first session ended while its job was held"
    release(tmp_path)
    assert first.wait(timeout=ENDS_S) == 0, (tmp_path / "out.txt").read_text()
    lines = [ln for ln in refused.splitlines() if "in use by another pytest session" in ln]
    assert lines and f"pid {first.pid}" in lines[0] and "host " in lines[0], refused
    assert "Traceback" not in refused
    assert "re-attached" not in refused and "PASSED" not in refused
    assert "tuning report written" not in refused  # the owner writes it
    out = (tmp_path / "out.txt").read_text()
    assert out.count(" PASSED") == ITEMS and "Traceback" not in out
    assert not [e for e in events(cell) if e["event"] == "cancelled"]
    assert len({e["key"] for e in events(cell) if e["event"] == "result"}) == ITEMS
    assert_nothing_twice(tmp_path, cell)


@pytest.mark.realproc
def test_torn_tail_and_kill_9_then_the_rerun_heals_and_reattaches(tmp_path: Path, cell: Path) -> None:
    first = start(tmp_path)
    wait_for("the held job (after two results)", lambda: held(cell))
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    orphan = in_flight(cell)[0]
    release(tmp_path)  # the orphan goes on; the rerun re-attaches to it
    with cell.open("ab") as handle:  # a crash mid-write leaves a torn last line
        handle.write(b'{"schema": 1, "event": "result", "key": "x", "job_id": "9')
    second = start(tmp_path, out="second.txt")
    assert second.wait(timeout=ENDS_S) == 0, (tmp_path / "second.txt").read_text()
    out = (tmp_path / "second.txt").read_text()
    assert out.count("set aside a torn last line") == 1 and "cell.jsonl.torn" in out
    assert f"re-attached to job {orphan['job_id']}" in out
    assert (tmp_path / ".xlatune" / "cell.jsonl.torn").read_bytes().startswith(b'{"schema": 1')
    assert all(line.endswith(b"\n") for line in cell.read_bytes().splitlines(keepends=True))
    assert len({e["key"] for e in events(cell) if e["event"] == "result"}) == ITEMS
    assert "Traceback" not in out
    assert_nothing_twice(tmp_path, cell)


@pytest.mark.realproc
def test_a_non_object_line_and_a_lost_last_byte_lose_nothing(tmp_path: Path, cell: Path) -> None:
    release(tmp_path)
    first = start(tmp_path)
    assert first.wait(timeout=ENDS_S) == 0, (tmp_path / "out.txt").read_text()
    data = cell.read_bytes()
    lines = data.splitlines(keepends=True)
    cell.write_bytes(b"".join(lines[:2]) + b"42\n" + b"".join(lines[2:])[:-1])  # `42`, last byte gone
    second = start(tmp_path, out="second.txt")
    assert second.wait(timeout=ENDS_S) == 0, (tmp_path / "second.txt").read_text()
    out = (tmp_path / "second.txt").read_text()
    assert out.count("REUSED") == ITEMS  # the last result is not lost to the missing byte
    assert "skipped 1 line(s) that are not well-formed records (line 3)" in out
    assert "the last record had no newline; completed it" in out
    assert "Traceback" not in out and "AttributeError" not in out
    assert_nothing_twice(tmp_path, cell)


@pytest.mark.realproc
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_cancel_the_running_job_store_it_and_write_the_report(
    tmp_path: Path, cell: Path, number: int
) -> None:
    first = start(tmp_path)
    wait_for("the held job (after two results)", lambda: held(cell))
    running = held(cell)[0]
    wait_for("the job's process", lambda: alive(int(running["handle"])))
    first.send_signal(number)
    code = first.wait(timeout=ENDS_S)
    out = (tmp_path / "out.txt").read_text()
    assert code == pytest.ExitCode.INTERRUPTED, out
    assert not alive(int(running["handle"])), "the session's job outlived it"
    cancelled = [e for e in events(cell) if e["event"] == "cancelled"]
    assert [e["job_id"] for e in cancelled] == [running["job_id"]]
    assert (tmp_path / "own-tuning.md").exists() and "tuning report written" in out
    assert f"KeyboardInterrupt: {signal.Signals(number).name} received" in out
    assert "Traceback" not in out
    stored = {e["key"] for e in events(cell) if e["event"] == "result"}
    release(tmp_path)
    second = start(tmp_path, out="second.txt")
    assert second.wait(timeout=ENDS_S) == 0, (tmp_path / "second.txt").read_text()
    again = (tmp_path / "second.txt").read_text()
    assert again.count("REUSED") == len(stored)  # nothing finished is lost
    assert len({e["key"] for e in events(cell) if e["event"] == "result"}) == ITEMS
    assert_nothing_twice(tmp_path, cell)


@pytest.mark.realproc
def test_ctrl_c_after_reattach_cancels_the_reattached_job(tmp_path: Path, cell: Path) -> None:
    # The orphan is held (never released), so it is still running when the SIGINT comes, however
    # slow the machine: with steps alone it could end between the re-attach line and the signal
    # (then the next item's job was the one cancelled).
    first = start(tmp_path)
    wait_for("the held job", lambda: held(cell))
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    orphan = held(cell)[0]
    assert alive(int(orphan["handle"]))
    second = start(tmp_path, out="second.txt")
    wait_for("the re-attach", lambda: "re-attached to job" in (tmp_path / "second.txt").read_text())
    second.send_signal(signal.SIGINT)
    assert second.wait(timeout=ENDS_S) == pytest.ExitCode.INTERRUPTED
    wait_for("the orphan to end", lambda: not alive(int(orphan["handle"])))
    assert [e["job_id"] for e in events(cell) if e["event"] == "cancelled"] == [orphan["job_id"]]
    assert "Traceback" not in (tmp_path / "second.txt").read_text()
    assert_nothing_twice(tmp_path, cell)


# ---- option values ------------------------------------------------------------------------


# The README's examples (a store under /proc, poll interval nan, a missing policy file, a
# directory named like a cell) are run and compared with the README by test_readme_messages.py.
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--xlatune-poll-interval=inf"],
            "*--xlatune-poll-interval: expected a number of seconds > 0, from 0.01 to 300, found 'inf'*",
        ),
        (
            ["--xlatune-poll-interval=1e-7"],
            "*--xlatune-poll-interval: expected a number of seconds > 0, from 0.01 to 300, found '1e-7'*",
        ),
        (
            ["--xlatune-store=cell.yml"],
            "ERROR: --xlatune-store: expected a writable directory, found '*cell.yml' (*cell.yml is not a directory)",
        ),
        (
            ["--xlatune-policy=pdir.yml"],
            "ERROR: --xlatune-policy: expected a policy file or YAML text, found 'pdir.yml' (a directory)",
        ),
        (["--xlatune-policy=bad.yml"], "ERROR: --xlatune-policy: bad.yml.oom.retries: *"),
        (["--xlatune-policy={oom: {retries: x}}"], "ERROR: --xlatune-policy: xlatune_policy.oom.retries: *"),
    ],
)
def test_every_bad_option_value_is_one_line_at_start_up(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makefile(".yml", cell=CELL)
    (pytester.path / "pdir.yml").mkdir()
    (pytester.path / "bad.yml").write_text("oom: {retries: x}\n")
    result = pytester.runpytest_inprocess(*args)  # a usage error: no process behaviour under test
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text
    assert not (pytester.path / ".xlatune").exists()  # nothing ran


def test_a_policy_file_is_read_and_help_says_so(pytester: pytest.Pytester, fake_trainer_env: None) -> None:
    pytester.makefile(".yml", cell=CELL.replace("fake_step_sleep: 0.15", "fake_step_sleep: 0"))
    (pytester.path / "policy.yml").write_text("unknown: {retries: 0}\n")
    # in this process, the jobs played in memory: what is under test is the policy file's reading
    result = pytester.runpytest_inprocess("cell.yml", "--xlatune-policy=policy.yml", *FIXED)
    assert result.ret == 0, result.stdout.str()
    helped = pytester.runpytest_inprocess("--help")
    helped.stdout.fnmatch_lines(["*--xlatune-policy=FILE|YAML*", "*the path of a YAML/JSON file, or*"])


@pytest.mark.realproc
def test_xdist_workers_splitting_one_cell_are_told_to_use_loadgroup(tmp_path: Path, cell: Path) -> None:
    """`--dist load` could hand one cell's items to two workers: the second is refused (nothing
    submitted twice) with the fix in the message; `--dist loadgroup` keeps a cell on one worker."""
    release(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "cell.yml", "-v", *FAKE, "-n", "2", "--dist", "load"],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=ENDS_S,
    )
    out = done.stdout + done.stderr
    # xdist decides whether both workers get items of the cell (it usually does); whenever a
    # second worker does, it is refused with the hint and submits nothing.
    refused = out.count("in use by another xdist worker of this session")
    assert refused == out.count("run the cell's items in one worker: --dist loadgroup")
    assert "Traceback" not in out
    assert_nothing_twice(tmp_path, cell)
    grouped = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "cell.yml",
            "-v",
            *FAKE,
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "--xlatune-remeasure",
        ],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=ENDS_S,
    )
    assert grouped.returncode == 0, grouped.stdout
    assert "in use by" not in grouped.stdout


@pytest.mark.realproc
def test_n_without_dist_keeps_each_cell_on_one_worker(tmp_path: Path, cell: Path) -> None:
    """`-n 2` alone used to mean `--dist load`: items of one cell on two workers, the second
    refused ("in use by another xdist worker … --dist loadgroup"); now it groups them itself."""
    release(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "cell.yml", "-v", *FAKE, "-n", "2"],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=ENDS_S,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "in use by" not in out and "Traceback" not in out
    assert_nothing_twice(tmp_path, cell)
