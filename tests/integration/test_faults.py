"""Fault injection on the real local Slurm cluster (sbatch backend): the playbook acts, and the
sweep's bookkeeping survives — every finished result stored, no run submitted twice, no job of
anyone else touched.

Each test runs a small cell pinned to `node03` through pytest while a background thread injects
the fault (drain, a killed slurmd, a stopped slurmctld) or the fake trainer acts it out. A job of
"someone else" sleeps on `node04` the whole time. Fault-to-verdict times are printed (`-s`) as
`[fault-timing] …` lines; nothing asserts on them.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.conftest import REAL as FAKE
from tests.integration.fixtures_infra import LOCK_DIR, LocalSlurm
from tests.integration.waits import FOREIGN_SLEEP, OUTER_S, wait_until

pytestmark = pytest.mark.slurm

NODE = "node03"  # the pinned nodelist of every cell here
FOREIGN_NODE = "node04"  # outside it: someone else's job runs there
POLL_S = 0.2
POLL = f"--xlatune-poll-interval={POLL_S:g}"
RETRY_DEADLINE_S = 240  # below the cells' 5-minute time limit (test_a_retry_leaves_no_queued_job_unwatched)
HANG = "--xlatune-hang=init_allowance_s=4,compile_allowance_s=4,floor_s=3,k=3"

CELL = """\
model_tag: flt
nodelist: {node}
parallelism: FSDP=8
baseline_repeats: 1
overrides: {{{overrides}}}
waves:
  2:
{profiles}
backend: {{kind: sbatch, time: "5:00"}}
"""


def make_cell(pytester: pytest.Pytester, profiles: dict[str, str], overrides: str = "fake_step_sleep: 0.2") -> Path:
    """A cell `flt` with one wave-2 profile per name → its XLA flag; 15 steps of 0.2 s each."""
    lines = "\n".join(f"    - {{name: {name}, xla_flags: [{flag}]}}" for name, flag in profiles.items())
    return pytester.makefile(".yml", flt=CELL.format(node=NODE, overrides=overrides, profiles=lines))


# ---- the cluster ------------------------------------------------------------------------------


def slurm(*argv: str, check: bool = True) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=60).stdout


ACTIVE = ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED")


def active() -> set[str]:
    """Job ids queued, running or completing (anyone's)."""
    return set(slurm("squeue", "-h", "-t", "PENDING,RUNNING,COMPLETING", "-o", "%i").split())


def node_state(node: str) -> str:
    """sinfo's long state with its flags, e.g. `idle`, `drained`, `down*`."""
    return slurm("sinfo", "-h", "-N", "-n", node, "-o", "%T", check=False).strip()


def pid_of(cluster: LocalSlurm, daemon: str) -> int | None:
    """A daemon's pid from the pid file scripts/local-slurm.sh configures (`slurmd.node03.pid`)."""
    try:
        pid = int(Path(cluster.state_dir, f"{daemon}.pid").read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def stop_daemon(cluster: LocalSlurm, daemon: str, sig: signal.Signals) -> None:
    pid = pid_of(cluster, daemon)
    assert pid is not None, f"{daemon} is not running"
    os.kill(pid, sig)
    wait_until(f"{daemon} (pid {pid}) to exit", lambda: pid_of(cluster, daemon) is None)


def start_slurmd(cluster: LocalSlurm, node: str) -> None:
    """Start a node's slurmd again (as scripts/local-slurm.sh does) and wait until it takes jobs."""
    if pid_of(cluster, f"slurmd.{node}") is None:
        subprocess.run(["slurmd", "-f", cluster.conf, "-N", node], check=True, timeout=60)

    def usable() -> bool:
        # ReturnToService=2: a node DOWN for not responding returns once its slurmd registers.
        state = node_state(node)
        if state.startswith(("down", "drain", "fail")) and not state.endswith("*"):
            slurm("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
        return state in ("idle", "allocated", "mixed", "completing")

    wait_until(f"{node} to take jobs again", usable, every=0.5)


def start_slurmctld(cluster: LocalSlurm) -> None:
    if pid_of(cluster, "slurmctld") is None:
        subprocess.run(["slurmctld", "-f", cluster.conf, "-i"], check=True, timeout=60)
    wait_until(
        "slurmctld to answer",
        lambda: (
            subprocess.run(["squeue", "-h", "-j", "1,1"], check=False, capture_output=True, timeout=30).returncode == 0
        ),
        every=0.5,
    )


@pytest.fixture(autouse=True)
def cluster_to_ourselves(local_slurm: LocalSlurm) -> Iterator[None]:
    """Hold the lock the `local_slurm` fixture takes for `scripts/local-slurm.sh up`: another
    session starting meanwhile would resume the node drained here or restart the daemon killed
    here, and another run of this file would inject its faults into ours."""
    with open(LOCK_DIR / "xlatune-slurm.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture
def foreign_job(local_slurm: LocalSlurm) -> Iterator[str]:
    """A job of "someone else" on a node outside the nodelist; cancelled after the test."""
    job = slurm(
        "sbatch",
        "--parsable",
        f"--nodelist={FOREIGN_NODE}",
        "--nodes=1",
        "--job-name=someone-else",
        "--output=/dev/null",
        f"--wrap=sleep {FOREIGN_SLEEP}",
    ).strip()
    try:
        yield job
    finally:
        slurm("scancel", job, check=False)


# ---- the sweep's store --------------------------------------------------------------------------


def events(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    path = pytester.path / ".xlatune" / "flt.jsonl"
    if not path.exists():
        return []
    lines = path.read_bytes().splitlines(keepends=True)
    return [json.loads(raw) for raw in lines if raw.endswith(b"\n")]  # a torn last line is skipped


def of(pytester: pytest.Pytester, kind: str, item: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events(pytester) if e["event"] == kind and (item is None or e.get("item") == item)]


def verdicts(pytester: pytest.Pytester) -> dict[str, list[str]]:
    """Item → the verdict of each of its jobs, attempts first."""
    found: dict[str, list[str]] = {}
    for e in events(pytester):
        if e["event"] in ("attempt", "result"):
            found.setdefault(e["item"], []).append(e["verdict"])
    return found


def job_at_step(pytester: pytest.Pytester, item: str, step: int) -> str | None:
    """The job id of `item` once its log shows `completed step: step`, else None."""
    for record in of(pytester, "submitted", item):
        try:
            log = Path(record["log_path"]).read_text(errors="replace")
        except OSError:
            continue
        if re.search(rf"completed step: {step},", log):
            return str(record["job_id"])
    return None


def fault_time(log_path: str) -> float:
    """When the fake trainer acted out its fault (its `fake_trainer: fault KIND at EPOCH` line)."""
    m = re.search(r"fake_trainer: fault \S+ at (\d+\.\d+)", Path(log_path).read_text())
    assert m, f"no fault line in {log_path}"
    return float(m.group(1))


def timing(what: str, seconds: float) -> None:
    print(f"\n[fault-timing] {what}: {seconds:.1f} s")


def check_bookkeeping(pytester: pytest.Pytester, cluster: LocalSlurm, foreign: str) -> None:
    """Every job closed exactly once in the store, one job per run at a time, others untouched."""
    log = events(pytester)
    submitted = [e for e in log if e["event"] == "submitted"]
    ids = [str(e["job_id"]) for e in submitted]
    assert len(ids) == len(set(ids)), ids
    closed = Counter(str(e["job_id"]) for e in log if e["event"] in ("attempt", "result", "cancelled"))
    # Each submission ends in exactly one stored attempt, result or cancellation, and nothing
    # is stored for a job that was never submitted.
    assert closed == Counter(ids), (closed, ids)
    live: dict[str, str] = {}
    for e in log:  # a run key is submitted again only after its previous job was closed
        if e["event"] == "submitted":
            assert e["key"] not in live, f"{e['item']}: {e['job_id']} while {live[e['key']]} is open"
            live[e["key"]] = str(e["job_id"])
        elif e["event"] in ("attempt", "result", "cancelled"):
            assert live.pop(e["key"], None) == str(e["job_id"]), e
    if ids and cluster.accounting:
        # Slurm agrees: no two jobs of one run key ever ran at the same time, and a job the
        # store calls cancelled was cancelled (no finished job's result was dropped).
        def settled() -> dict[str, tuple[str, str, str]] | None:
            rows = [
                line.split("|")
                for line in slurm(
                    "sacct", "-X", "-n", "-P", f"--jobs={','.join(ids)}", "--format=JobID,State,Start,End"
                ).splitlines()
            ]
            found = {job: (state.split()[0], start, end) for job, state, start, end in rows}
            done = set(found) == set(ids) and all(s not in ACTIVE for s, _, _ in found.values())
            return found if done else None  # slurmdbd lags slurmctld by a moment

        accounted = wait_until("sacct to account for every job", settled, every=0.5)
        for e in log:
            if e["event"] == "cancelled":
                assert accounted[str(e["job_id"])][0] == "CANCELLED", (e, accounted[str(e["job_id"])])
        spans: dict[str, list[tuple[str, str]]] = {}
        for e in submitted:
            _, start, end = accounted[str(e["job_id"])]
            if start not in ("None", "Unknown"):
                spans.setdefault(e["key"], []).append((start, end))
        for key, runs in spans.items():
            runs.sort()
            assert all(a[1] != "Unknown" and a[1] <= b[0] for a, b in itertools.pairwise(runs)), (key, runs)
    assert not set(ids) & active(), "jobs of this session are still queued or running"
    assert foreign in active(), f"the foreign job {foreign} was touched"


def cancel_ours(pytester: pytest.Pytester) -> None:
    """After a failed test: our own jobs only, by id."""
    for e in of(pytester, "submitted"):
        slurm("scancel", str(e["job_id"]), check=False)


def run_with_deadline(pytester: pytest.Pytester, deadline: float, stuck: str, *args: str) -> pytest.RunResult:
    """Run pytest in a subprocess killed after `deadline` s: a sweep stuck on a job that can
    never run fails the test, saying how it is `stuck`, instead of hanging it."""
    try:
        return pytester.runpytest_subprocess(*args, timeout=deadline)
    except pytester.TimeoutExpired:
        seen = (pytester.path / "stdout").read_text(errors="replace").splitlines()
    pytest.fail(f"the sweep did not end within {deadline:g} s: {stuck}:\n" + "\n".join(seen[-12:]), pytrace=False)


@contextmanager
def injecting(fault: Callable[[], float]) -> Iterator[list[float]]:
    """Run `fault` in a thread while the sweep runs; it waits for its moment, injects, and
    returns when the fault hit (appended to the yielded list)."""
    hit: list[float] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            hit.append(fault())
        except BaseException as error:  # re-raised in the test
            errors.append(error)

    thread = threading.Thread(target=run, name="fault", daemon=True)
    thread.start()
    try:
        yield hit
    finally:
        thread.join(timeout=OUTER_S)
    if errors:
        raise errors[0]
    assert hit, "the fault was never injected"


# ---- node and controller faults ---------------------------------------------------------------


def test_node_drained_mid_sweep_is_resumed_before_the_next_job(
    pytester: pytest.Pytester, local_slurm: LocalSlurm, foreign_job: str, fake_trainer_env: None
) -> None:
    cell = make_cell(pytester, {"a": "--xla_fake_tgs=1100", "b": "--xla_fake_tgs=900", "c": "--xla_fake_tgs=1000"})
    resumed: list[float] = []

    def drain() -> float:
        wait_until("job a at step 3", lambda: job_at_step(pytester, "wave2::a[default]", 3))
        slurm("scontrol", "update", f"NodeName={NODE}", "State=DRAIN", "Reason=test")
        at = time.time()
        wait_until(f"{NODE} to be resumed", lambda: not node_state(NODE).startswith("drain"))
        resumed.append(time.time())
        return at

    try:
        with injecting(drain) as hit:
            result = pytester.runpytest(str(cell), "-k", "wave2", "-v", *FAKE, POLL, HANG)
    finally:
        slurm("scontrol", "update", f"NodeName={NODE}", "State=RESUME", check=False)
        cancel_ours(pytester)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [f"*resuming node {NODE}*", "*wave2::b[[]default[]] PASSED*", "*wave2::c[[]default[]] PASSED*"]
    )
    assert verdicts(pytester) == {
        "wave2::a[default]": ["success"],
        "wave2::b[default]": ["success"],
        "wave2::c[default]": ["success"],
    }
    assert node_state(NODE) in ("idle", "allocated", "mixed", "completing")  # back in service
    (resume,) = of(pytester, "node_resume")  # stored as it happened
    assert (resume["node"], resume["was"].startswith("drain"), resume["now"]) == (NODE, True, "usable")
    check_bookkeeping(pytester, local_slurm, foreign_job)
    timing("drained node → RESUME", resumed[0] - hit[0])


def test_slurmd_killed_mid_job_resume_fails_and_the_sweep_stops(
    pytester: pytest.Pytester, local_slurm: LocalSlurm, foreign_job: str, fake_trainer_env: None
) -> None:
    cell = make_cell(pytester, {"a": "--xla_fake_tgs=1100", "b": "--xla_fake_tgs=900"})

    def kill_slurmd() -> float:
        wait_until("job a at step 3", lambda: job_at_step(pytester, "wave2::a[default]", 3))
        stop_daemon(local_slurm, f"slurmd.{NODE}", signal.SIGKILL)
        return time.time()

    try:
        with injecting(kill_slurmd) as hit:
            # SlurmdTimeout is 30 s: the node shows down* some 30-50 s after its slurmd died.
            result = run_with_deadline(
                pytester,
                OUTER_S,
                "the sweep went on after a failed RESUME and waits on a job pending on the down node",
                str(cell),
                "-k",
                "wave2",
                "-v",
                *FAKE,
                POLL,
                HANG,
            )
    finally:
        cancel_ours(pytester)
        start_slurmd(local_slurm, NODE)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a STOP: non-zero
    result.stdout.fnmatch_lines(
        [
            f"*resuming node {NODE}*",
            "*[[]xla-tuning STOP[]] flt FSDP=8 sweep halted*",
            f"*Reason: {NODE} stays drained/down after 2 RESUME attempts*",
            f"*Failing node(s): {NODE}; recovery attempted: scontrol update NodeName={NODE} State=RESUME*",
            "*Pending profiles in queue: wave2::b[[]default[]] (cancelled by stop)*",
        ]
    )
    assert verdicts(pytester) == {"wave2::a[default]": ["success"]}  # finished before the node went
    (stop,) = of(pytester, "stop")
    assert NODE in stop["reason"] and stop["pending"] == ["wave2::b[default]"]
    resumes = of(pytester, "node_resume")  # both failed attempts are in the store
    assert [(e["node"], e["now"] != "usable") for e in resumes] == [(NODE, True), (NODE, True)]
    check_bookkeeping(pytester, local_slurm, foreign_job)
    timing("slurmd killed → STOP", stop["time"] - hit[0])


def test_controller_down_for_half_a_minute_is_waited_out(
    pytester: pytest.Pytester, local_slurm: LocalSlurm, foreign_job: str, fake_trainer_env: None
) -> None:
    cell = make_cell(pytester, {"a": "--xla_fake_tgs=1100", "b": "--xla_fake_tgs=900"})
    back: list[float] = []

    def outage() -> float:
        wait_until("job a at step 3", lambda: job_at_step(pytester, "wave2::a[default]", 3))
        stop_daemon(local_slurm, "slurmctld", signal.SIGTERM)
        at = time.time()
        try:
            time.sleep(30)  # job a finishes meanwhile (12 steps of 0.2 s): only slurmctld does not know
        finally:
            start_slurmctld(local_slurm)
            back.append(time.time())
        return at

    try:
        with injecting(outage) as hit:
            # Back off at most 4 s between failed polls (the playbook row's wait; 5 min by default).
            # Job a falls silent after its last step, early in the outage; back up, slurmctld
            # still calls it RUNNING until the job's slurmstepd retries its completion (≈15 s).
            # The hang detector gives Slurm one threshold (30 s here, 120 s by default) to catch up.
            result = pytester.runpytest(
                str(cell),
                "-k",
                "wave2",
                "-v",
                *FAKE,
                POLL,
                HANG.replace("floor_s=3", "floor_s=30"),
                "--xlatune-policy={controller_unreachable: {wait_s: 4}}",
            )
    finally:
        start_slurmctld(local_slurm)
        cancel_ours(pytester)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*job poll failed (*Unable to contact slurm controller*); retrying in * s*"])
    assert "cancelling" not in result.stdout.str()  # a finished job is no hang, even unconfirmed
    assert verdicts(pytester) == {"wave2::a[default]": ["success"], "wave2::b[default]": ["success"]}
    check_bookkeeping(pytester, local_slurm, foreign_job)
    first = of(pytester, "result", "wave2::a[default]")[0]
    timing("slurmctld back → job a's result", first["finished_at"] - back[0])
    timing("slurmctld stopped → job a's result", first["finished_at"] - hit[0])


# ---- faults the job acts out ------------------------------------------------------------------


def test_sigterm_after_the_last_step_counts_with_its_tgs(
    pytester: pytest.Pytester, local_slurm: LocalSlurm, foreign_job: str, fake_trainer_env: None
) -> None:
    cell = make_cell(pytester, {"torn": "--xla_fake_fail=sigterm_after_last"})
    result = pytester.runpytest(str(cell), "-k", "wave2", "-v", *FAKE, POLL, HANG)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*wave2::torn[[]default[]] PASSED 1000.* TGS*"])
    (torn,) = of(pytester, "result")
    assert (torn["verdict"], torn["exit_code"]) == ("soft_success", 143)
    assert torn["tgs"] == pytest.approx(1000, rel=0.01) and "teardown race" in torn["reason"]
    assert len(of(pytester, "submitted")) == 1
    check_bookkeeping(pytester, local_slurm, foreign_job)
    timing("SIGTERM after the last step → soft_success", torn["finished_at"] - fault_time(torn["log_path"]))


@pytest.mark.jax
def test_unknown_flag_with_the_real_workload_fails_naming_the_flag(
    pytester: pytest.Pytester, local_slurm: LocalSlurm, foreign_job: str
) -> None:
    flag = "--xla_gpu_enable_obsolete_thing"
    cell = make_cell(pytester, {"stale": f"{flag}=true"}, overrides="")
    result = pytester.runpytest(str(cell), "-k", "wave2", "-v", POLL, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"*job * (unknown_flag): XLA rejected flag {flag}: *Unknown flag in XLA_FLAGS: {flag}=true*"]
    )
    (stale,) = of(pytester, "result")
    assert stale["verdict"] == "unknown_flag" and len(of(pytester, "submitted")) == 1
    check_bookkeeping(pytester, local_slurm, foreign_job)
    # XLA's own abort line: `F1201 01:16:24.953129 29703 parse_flags_from_env.cc:234] Unknown flag …`
    text = Path(stale["log_path"]).read_text()
    m = re.search(
        r"[EF]\d{4} (\d\d:\d\d:\d\d\.\d+) +\d+ parse_flags_from_env\.cc:\d+\] Unknown flags? "
        r"in XLA_FLAGS",
        text,
    )
    assert m, text[-2000:]
    day = datetime.fromtimestamp(stale["finished_at"]).strftime("%Y-%m-%d")
    line_at = datetime.strptime(f"{day} {m.group(1)}", "%Y-%m-%d %H:%M:%S.%f").timestamp()
    timing(f"unknown flag line → verdict (poll {POLL_S:g} s)", stale["finished_at"] - line_at)


def test_a_retry_leaves_no_queued_job_unwatched(
    pytester: pytest.Pytester, local_slurm: LocalSlurm, foreign_job: str, fake_trainer_env: None
) -> None:
    # q's job is queued behind p's; when p's first job is cancelled Slurm starts q's at once,
    # and p's retry queues behind it. q's job hangs: someone must still notice within the
    # allowance, or p's retry waits for q's time limit (5 min here). The deadline is below that
    # limit, so such a wait fails here saying so, and far above the ~30 s the sweep takes idle.
    cell = make_cell(pytester, {"p": "--xla_fake_fail=rccl_hang", "q": "--xla_fake_fail=hang_before_step0"})
    try:
        result = run_with_deadline(
            pytester,
            RETRY_DEADLINE_S,
            "a job of a later item ran unwatched (its hang unnoticed) while a retry waited behind it",
            str(cell),
            "-k",
            "wave2",
            "-v",
            "-rsx",
            *FAKE,
            POLL,
            HANG,
        )
    finally:
        cancel_ours(pytester)
    result.assert_outcomes(skipped=1, xfailed=1)
    found = verdicts(pytester)
    assert found["wave2::p[default]"] == ["rccl_init_flake", "rccl_init_flake", "infra_flake"]
    assert found["wave2::q[default]"] == ["oom"]  # a silent OOM, hung after Memstats
    check_bookkeeping(pytester, local_slurm, foreign_job)


class Expected(NamedTuple):
    outcome: str  # of the one item
    submissions: int
    verdicts: list[str]  # of each of its jobs, attempts first
    text: str  # in the run's output
    cancelled: str = ""  # the phase the hang detector cancelled each job in


JOB_FAULTS = {
    "oom": Expected(
        "xfailed", 1, ["oom"], "*XFAIL*allocating 8.00GiB, Total memory 64.00GiB, Temp 9.50GiB*never retried*"
    ),
    "rccl_hang": Expected(
        "skipped",
        3,
        ["rccl_init_flake", "rccl_init_flake", "infra_flake"],
        "*SKIPPED*dropped as infra-flake: 3 × rccl_init_flake in a row*",
        cancelled="before_step0",
    ),
    "coord_timeout": Expected(
        "failed", 2, ["coordination_timeout"] * 2, "*Reason: 2 × coordination_timeout in a row on the same profile*"
    ),
    "hang_before_memstats": Expected(
        "failed",
        2,
        ["hang", "hang"],
        "*(hang): stopped making progress before Memstats (RCCL/IB init)*",
        cancelled="before_memstats",
    ),
    "hang_before_step0": Expected(
        "xfailed",
        1,
        ["oom"],
        "*XFAIL*after Memstats and before step 0: a silent OOM*never retried*",
        cancelled="before_step0",
    ),
    "hang_after_step0": Expected(
        "failed",
        2,
        ["hang", "hang"],
        "*(hang): stopped making progress after step 2 (a collective stuck*",
        cancelled="after_step0",
    ),
}


@pytest.mark.parametrize("fault", list(JOB_FAULTS))
def test_job_fault_follows_the_playbook(
    pytester: pytest.Pytester, local_slurm: LocalSlurm, foreign_job: str, fake_trainer_env: None, fault: str
) -> None:
    expected = JOB_FAULTS[fault]
    cell = make_cell(pytester, {"p": f"--xla_fake_fail={fault}"})
    result = pytester.runpytest(str(cell), "-k", "wave2", "-rsx", "-vv", *FAKE, POLL, HANG)
    result.assert_outcomes(**{expected.outcome: 1})
    result.stdout.fnmatch_lines([expected.text])
    assert verdicts(pytester) == {"wave2::p[default]": expected.verdicts}
    assert len(of(pytester, "submitted")) == expected.submissions
    cancels = re.findall(r"no new step for \d+ s \((\w+)\): cancelling", result.stdout.str())
    assert cancels == [expected.cancelled] * (expected.submissions if expected.cancelled else 0)
    if fault == "coord_timeout":
        assert result.ret == pytest.ExitCode.INTERRUPTED and len(of(pytester, "stop")) == 1
        result.stdout.fnmatch_lines(["*[[]xla-tuning STOP[]] flt FSDP=8 sweep halted*"])
    check_bookkeeping(pytester, local_slurm, foreign_job)
    for job in [*of(pytester, "attempt"), *of(pytester, "result")]:
        timing(f"{fault} job {job['job_id']} → {job['verdict']}", job["finished_at"] - fault_time(job["log_path"]))
