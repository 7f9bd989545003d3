"""The sbatch backend on the real local 4-node Slurm cluster: pinned, serial, queue kept full."""

from __future__ import annotations

import itertools
import json
import subprocess

import pytest

from tests.conftest import REAL_FIXED as FAKE  # backend mechanics: one job per item (fixed protocol)
from tests.integration.fixtures_infra import placement

pytestmark = pytest.mark.slurm

CELL = """\
model_tag: sb
nodelist: node[01-02]
parallelism: FSDP=8
baseline_repeats: 1
overrides: {{fake_step_sleep: {sleep}}}
waves:
  2:
    - {{name: fast, xla_flags: [--xla_fake_tgs=1100]}}
    - {{name: slow, xla_flags: [--xla_fake_tgs=900]}}
    - {{name: env8, env: {{NCCL_NCHANNELS_PER_NET_PEER: "8"}}, xla_flags: [--xla_fake_tgs=1000]}}
  3:
    - {{name: stale, xla_flags: [--xla_gpu_enable_obsolete_thing=true]}}
backend:
  kind: sbatch
  time: "5:00"
"""


def squeue_ids() -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def active_ids() -> set[str]:
    out = subprocess.run(
        ["squeue", "-h", "-t", "PENDING,RUNNING,COMPLETING", "-o", "%i"], capture_output=True, text=True, check=True
    )
    return set(out.stdout.split())


def test_sweep_through_sbatch_is_pinned_serial_and_reported(
    pytester: pytest.Pytester, local_slurm: None, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(".yml", sbcell=CELL.format(sleep=0.05))
    result = pytester.runpytest(str(cell), "-v", *FAKE, "--xlatune-poll-interval=0.3")
    result.assert_outcomes(passed=6, failed=1)  # + the winner-evidence run
    result.stdout.fnmatch_lines(
        [
            "*wave2::fast[[]default[]] PASSED 1100.* TGS +10.0* %*",
            "*Unknown flag in XLA_FLAGS: --xla_gpu_enable_obsolete_thing=true*",
        ]
    )
    store = pytester.path / ".xlatune" / "sbcell.jsonl"
    events = [json.loads(line) for line in store.read_text().splitlines()]
    assert [e["nodelist"] for e in events if e["event"] == "sweep"] == ["node[01-02]"]
    job_ids = [e["job_id"] for e in events if e["event"] == "submitted"]
    assert len(job_ids) == len(set(job_ids)) == 7
    # Every job ran on the frozen nodelist, and never two at once (exclusive on the same nodes).
    spans = []
    for job_id in job_ids:
        nodes, start, end = placement(job_id)
        assert nodes == "node[01-02]", (job_id, nodes)
        spans.append((start, end))
    spans.sort()
    assert all(prev[1] <= nxt[0] for prev, nxt in itertools.pairwise(spans)), spans
    # The NCCL env var reached the job through the rendered script.
    log = next((pytester.path / ".xlatune").rglob("*-sb-env8-default.log")).read_text()
    assert "0: completed step: 14" in log
    assert not set(job_ids) & active_ids()  # nothing of ours left queued or running
    report = (pytester.path / "sb-tuning.md").read_text()
    assert "pinned nodelist `node[01-02]`" in report


def test_preflight_refuses_a_drained_node_and_submits_nothing(
    pytester: pytest.Pytester, local_slurm: None, fake_trainer_env: None
) -> None:
    subprocess.run(["scontrol", "update", "NodeName=node04", "State=DRAIN", "Reason=xlatune-test"], check=True)
    try:
        cell = pytester.makefile(".yml", drained=CELL.format(sleep=0).replace("node[01-02]", "node[03-04]"))
        before = squeue_ids()
        result = pytester.runpytest(str(cell), *FAKE)
        result.assert_outcomes(failed=7)
        result.stdout.fnmatch_lines(["*drained.yml: nodelist: expected every pinned node idle*node04*"])
        assert squeue_ids() == before
    finally:
        subprocess.run(["scontrol", "update", "NodeName=node04", "State=RESUME"], check=True)


def test_other_nodelist_is_refused_unless_fresh_baseline(
    pytester: pytest.Pytester, local_slurm: None, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(".yml", moved=CELL.format(sleep=0))
    pytester.runpytest(str(cell), "-k", "baseline", *FAKE).assert_outcomes(passed=1)
    cell.write_text(CELL.format(sleep=0).replace("node[01-02]", "node[03-04]"))
    result = pytester.runpytest(str(cell), "-k", "baseline", *FAKE)
    assert (
        "moved.yml: nodelist: expected the sweep's frozen nodelist 'node[01-02]', found "
        "'node[03-04]'; pass --xlatune-fresh-baseline"
    ) in result.stdout.str()
    again = pytester.runpytest(str(cell), "-k", "baseline", "--xlatune-fresh-baseline", "-v", *FAKE)
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*baseline[[]default[]] PASSED*"])  # measured anew, not REUSED
