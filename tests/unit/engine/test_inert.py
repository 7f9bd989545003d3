"""Inert flags: which measured run a candidate compiled to (evidence/inert.py), and the sweep cutting
its job after the compile, durably (engine/inert.py): a session killed after the decision stores
the shared result on its rerun and submits nothing again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from test_poller import Clock, ScriptedLauncher

from pytest_xlatune.cell.values import Cell, ClusterSlot, Parallelism, Profile
from pytest_xlatune.engine.sweep import Sweep
from pytest_xlatune.evidence.fingerprint import read_dump
from pytest_xlatune.evidence.inert import COMPILED_LINE, PROGRAM_DIR, Settings, inert_lines, inert_source, inert_text
from pytest_xlatune.launch.base import JobRequest, SubmittedJob
from pytest_xlatune.launch.maxtext.launcher import MaxTextSlurmLauncher
from pytest_xlatune.launch.slurm_jobs import SlurmPlacement
from pytest_xlatune.plan.expand import RunSpec, expand
from pytest_xlatune.report.gate import GateCell, GateItem, Outcome, render_cell, render_html
from pytest_xlatune.results import JobResult, RunKind, Verdict
from pytest_xlatune.slurm.client import SlurmClient
from pytest_xlatune.store import ResultStore
from pytest_xlatune.transport.base import LocalTransport
from pytest_xlatune.verdict.gate_flags import FlagState, LockedFlag, locked_flags
from pytest_xlatune.verdict.lock import Lock, LockedRecipe
from pytest_xlatune.verdict.verdicts import settings_key

SETTINGS = Settings.build("default", "img", (("NCCL_A", "1"),), (("steps", "15"),), ("--xla_x=1",))


def measured(item: str, job_id: str, kind: RunKind = RunKind.BASELINE, **fields: object) -> JobResult:
    base = JobResult(
        key=item,
        item=item,
        wave="1",
        profile=item,
        config_tag="default",
        kind=kind,
        job_id=job_id,
        verdict=Verdict.SUCCESS,
        xla_flags=("--xla_x=1",),
        env=(("NCCL_A", "1"),),
        overrides=(("steps", "15"),),
        image="img",
        tgs=100.0,
        submitted_at=float(job_id),
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def test_a_candidate_is_inert_against_the_measured_run_with_its_program_and_settings() -> None:
    runs = [measured("p", "2", RunKind.PROFILE), measured("baseline", "3"), measured("other", "4")]
    prints = {"2": "abc", "3": "abc", "4": "def"}
    assert inert_source("abc", SETTINGS, runs, prints) == runs[1]  # a baseline run first
    assert inert_source("def", SETTINGS, runs, prints) == runs[2]
    assert inert_source("zzz", SETTINGS, runs, prints) is None
    assert inert_source("", SETTINGS, runs, {"2": "", "3": ""}) is None  # no complete fingerprint


@pytest.mark.parametrize(
    "settings",
    [
        replace(SETTINGS, env=(("NCCL_A", "2"),)),  # a runtime variable: never judged from the program
        replace(SETTINGS, overrides=(("steps", "20"),)),
        replace(SETTINGS, image="other"),
        replace(SETTINGS, config_tag="dense"),
        replace(SETTINGS, unset_env=("NCCL_A",)),
        Settings.build(
            "default",
            "img",
            (("NCCL_A", "1"),),
            (("steps", "15"),),
            ("--xla_x=1", "--xla_gpu_nccl_termination_timeout_seconds=60"),
        ),  # a runtime-only flag
    ],
)
def test_equal_programs_with_other_runtime_settings_are_never_inert(settings: Settings) -> None:
    assert inert_source("abc", settings, [measured("baseline", "3")], {"3": "abc"}) is None


def test_a_run_that_unset_a_variable_is_no_source_for_a_run_that_keeps_it() -> None:
    """restore_default unsets an env-file variable the image leaves unset: a candidate with the
    same program that keeps the variable (the env file sets it) is not its inert twin, nor its
    duplicate in the verdicts; the result records what it unset, through the store too."""
    restored = measured("restore_default", "3", RunKind.RESTORE_DEFAULT, unset_env=("JAX_LOG_COMPILES",))
    assert JobResult.from_dict(restored.to_dict()).unset_env == ("JAX_LOG_COMPILES",)
    assert inert_source("abc", SETTINGS, [restored], {"3": "abc"}) is None
    candidate = measured("o2", "4", RunKind.PROFILE)
    assert settings_key(candidate) != settings_key(restored)
    assert settings_key(replace(candidate, unset_env=("JAX_LOG_COMPILES",))) == settings_key(restored)


def test_only_an_own_unprofiled_measurement_is_a_source() -> None:
    stopped = measured("a", "5", verdict=Verdict.STOPPED_EARLY)  # its partial steady state counts
    assert inert_source("abc", SETTINGS, [stopped], {"5": "abc"}) == stopped
    runs = [
        measured("b", "2", shared_from="c"),
        measured("d", "3", verdict=Verdict.OOM, tgs=None),
        measured("e", "4", RunKind.EVIDENCE),
    ]
    assert inert_source("abc", SETTINGS, runs, dict.fromkeys("1234", "abc")) is None


def test_the_report_line_names_each_inert_run_its_flags_and_its_source() -> None:
    base = measured("wave1::baseline[default]", "1")
    inert = measured(
        "wave2::vec256[default]",
        "1",
        RunKind.PROFILE,
        shared_from=base.item,
        inert=True,
        xla_flags=("--xla_x=1", "--xla_vec=256"),
        reason=inert_text(base.item),
    )
    assert inert_lines([base, inert]) == (
        "inert flags: wave2::vec256[default] (--xla_vec=256): "
        "inert here: compiles to `wave1::baseline[default]`'s program",
    )
    assert inert_lines([base, replace(inert, inert=False)]) == ()
    assert JobResult.from_dict(inert.to_dict()) == inert


# --- the sweep ------------------------------------------------------------------------------


class Killed(BaseException):
    """What `kill -9` does to the session, at the point it is raised."""


class DumpingLauncher(ScriptedLauncher):
    """Each job dumps a program made of its XLA flags (`--xla_inert` ones change nothing), says
    it compiled, then prints its steps; `kill_at_cancel`: the session dies at its first cancel."""

    def __init__(self, jobs: Path, kill_at_cancel: bool = False, first: int = 0, ranks_apart: bool = False) -> None:
        super().__init__(polls_to_finish=3)
        self.jobs, self.kill_at_cancel, self.first, self.ranks_apart = jobs, kill_at_cancel, first, ranks_apart
        self.asked: list[tuple[str, bool]] = []

    def submit(self, request: JobRequest) -> SubmittedJob:
        self.submitted.append(request)
        job_id = str(self.first + 100 + len(self.submitted))
        program = self.jobs / job_id / PROGRAM_DIR
        program.mkdir(parents=True)
        code = " ".join(f for f in request.xla_flags if not f.startswith("--xla_inert"))
        (program / "module_0001.jit_train_step.cpu_after_optimizations.txt").write_text(
            f"HloModule jit_train_step_{job_id}\nENTRY %main {{ %p.{job_id} = f32[] parameter(0) }}\n"
        )
        (program / "module_0001.jit_train_step.kernel.ir-with-opt.ll").write_text(f"; {code}\ndefine void @k()\n")
        return SubmittedJob(job_id, f"/logs/{job_id}.log", str(self.jobs / job_id))

    def cancel(self, job_id: str) -> None:
        if self.kill_at_cancel:
            raise Killed
        super().cancel(job_id)

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        steps = super().read_log(job, 0) if self._seen.get(job.job_id, 0) > 1 else b""  # after a poll
        return (f"{COMPILED_LINE} (1.0 s)\n".encode() + steps)[offset:]

    def program_dump(self, job: SubmittedJob, *, stepped: bool) -> dict[str, str]:
        self.asked.append((job.job_id, stepped))
        if self.ranks_apart and not stepped:
            return {}  # maxtext-slurm on two nodes: not before a step (launch/maxtext/jobfiles.py)
        return read_dump(str(Path(job.job_dir) / PROGRAM_DIR))


def cell() -> Cell:
    return Cell(
        path=Path("c.yml"),
        model_tag="m",
        slot=ClusterSlot(nodes=1),
        parallelism=Parallelism((("FSDP", 8),)),
        baseline_repeats=1,
        profiles=(
            Profile("same", 2, ("--xla_inert=1",)),
            Profile("other", 2, ("--xla_a=1",)),
            Profile("same_env", 2, ("--xla_inert=1",), env=(("NCCL_X", "1"),)),
        ),
    )


def sweep(tmp_path: Path, launcher: DumpingLauncher) -> Sweep:
    clock = Clock()
    specs = expand(cell())
    s = Sweep(
        cell=cell(),
        specs=specs,
        store=ResultStore(tmp_path / "s.jsonl"),
        launcher=launcher,
        nodelist="n",
        poll_interval=5,
        sleep=clock.sleep,
        clock=clock,
    )
    s.set_upcoming(specs)
    return s


def spec(s: Sweep, name: str) -> RunSpec:
    return next(spec for spec in s.specs if spec.name == name)


def test_an_inert_candidate_is_cut_after_its_compile_and_shares_the_baselines_result(tmp_path: Path) -> None:
    launcher = DumpingLauncher(tmp_path / "jobs")
    s = sweep(tmp_path, launcher)
    base = s.run(spec(s, "wave1::baseline[default]")).result
    same = s.run(spec(s, "wave2::same[default]")).result
    other = s.run(spec(s, "wave2::other[default]")).result
    env = s.run(spec(s, "wave2::same_env[default]")).result  # same program, other runtime settings
    assert same.inert and same.shared_from == base.item and same.tgs == base.tgs
    assert same.reason == "inert here: compiles to `wave1::baseline[default]`'s program"
    assert launcher.cancelled == ["102"]  # its own job, cut before any step was judged
    assert not other.inert and not env.inert and other.job_id == "103" and env.job_id == "104"
    assert [e["job_id"] for e in s.store.events_of("inert")] == ["102"]
    cut = [r for r in s.store.jobs() if r.job_id == "102"]  # its cost is the sweep's
    assert [(r.verdict, r.reason) for r in cut] == [(Verdict.CANCELLED, same.reason)]
    assert inert_lines(s.store.latest_by_key().values())[0].startswith(
        "inert flags: wave2::same[default] (--xla_inert=1)"
    )
    again = s.run(spec(s, "wave2::other[default]").remeasured(1)).result  # a repeat measures again
    assert not again.inert and again.job_id == "105" and launcher.cancelled == ["102"]


def test_a_dump_readable_only_after_a_step_is_fingerprinted_then_and_the_candidate_still_cut(tmp_path: Path) -> None:
    launcher = DumpingLauncher(tmp_path / "jobs", ranks_apart=True)
    s = sweep(tmp_path, launcher)
    base = s.run(spec(s, "wave1::baseline[default]")).result
    same = s.run(spec(s, "wave2::same[default]")).result
    assert same.inert and same.shared_from == base.item and launcher.cancelled == ["102"]
    assert [a for a in launcher.asked if a[0] == "102"] == [("102", False), ("102", True)]  # compile line, step
    assert [e["job_id"] for e in s.store.events_of("fingerprint")] == ["101", "102"]


class MaxTextDumps(DumpingLauncher):
    """The dumps read back as the maxtext-slurm launcher reads them: `find` and reads through its
    transport (here LocalTransport), on `nodes` nodes."""

    def __init__(self, jobs: Path, nodes: int) -> None:
        super().__init__(jobs)
        transport = LocalTransport()
        self.maxtext = MaxTextSlurmLauncher(
            transport, SlurmClient(transport), str(jobs), SlurmPlacement("n", nodes, "debug"), "m", sweep_id="s.1"
        )

    def program_dump(self, job: SubmittedJob, *, stepped: bool) -> dict[str, str]:
        return self.maxtext.program_dump(job, stepped=stepped)


@pytest.mark.parametrize("nodes, steps_before_cut", [(1, 0), (2, 15)])
def test_through_the_maxtext_launchers_reads_a_candidate_is_cut_at_its_compile_line_or_on_more_nodes_its_first_step(
    tmp_path: Path, nodes: int, steps_before_cut: int
) -> None:
    launcher = MaxTextDumps(tmp_path / "jobs", nodes)
    s = sweep(tmp_path, launcher)
    base = s.run(spec(s, "wave1::baseline[default]")).result
    same = s.run(spec(s, "wave2::same[default]")).result
    assert same.inert and same.shared_from == base.item and launcher.cancelled == ["102"]
    (cut,) = [r for r in s.store.jobs() if r.job_id == "102"]
    assert cut.step_count == steps_before_cut  # the scripted log prints its 15 steps at once


class NoDumpReader(DumpingLauncher):
    """A launcher that cannot read a dump back (an sbatch cluster, a plugin's backend)."""

    program_dump = None  # type: ignore[assignment]


def test_a_launcher_that_cannot_read_the_dump_never_has_a_candidate_cut(tmp_path: Path) -> None:
    launcher = NoDumpReader(tmp_path / "jobs")
    s = sweep(tmp_path, launcher)
    s.run(spec(s, "wave1::baseline[default]"))
    same = s.run(spec(s, "wave2::same[default]")).result
    assert not same.inert and same.job_id == "102" and launcher.cancelled == []
    assert s.store.events_of("fingerprint") == [] and s.store.events_of("inert") == []


def test_a_session_killed_at_the_cut_stores_the_share_on_its_rerun_and_submits_nothing(tmp_path: Path) -> None:
    first = DumpingLauncher(tmp_path / "jobs", kill_at_cancel=True)
    s = sweep(tmp_path, first)
    s.run(spec(s, "wave1::baseline[default]"))
    with pytest.raises(Killed):
        s.run(spec(s, "wave2::same[default]"))
    assert s.store.pending_submissions().keys() == {s.key(spec(s, "wave2::same[default]"))}
    rerun = DumpingLauncher(tmp_path / "jobs", first=10)
    again = sweep(tmp_path, rerun)
    again.adopt_orphans()
    same = again.run(spec(again, "wave2::same[default]"))
    assert same.result.inert and not same.reused and rerun.submitted == []
    assert rerun.cancelled == ["102"]  # the job the killed session left running: cut now
    assert again.store.pending_submissions() == {}
    cut = [r for r in again.store.jobs() if r.job_id == "102"]  # its record is kept (cost unknown)
    assert [(r.verdict, r.reason, r.node_minutes) for r in cut] == [(Verdict.CANCELLED, same.result.reason, None)]
    third = sweep(tmp_path, DumpingLauncher(tmp_path / "jobs", first=20))
    assert third.run(spec(third, "wave2::same[default]")).reused  # and stays stored


def test_a_session_killed_after_storing_the_share_has_the_cut_job_stored_by_its_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = sweep(tmp_path, DumpingLauncher(tmp_path / "jobs"))
    s.run(spec(s, "wave1::baseline[default]"))
    append = s.store.append

    def killed_at_the_attempt(event: str, **payload: object) -> None:
        if event == "attempt":
            raise Killed
        append(event, **payload)

    monkeypatch.setattr(s.store, "append", killed_at_the_attempt)
    with pytest.raises(Killed):
        s.run(spec(s, "wave2::same[default]"))
    assert not [r for r in s.store.jobs() if r.job_id == "102"]  # the share is stored, the cut job not
    rerun = DumpingLauncher(tmp_path / "jobs", first=10)
    again = sweep(tmp_path, rerun)
    again.adopt_orphans()
    cut = [r for r in again.store.jobs() if r.job_id == "102"]
    assert [(r.verdict, r.item, r.node_minutes) for r in cut] == [(Verdict.CANCELLED, "wave2::same[default]", None)]
    assert again.run(spec(again, "wave2::same[default]")).reused and rerun.submitted == []
    again.adopt_orphans()  # once only
    assert len([r for r in again.store.jobs() if r.job_id == "102"]) == 1


# --- the gate: each locked flag on the new image ----------------------------------------------


def gate_run(kind: RunKind, job_id: str, **fields: object) -> JobResult:
    return replace(measured(f"gate::{kind.value}", job_id, kind), wave="gate", **fields)  # type: ignore[arg-type]


def recipe(*flags: str, env: tuple[tuple[str, str], ...] = ()) -> LockedRecipe:
    return LockedRecipe("default", "fast", flags, env, (), 2.0, 1.0, 3.0, 1.0, 100.0, ("7",))


def states(flags: tuple[LockedFlag, ...]) -> dict[str, FlagState]:
    return {f.setting: f.state for f in flags}


def test_a_locked_flag_is_removed_inert_or_still_effective_on_the_new_image() -> None:
    base, fast = gate_run(RunKind.BASELINE, "1"), gate_run(RunKind.GATE_RECIPE, "2")
    old = gate_run(RunKind.GATE_OLD_RECIPE, "3")  # the lock's image: never read here
    timeout = "--xla_gpu_nccl_termination_timeout_seconds=60"
    lock = recipe("--xla_a=1", timeout, env=(("NCCL_X", "1"),))
    same = locked_flags(lock, [base, fast, old], {"1": "p", "2": "p", "3": "q"})
    assert states(same) == {"--xla_a=1": FlagState.INERT, timeout: FlagState.RUNTIME, "NCCL_X=1": FlagState.RUNTIME}
    assert same[0].text() == (
        "`--xla_a=1` [default]: inert: the recipe compiles to the baseline's program "
        "on the new image (a default now, or no effect)"
    )
    assert states(locked_flags(lock, [base, fast], {"1": "p", "2": "q"}))["--xla_a=1"] is FlagState.EFFECTIVE
    assert states(locked_flags(lock, [base, fast], {"1": "p"}))["--xla_a=1"] is FlagState.NOT_JUDGED
    rejected = replace(
        fast,
        verdict=Verdict.UNKNOWN_FLAG,
        tgs=None,
        reason="XLA rejected flag --xla_b: Unknown flag in XLA_FLAGS: --xla_b=2",
    )
    found = states(locked_flags(recipe("--xla_a=1", "--xla_b=2"), [base, rejected], {"1": "p"}))
    assert found == {"--xla_a=1": FlagState.NOT_JUDGED, "--xla_b=2": FlagState.REMOVED}
    # A value the new image's parser cannot read (the flag's type changed): rejected, said so.
    unread = replace(
        rejected,
        reason="XLA rejected flag --xla_b: E1204 command_line_flags.cc:63] Couldn't interpret value 2 for flag xla_b.",
    )
    (_, b) = locked_flags(recipe("--xla_a=1", "--xla_b=2"), [base, unread], {"1": "p"})
    assert b.state is FlagState.REMOVED and "XLA rejects it as a value it cannot read (job 2)" in b.text()


def test_the_gate_report_lists_each_locked_flag() -> None:
    lock = Lock("m", "FSDP=8", "old", "n", "2026-12-01", (recipe("--xla_a=1"),))
    flags = locked_flags(
        lock.recipes[0], [gate_run(RunKind.BASELINE, "1"), gate_run(RunKind.GATE_RECIPE, "2")], {"1": "p", "2": "p"}
    )
    gate = GateCell(
        "c", "c.lock.json", lock, "new", "", "", (GateItem("gate::fast[default]", Outcome.PASSED),), (), flags
    )
    assert "### Locked flags on the new image\n\n- `--xla_a=1` \\[default\\]: inert: " in render_cell(gate)
    assert "--xla_a=1` [default]: inert: the recipe compiles" in render_html([gate])
