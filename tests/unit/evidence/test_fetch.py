"""evidence.fetch: only what the analysis reads is copied, and a copy failure is a problem line."""

from __future__ import annotations

from pathlib import Path

from pytest_xlatune.evidence.fetch import fetch_evidence
from pytest_xlatune.transport.base import CommandResult, LocalTransport


def cluster_job(root: Path) -> dict[str, str]:
    dump = root / "job" / "xla_dump"
    dump.mkdir(parents=True)
    (dump / "module_0001.jit_train_step.before_optimizations.txt").write_text("HloModule before\n")
    (dump / "module_0001.jit_train_step.sm_8.0_gpu_after_optimizations.txt").write_text("HloModule small\n")
    (dump / "module_0002.jit_train_step.sm_8.0_gpu_after_optimizations.txt").write_text("HloModule big " * 50)
    (dump / "module_0003.jit_init.sm_8.0_gpu_after_optimizations.txt").write_text("HloModule init " * 99)
    trace_dir = root / "job" / "run" / "tensorboard" / "plugins" / "profile" / "2026_12_01"
    trace_dir.mkdir(parents=True)
    (trace_dir / "host.xplane.pb").write_bytes(b"\0" * 4096)
    (trace_dir / "host.trace.json.gz").write_bytes(b"\x1f\x8b trace")
    return {"hlo_dump": str(dump), "profile": str(trace_dir.parents[0])}


def test_the_train_step_module_and_the_trace_are_copied_and_named(tmp_path: Path) -> None:
    remote = cluster_job(tmp_path / "cluster")
    into = tmp_path / "store" / "evidence" / "17"
    found, problems = fetch_evidence(LocalTransport(), remote, into)
    assert problems == []
    assert sorted(p.name for p in (into / "xla_dump").iterdir()) == [
        "module_0002.jit_train_step.sm_8.0_gpu_after_optimizations.txt"
    ]  # the largest train step
    assert (into / "profile" / "2026_12_01" / "host.trace.json.gz").read_bytes() == b"\x1f\x8b trace"
    assert not list(into.rglob("*.xplane.pb")) and not list(into.rglob("*.partial"))
    assert found == {
        "hlo_dump": str(into / "xla_dump"),
        "hlo_dump_remote": remote["hlo_dump"],
        "profile": str(into / "profile"),
        "profile_remote": remote["profile"],
    }


class FailingFind(LocalTransport):
    def run(self, argv, **kwargs) -> CommandResult:  # type: ignore[no-untyped-def, override]
        if argv[0] == "find":
            return CommandResult(tuple(argv), 1, "", "find: permission denied")
        return super().run(argv, **kwargs)


def test_a_part_that_cannot_be_copied_keeps_its_cluster_path_and_says_why(tmp_path: Path) -> None:
    remote = cluster_job(tmp_path / "cluster")
    found, problems = fetch_evidence(FailingFind(), remote, tmp_path / "store")
    assert found == remote
    assert [p.split(":")[0] for p in problems] == [f"HLO dump {remote['hlo_dump']}", f"profile {remote['profile']}"]
    assert all("permission denied" in p for p in problems)


def test_a_linked_evidence_folder_in_the_store_is_not_written_through(tmp_path: Path) -> None:
    remote = cluster_job(tmp_path / "cluster")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "store" / "cell").mkdir(parents=True)
    (tmp_path / "store" / "cell" / "evidence").symlink_to(elsewhere, target_is_directory=True)
    found, problems = fetch_evidence(LocalTransport(), remote, tmp_path / "store" / "cell" / "evidence" / "17")
    assert found == remote and len(problems) == 2
    assert all("evidence: is a symbolic link" in p for p in problems)
    assert list(elsewhere.iterdir()) == []
