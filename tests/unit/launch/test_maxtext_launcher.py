"""MaxTextSlurmLauncher over a scripted in-memory transport: argv, block life cycle, ownership, logs."""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from pytest_xlatune.cell.load import CellError, load_cell
from pytest_xlatune.launch.base import JobRequest, LauncherError, SubmittedJob
from pytest_xlatune.launch.maxtext.files import install_block, render_tune_block
from pytest_xlatune.launch.maxtext.launcher import MaxTextSlurmLauncher, RestoreDefault
from pytest_xlatune.launch.preflight import PreflightError
from pytest_xlatune.launch.slurm_jobs import SlurmPlacement
from pytest_xlatune.plan.expand import expand, restore_default_changes
from pytest_xlatune.plan.request import job_request, possible_requests
from pytest_xlatune.slurm.client import SlurmClient
from pytest_xlatune.transport.base import CommandResult, TransportError
from pytest_xlatune.triage.logs import StepLog

TESTS = Path(__file__).resolve().parents[2]
STANDIN = TESTS / "maxtext_slurm_standin"
DATA = TESTS / "data" / "maxtext"
CK = "/work/ck"
SWEEP = "demo.abc123"
JOB_NAME_79 = "JAX-demo-no_eigen_mt-steps_15"

CELL = """\
model_tag: demo
nodelist: node[01-02]
parallelism: FSDP=2
pdbs: 2
baseline_repeats: 2
env_file:
  - {flag: --xla_cpu_enable_fast_math=true, image_default: "false"}
  - {env: XLA_PYTHON_CLIENT_MEM_FRACTION=.85, image_default: ".93"}
waves:
  2:
    - {name: no_eigen_mt, xla_flags: [--xla_cpu_multi_thread_eigen=false]}
    - {name: nccl_chan8, env: {NCCL_NCHANNELS_PER_NET_PEER: "8"}}
backend:
  kind: maxtext-slurm
  checkout: /work/ck
  partition: debug
"""


def submit_output(job_id: str, name: str = JOB_NAME_79, workspace: str = f"{CK}/outputs") -> str:
    return (
        f"MODEL_NAME=demo\nJOB_NAME={name}\n[ARTIFACT] Building artifact...\nSubmitted batch job {job_id}\n"
        f"[ARTIFACT] {workspace}/{job_id}-{name}/artifact -> .artifacts/artifact_20261201_000000_abcd\n"
    )


class FakeTransport:
    """Files and directories in dicts; commands answered from a script; every call recorded."""

    def __init__(self, files: Mapping[str, bytes]) -> None:
        self.files = dict(files)
        self.dirs: set[str] = {f"{CK}/.git"}
        self.no_rsync = False
        self.modes = dict.fromkeys(self.files, "755")
        self.calls: list[tuple[tuple[str, ...], str | None]] = []
        self.submit_replies: list[tuple[int, str, str]] = []
        self.connections_opened = 1

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        args = tuple(argv)
        self.calls.append((args, cwd))
        if args[0] == "stat":
            ok = args[-1] in self.files
            return CommandResult(args, 0 if ok else 1, f"{self.modes.get(args[-1], '')}\n" if ok else "", "")
        if args[0] == "chmod":
            self.modes[args[2]] = args[1]
            return CommandResult(args, 0, "", "")
        if args[0] == "find":
            return CommandResult(args, 0, "".join(f"{p}\n" for p in self._find(args[1], args[2:])), "")
        if args[0] == "grep":  # grep [-q|-l] -F -- TEXT FILE...
            text, paths = args[args.index("--") + 1].encode(), args[args.index("--") + 2 :]
            hits = [path for path in paths if text in self.files.get(path, b"")]
            return CommandResult(args, 0 if hits else 1, "".join(f"{h}\n" for h in hits) if "-l" in args else "", "")
        if args[:2] == ("rsync", "--version"):
            return CommandResult(args, 127 if self.no_rsync else 0, "rsync  version 3.2.7\n", "")
        if args[:2] == ("test", "-d"):
            return CommandResult(args, 0 if args[2] in self.dirs else 1, "", "")
        if "./submit.sh" in args:
            code, out, err = self.submit_replies.pop(0)
            return CommandResult(args, code, out, err)
        if args[0] == "scancel":
            return CommandResult(args, 0, "", "")
        raise AssertionError(f"unexpected command {args}")

    def _find(self, top: str, tests: Sequence[str]) -> list[str]:
        opts = dict(zip(tests[::2], tests[1::2]))
        found = []
        for path in [*self.files, *self.dirs]:
            if not path.startswith(top + "/"):
                continue
            depth = path[len(top) :].count("/")
            kind = "d" if path in self.dirs else "f"
            if (
                int(opts.get("-mindepth", 0)) <= depth <= int(opts.get("-maxdepth", 99))
                and opts.get("-type", kind) == kind
                and fnmatch.fnmatchcase(posixpath.basename(path), opts.get("-name", "*"))
                and fnmatch.fnmatchcase(path, opts.get("-path", "*"))
            ):
                found.append(path)
        return found

    def read_from(self, path: str, offset: int, limit: int | None = None) -> bytes:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path][offset:]

    def write_atomic(self, path: str, data: bytes) -> None:
        self.files[path] = data
        self.modes[path] = "644"  # a renamed-in temp file has default permissions

    def exists(self, path: str) -> bool:
        return path in self.files or path in self.dirs

    def close(self) -> None:
        pass

    def commands(self, program: str) -> list[tuple[str, ...]]:
        return [argv for argv, _ in self.calls if program in argv]


def checkout_files(**extra: bytes) -> dict[str, bytes]:
    names = ("submit.sh", "train_env.sh", "container_env.sh", "configs/demo.gpu.yml", "configs/demo.env.sh")
    files = {f"{CK}/{name}": (STANDIN / name).read_bytes() for name in names}
    files.update({f"{CK}/{name}": data for name, data in extra.items()})
    return files


@pytest.fixture
def cell_path(tmp_path: Path) -> Path:
    path = tmp_path / "demo.yml"
    path.write_text(CELL)
    return path


def make(
    transport: FakeTransport,
    cell_path: Path,
    *,
    ray: bool = False,
    prepare: bool = True,
    events: list[tuple[str, dict[str, object]]] | None = None,
    image: str = "",
) -> MaxTextSlurmLauncher:
    cell = load_cell(cell_path)
    launcher = MaxTextSlurmLauncher(
        transport,
        SlurmClient(transport),
        CK,
        SlurmPlacement("node[01-02]", 2, "debug"),
        cell.model_tag,
        sweep_id=SWEEP,
        ray=ray,
        cell=str(cell_path),
        lookup_interval=0,
        restore_default=RestoreDefault(*restore_default_changes(cell.env_file)),
        record=lambda event, **payload: (events if events is not None else []).append((event, payload)),
        image=image,
    )
    if prepare:  # as Session does: install the block, then an arm for every run the sweep may make
        launcher.prepare()
        launcher.check_requests(possible_requests(cell, expand(cell)))
    return launcher


def request(cell_path: Path, profile: str) -> JobRequest:
    cell = load_cell(cell_path)
    return job_request(cell, next(s for s in expand(cell) if s.profile == profile))


def submitted_argv(transport: FakeTransport) -> list[str]:
    argv, cwd = [(a, c) for a, c in transport.calls if "./submit.sh" in a][-1]
    assert cwd == CK
    return list(argv)


# ---- submit argv -----------------------------------------------------------------------------

TEMPLATE = ["./submit.sh", "demo:{tag}", "--partition=debug", "--nodes=2", "--nodelist=node[01-02]", "--time=45:00",
            "--"]  # fmt: skip
HEARTBEAT = "jax_distributed_heartbeat_timeout_seconds=99999"
# FSDP=2 is what the stand-in's gpu.yml has: the skill passes no parallelism override then.
ARGS = "steps=15 dataset_type=synthetic per_device_batch_size=2"


def arm_line(transport: FakeTransport, arm: str) -> str:
    """The TUNE_ARGS line of an arm in the installed train_env.sh."""
    lines = transport.files[f"{CK}/train_env.sh"].decode().splitlines()
    at = lines.index(f"    {arm})")
    return next(line.strip() for line in lines[at + 1 :] if line.strip().startswith("TUNE_ARGS+=("))


@pytest.mark.parametrize("profile, arm, dump, args", [
    ("no_eigen_mt", "no_eigen_mt", [], ARGS),
    ("nccl_chan8", "nccl_chan8", [], ARGS),
    ("baseline", "baseline", [], ARGS),
    ("baseline-r2", "baseline", [], ARGS),
    ("restore_default", "restore_default", [], ARGS),
    ("evidence", "evidence", ["_env_ENABLE_XLA_DUMP=1"],
     f"{ARGS} profiler=xplane skip_first_n_steps_for_profiler=5 profiler_steps=4"),
])  # fmt: skip
def test_submit_argv_names_the_arm_that_holds_the_run_settings(
    cell_path: Path, profile: str, arm: str, dump: list[str], args: str
) -> None:
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79"), ""))
    make(transport, cell_path).submit(request(cell_path, profile))
    expected = [part.format(tag=profile) for part in TEMPLATE]
    assert submitted_argv(transport) == [*expected, *dump, f"_env_TUNE_PROFILE={arm}"]
    assert arm_line(transport, arm) == f"TUNE_ARGS+=({args} {HEARTBEAT})"


def test_parallelism_overrides_only_where_gpu_yml_differs(tmp_path: Path) -> None:
    cell_path = tmp_path / "fsdp4.yml"
    cell_path.write_text(CELL.replace("FSDP=2", "FSDP=4").replace("node[01-02]", "node[01-04]"))
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79"), ""))
    make(transport, cell_path).submit(request(cell_path, "no_eigen_mt"))
    # dcn_pipeline_parallelism=1 is gpu.yml's value too: the same config without it
    assert arm_line(transport, "no_eigen_mt") == f"TUNE_ARGS+=({ARGS} dcn_fsdp_parallelism=4 {HEARTBEAT})"


def test_ray_goes_in_front_through_env(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79"), ""))
    make(transport, cell_path, ray=True).submit(request(cell_path, "no_eigen_mt"))
    assert submitted_argv(transport)[:3] == ["env", "RAY=1", "./submit.sh"]


def test_submitted_job_names_the_log_and_dir_submit_sh_announced(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79", workspace="/scratch/ws"), ""))
    job = make(transport, cell_path).submit(request(cell_path, "no_eigen_mt"))
    assert job == SubmittedJob("79", f"/scratch/ws/79-{JOB_NAME_79}.log", f"/scratch/ws/79-{JOB_NAME_79}")


def test_a_run_known_only_at_run_time_gets_its_own_arm_and_close_still_restores_bytes(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    before = dict(transport.files)
    events: list[tuple[str, dict[str, object]]] = []
    launcher = make(transport, cell_path, events=events)
    # A stack of two winners: flags no installed arm sets.
    stack = JobRequest(
        "demo-stack_top2-default",
        "stack_top2",
        ("steps=15",),
        xla_flags=("--xla_cpu_multi_thread_eigen=false",),
        env=(("NCCL_NCHANNELS_PER_NET_PEER", "8"),),
        config_tag="default",
    )
    transport.submit_replies.append((0, submit_output("80"), ""))
    launcher.submit(stack)
    assert submitted_argv(transport)[-1] == "_env_TUNE_PROFILE=stack_top2"
    train_env = transport.files[f"{CK}/train_env.sh"].decode()
    assert (
        "stack_top2)" in train_env and train_env.count("--xla_cpu_multi_thread_eigen=false") == 3
    )  # its arm, winner's, the stack's
    assert "stack_top2)" in transport.files[f"{CK}/configs/demo.env.sh"].decode()
    assert (
        "tune_arm_added",
        {
            "profile": "stack_top2",
            "xla_flags": ["--xla_cpu_multi_thread_eigen=false"],
            "env": [["NCCL_NCHANNELS_PER_NET_PEER", "8"]],
            "args": ["steps=15", HEARTBEAT],
        },
    ) in events
    # The same settings again (the winner's evidence run re-running the stack): that arm.
    transport.submit_replies.append((0, submit_output("81"), ""))
    launcher.submit(
        JobRequest(
            "demo-winner-default", "winner", ("steps=15",), xla_flags=stack.xla_flags, env=stack.env, evidence=True
        )
    )
    assert submitted_argv(transport)[-2:] == ["_env_ENABLE_XLA_DUMP=1", "_env_TUNE_PROFILE=stack_top2"]
    # The same profile name with other settings: `<profile>.<config tag>`.
    transport.submit_replies.append((0, submit_output("82"), ""))
    launcher.submit(replace(stack, passthrough=("steps=20",), unset_env=("NCCL_BUFFSIZE",)))
    assert submitted_argv(transport)[-1] == "_env_TUNE_PROFILE=stack_top2.default"
    assert "unset NCCL_BUFFSIZE" in transport.files[f"{CK}/train_env.sh"].decode()
    launcher.close()
    assert {k: transport.files[k] for k in before} == before


@pytest.mark.parametrize("code, out, err, message", [
    (1, "", "!!! Model name resolution failed. Exiting...\n", "exited 1: no 'Submitted batch job <id>' line"),
    (1, submit_output("91"), "[ERROR] Job 91 died in prolog before writing any log: FAILED\n", "died before"),
])  # fmt: skip
def test_failed_submission_is_one_line_naming_the_command(
    cell_path: Path, code: int, out: str, err: str, message: str
) -> None:
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((code, out, err))
    with pytest.raises(LauncherError, match=message) as info:
        make(transport, cell_path).submit(request(cell_path, "baseline"))
    assert "./submit.sh demo:baseline" in str(info.value) and "\n" not in str(info.value)


def test_job_accepted_then_submit_sh_failing_is_cancelled(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((1, submit_output("79"), "mkdir: cannot create directory\n"))
    with pytest.raises(LauncherError, match="after submitting job 79 \\(cancelled\\)"):
        make(transport, cell_path).submit(request(cell_path, "baseline"))
    assert transport.commands("scancel") == [("scancel", "79")]


# ---- the TUNE_PROFILE blocks -----------------------------------------------------------------


def test_prepare_installs_both_blocks_and_close_restores_bytes_and_modes(cell_path: Path) -> None:
    original = checkout_files()
    transport = FakeTransport(original)
    events: list[tuple[str, dict[str, object]]] = []
    launcher = make(transport, cell_path, events=events)
    train_env = transport.files[f"{CK}/train_env.sh"].decode()
    env_sh = transport.files[f"{CK}/configs/demo.env.sh"].decode()
    assert train_env.startswith(original[f"{CK}/train_env.sh"].decode())
    assert f"# >>> xlatune TUNE_PROFILE sweep={SWEEP} " in train_env and "    no_eigen_mt)" in train_env
    assert "TUNE_PROFILE: again after configs/demo.env.sh" in env_sh
    assert env_sh.rstrip().endswith("# <<< xlatune TUNE_PROFILE <<<")
    assert transport.modes[f"{CK}/train_env.sh"] == transport.modes[f"{CK}/configs/demo.env.sh"] == "755"
    launcher.close()
    assert transport.files == original
    assert transport.modes[f"{CK}/train_env.sh"] == "755"
    assert events == [("cleanup", {"restored": [f"{CK}/train_env.sh", f"{CK}/configs/demo.env.sh"],
                                   "errors": {}, "ssh_connections": 1})]  # fmt: skip
    launcher.close()  # twice is harmless
    assert len(events) == 1


def test_no_env_file_means_one_block(cell_path: Path) -> None:
    files = checkout_files()
    del files[f"{CK}/configs/demo.env.sh"]
    transport = FakeTransport(files)
    make(transport, cell_path).close()
    assert transport.files == files
    assert all("demo.env.sh" not in argv[-1] for argv in transport.commands("chmod"))


def test_cleanup_keeps_edits_made_during_the_session(cell_path: Path) -> None:
    original = checkout_files()
    transport = FakeTransport(original)
    launcher = make(transport, cell_path)
    edit = b"export NCCL_EDITED_DURING_SWEEP=1\n"
    transport.files[f"{CK}/train_env.sh"] += edit
    launcher.close()
    assert transport.files[f"{CK}/train_env.sh"] == original[f"{CK}/train_env.sh"] + edit


def test_a_block_left_by_a_killed_session_of_this_sweep_is_replaced(cell_path: Path) -> None:
    clean = checkout_files()
    xla, env = render_tune_block([], "demo")
    stale = dict(clean)
    stale[f"{CK}/train_env.sh"] = install_block(clean[f"{CK}/train_env.sh"].decode(), xla + env, SWEEP).encode()
    transport = FakeTransport(stale)
    launcher = make(transport, cell_path)
    assert transport.files[f"{CK}/train_env.sh"].decode().count(">>> xlatune TUNE_PROFILE") == 1
    assert launcher.inventory()["env_file"]["deployed"] == [["--xla_cpu_enable_fast_math", "true"],
                                                            ["XLA_PYTHON_CLIENT_MEM_FRACTION", ".85"]]  # fmt: skip
    launcher.close()
    assert transport.files == clean


TRAIN_ENV_LINES = (STANDIN / "train_env.sh").read_text().count("\n")


@pytest.mark.parametrize("path, text, line", [
    ("train_env.sh", None, f"line {TRAIN_ENV_LINES + 2}: a pytest-xlatune block of sweep 'other.sweep'"),
    ("train_env.sh", b'export A=1\ncase "${TUNE_PROFILE}" in\n  x) ;;\nesac\n',
     "line 2: 'case \"${TUNE_PROFILE}\" in'"),
    ("configs/demo.env.sh", b"export X=1\n# TUNE_PROFILE=old\n", "line 2: '# TUNE_PROFILE=old'"),
])  # fmt: skip
def test_foreign_tune_content_is_refused_and_nothing_written(
    cell_path: Path, path: str, text: bytes | None, line: str
) -> None:
    files = checkout_files()
    if text is None:  # another sweep's block
        text = install_block(files[f"{CK}/{path}"].decode(), "TUNE_FLAGS=\n", "other.sweep").encode()
    files[f"{CK}/{path}"] = text
    transport = FakeTransport(files)
    with pytest.raises(PreflightError) as info:
        make(transport, cell_path)
    message = str(info.value)
    assert message.startswith(f"{cell_path}: backend.checkout: {CK}/{path} has TUNE_PROFILE content")
    assert line in message and f"checkout {CK}" in message and "\n" not in message
    assert transport.files == files


def test_missing_checkout_files_and_missing_image_fail_preflight(cell_path: Path) -> None:
    files = checkout_files()
    del files[f"{CK}/configs/demo.gpu.yml"]
    with pytest.raises(
        PreflightError,
        match=f"model_tag: expected configs/demo.gpu.yml or a unique substring of "
        f"a config name, found no match among no configs/..gpu.yml .in {CK}/configs.",
    ):
        make(FakeTransport(files), cell_path)
    image = b'DOCKER_IMAGE="${DOCKER_IMAGE:-/shared/images/jax.tar}"\n'
    with pytest.raises(PreflightError, match=r"image: DOCKER_IMAGE /shared/images/jax.tar .* does not exist"):
        make(FakeTransport(checkout_files(**{"container_env.sh": image})), cell_path)
    present = FakeTransport(checkout_files(**{"container_env.sh": image}))
    present.files["/shared/images/jax.tar"] = b"tar"
    make(present, cell_path).close()


def test_an_image_asked_for_runs_submit_sh_under_docker_image(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    transport.files["/images/maxtext-v26.3.tar"] = b"tar"
    transport.submit_replies.append((0, submit_output("79"), ""))
    launcher = make(transport, cell_path, image="/images/maxtext-v26.3.tar")
    launcher.submit(request(cell_path, "baseline"))
    argv = submitted_argv(transport)
    assert argv[:3] == ["env", "DOCKER_IMAGE=/images/maxtext-v26.3.tar", "./submit.sh"]
    assert launcher.inventory()["container_env"]["DOCKER_IMAGE"] == "/images/maxtext-v26.3.tar"
    launcher.close()
    with pytest.raises(
        PreflightError,
        match=r"image: DOCKER_IMAGE /images/gone.tar \(the image asked for\) "
        "does not exist on the cluster",
    ):
        make(FakeTransport(checkout_files()), cell_path, image="/images/gone.tar")
    with pytest.raises(ValueError, match=r"expected a container image .*found '-v /:/host'"):
        make(FakeTransport(checkout_files()), cell_path, image="-v /:/host")


def test_preflight_gives_every_possible_run_an_arm_and_refuses_a_name_that_cannot_fit(cell_path: Path) -> None:
    cell = load_cell(cell_path)
    transport = FakeTransport(checkout_files())
    launcher = make(transport, cell_path)
    requests = list(possible_requests(cell, expand(cell)))
    # Both evidence runs: wave 1.5 and the winner's, once per profile that could win.
    assert [r.profile for r in requests if r.evidence] == ["evidence", "winner", "winner"]
    assert list(launcher.arms) == [
        "baseline",
        "restore_default",
        "evidence",
        "no_eigen_mt",
        "nccl_chan8",
        "winner",
        "winner.default",
    ]
    # Long MaxText settings cost the JOB_NAME nothing: they live in the arm.
    long = replace(requests[0], profile="long", passthrough=(*requests[0].passthrough, f"remat_policy={'x' * 300}"))
    launcher.check_requests([long])
    assert "remat_policy=" + "x" * 300 in arm_line(transport, "long")
    launcher.close()
    # What still cannot fit: a model name of 200 bytes; the message says what each part costs.
    model = "m" * 200
    files = {path.replace("/demo.", f"/{model}."): data for path, data in checkout_files().items()}
    transport = FakeTransport(files)
    big = MaxTextSlurmLauncher(
        transport,
        SlurmClient(transport),
        CK,
        SlurmPlacement("node[01-02]", 2, "debug"),
        model,
        sweep_id=SWEEP,
        cell=str(cell_path),
    )
    big.prepare()
    with pytest.raises(
        PreflightError,
        match=r"demo.yml: waves: demo-restore_default-default: JOB_NAME would be 254 "
        r"bytes; submit.sh refuses more than 243 .* model name 'm+' 200, exp tag "
        r"'restore_default' 16, _env_TUNE_PROFILE 34; xlatune names 'restore_default', "
        r"not the cell: shorten the model name by 11",
    ):
        big.check_requests(requests)
    assert not [argv for argv, _ in transport.calls if "./submit.sh" in argv]
    big.close()


def test_submit_before_prepare_is_refused(cell_path: Path) -> None:
    launcher = make(FakeTransport(checkout_files()), cell_path, prepare=False)
    with pytest.raises(LauncherError, match="prepare\\(\\) first"):
        launcher.submit(request(cell_path, "baseline"))


def test_inventory_reads_the_skill_step_2_files(cell_path: Path) -> None:
    files = checkout_files(**{"demo-tuning.md": b"# demo tuning\n## Inventory\n"})
    launcher = make(FakeTransport(files), cell_path)
    inventory = launcher.inventory()
    assert inventory["gpu_yml"]["settings"]["dcn_fsdp_parallelism"] == 2
    assert inventory["env_file"]["not_restored"] == []
    assert inventory["container_env"]["DOCKER_IMAGE"] == "rocm/jax-training:maxtext-v26.2"
    assert inventory["tuning_md"] == {"path": f"{CK}/demo-tuning.md", "exists": True, "fresh_start": False,
                                      "text": "# demo tuning\n## Inventory\n"}  # fmt: skip


# ---- ownership, logs, artifacts --------------------------------------------------------------


def test_cancel_only_own_jobs(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79"), ""))
    launcher = make(transport, cell_path)
    launcher.submit(request(cell_path, "baseline"))
    launcher.cancel("79")
    with pytest.raises(LauncherError, match="refusing to cancel job 80: not submitted by this sweep"):
        launcher.cancel("80")
    assert transport.commands("scancel") == [("scancel", "79")]


def test_reattach_only_to_jobs_with_an_outputs_entry(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    transport.dirs.add(f"{CK}/outputs/79-{JOB_NAME_79}")
    launcher = make(transport, cell_path)
    assert launcher.reattach(SubmittedJob("79", f"{CK}/outputs/79-{JOB_NAME_79}.log", f"{CK}/outputs/79-{JOB_NAME_79}"))
    assert not launcher.reattach(SubmittedJob("80", f"{CK}/outputs/80-x.log", f"{CK}/outputs/80-x"))
    launcher.cancel("79")
    with pytest.raises(LauncherError):
        launcher.cancel("80")


def test_log_is_found_lazily_and_after_a_tgs_rename(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79"), ""))
    launcher = make(transport, cell_path)
    job = launcher.submit(request(cell_path, "baseline"))
    assert launcher.read_log(job, 0) == b""  # pending: no log yet
    renamed = f"{CK}/outputs/79-{JOB_NAME_79}-TGS_1234.log"
    transport.files[renamed] = b"0: completed step: 0\n"
    assert launcher.read_log(job, 0) == b"0: completed step: 0\n"
    transport.files[renamed] += b"0: completed step: 1\n"
    assert launcher.read_log(job, 21) == b"0: completed step: 1\n"


def test_ray_reads_the_worker_log_or_the_slurm_log_of_a_job_that_never_trained(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    transport.submit_replies += [(0, submit_output("79"), ""), (0, submit_output("80", "JAX-demo-b"), "")]
    launcher = make(transport, cell_path, ray=True)
    job = launcher.submit(request(cell_path, "baseline"))
    transport.dirs.add(job.job_dir)
    transport.files[job.log_path] = b"0: == Train BEGIN\n"
    assert launcher.read_log(job, 0) == b""  # Slurm log only: the worker log is authoritative
    transport.files[f"{job.job_dir}/ray_logs/node01/worker0.out"] = b"completed step: 0\n"
    assert launcher.read_log(job, 0) == b"completed step: 0\n"
    early = launcher.submit(request(cell_path, "baseline-r2"))
    transport.files[early.log_path] = b"srun: error\nJOB SUMMARY\n"
    assert launcher.read_log(early, 0) == b"srun: error\nJOB SUMMARY\n"


FALLBACK = b"[INFO] Starting Ray cluster...\n0: [!] Ray cluster failed, falling back to non-Ray mode\n" + b"".join(
    b"0: completed step: %d, seconds: 0.1, Tokens/s/device: 100.0, loss: 4.0\n" % i for i in range(15)
)


def test_ray_fallback_final_read_is_never_skipped_inside_the_lookup_interval(cell_path: Path) -> None:
    """The race of issue 10: the job trained (15 steps in the Slurm log, upstream fell back to
    non-Ray mode, no ray_logs/), but the last lookup was < lookup_interval ago when it ended."""
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79"), ""))
    now = [0.0]
    launcher = make(transport, cell_path, ray=True)
    launcher.lookup_interval, launcher.clock = 10.0, lambda: now[0]
    job = launcher.submit(request(cell_path, "baseline"))
    transport.files[job.log_path] = b"JOB_ID=79\n"
    assert launcher.read_log(job, 0) == b""  # looked at t=0: not training yet
    transport.files[job.log_path] += FALLBACK + b"JOB SUMMARY\n"
    now[0] = 1.0  # the job ends 1 s later, inside the 10 s lookup interval
    assert launcher.read_log(job, 0) == b""  # a poll while running may skip the lookup
    final = launcher.read_log(job, 0, ended=True)  # the watcher's read at job end may not
    assert final.count(b"completed step:") == 15
    assert launcher.log_source(job) == job.log_path


def test_ray_fallback_is_read_from_the_slurm_log_while_it_runs(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79"), ""))
    launcher = make(transport, cell_path, ray=True)
    job = launcher.submit(request(cell_path, "baseline"))
    transport.files[job.log_path] = FALLBACK[:200]
    assert launcher.read_log(job, 0) == FALLBACK[:200]


def test_ray_mode_absl_lines_on_stderr_are_found_and_named_as_the_log(cell_path: Path) -> None:
    """Current MaxText logs through absl to stderr: in Ray mode the steps land in
    ray_logs/<host>/worker-*.err (recorded layout), not in the first worker*.out."""
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79"), ""))
    launcher = make(transport, cell_path, ray=True)
    job = launcher.submit(request(cell_path, "baseline"))
    transport.dirs.add(job.job_dir)
    transport.files[job.log_path] = b"0: Launching via Ray actor...\n"
    logs = f"{job.job_dir}/ray_logs/node01"
    transport.files[f"{logs}/worker-0a1b-01000000-4242.out"] = b"[Node 0 @ node01] Launching training subprocess\n"
    err = (DATA / "ray_worker_absl.err").read_bytes()
    transport.files[f"{logs}/worker-0a1b-01000000-4242.err"] = err
    assert launcher.read_log(job, 0) == err
    assert launcher.log_source(job) == f"{logs}/worker-0a1b-01000000-4242.err"
    seen = StepLog()
    seen.feed(err)
    assert len(seen.steps) == 15


def test_model_named_by_a_unique_substring_resolves_as_upstream(tmp_path: Path) -> None:
    cell_path = tmp_path / "ds.yml"
    cell_path.write_text(CELL.replace("model_tag: demo", "model_tag: emo"))
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79", "JAX-demo-baseline-_env_TUNE_PROFILE_baseline"), ""))
    launcher = make(transport, cell_path)
    assert launcher.model_tag == "emo"  # the cell's name for the report
    assert launcher.model_name == "demo" and launcher.inventory()["model_name"] == "demo"
    launcher.submit(request(cell_path, "baseline"))
    assert submitted_argv(transport)[1] == "demo:baseline"
    assert "TUNE_PROFILE: again after configs/demo.env.sh" in transport.files[f"{CK}/configs/demo.env.sh"].decode()
    launcher.close()
    files = checkout_files(**{"configs/demo2.gpu.yml": b"steps: 1\n"})
    with pytest.raises(
        PreflightError,
        match=r"model_tag: expected a model name matching one configs/\*.gpu.yml, "
        r"found 'emo' matching 2: demo, demo2",
    ):
        make(FakeTransport(files), cell_path)


def test_preflight_checks_rsync_and_a_git_clone_directory(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    transport.no_rsync = True
    with pytest.raises(PreflightError, match=re.escape("submit.sh needs rsync on the cluster side")):
        make(transport, cell_path)
    transport = FakeTransport(checkout_files(**{".git": b"gitdir: /src/maxtext-slurm/.git/worktrees/x\n"}))
    transport.dirs.discard(f"{CK}/.git")
    with pytest.raises(
        PreflightError,
        match=r"found a .git file \(a worktree\?\): upstream submit.sh then copies "
        r"the parent directory /work into every job's artifact",
    ):
        make(transport, cell_path)
    assert transport.files == checkout_files(**{".git": b"gitdir: /src/maxtext-slurm/.git/worktrees/x\n"})


def test_artifacts_hlo_dump_and_profile_dir(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79"), ""))
    launcher = make(transport, cell_path)
    job = launcher.submit(request(cell_path, "evidence"))
    assert launcher.artifacts(job) == {}
    profile = f"{job.job_dir}/{JOB_NAME_79}/tensorboard/plugins/profile"
    transport.dirs |= {job.job_dir, f"{job.job_dir}/xla_dump", profile}
    assert launcher.artifacts(job) == {"hlo_dump": f"{job.job_dir}/xla_dump", "profile": profile}


def test_find_and_submit_paths_are_argv_entries_never_shell_text(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79"), ""))
    launcher = make(transport, cell_path)
    launcher.read_log(launcher.submit(request(cell_path, "baseline")), 0)
    assert not [argv for argv, _ in transport.calls if {"sh", "bash", "eval"} & set(argv)]
    assert transport.commands("find")
    assert shlex.split(shlex.join(submitted_argv(transport))) == submitted_argv(transport)


def test_transport_failure_while_installing_rolls_back(cell_path: Path) -> None:
    original = checkout_files()
    transport = FakeTransport(original)
    real_write = transport.write_atomic

    def write(path: str, data: bytes) -> None:
        if path.endswith("demo.env.sh") and b">>> xlatune" in data:
            raise TransportError("write failed: disk full")
        real_write(path, data)

    transport.write_atomic = write  # type: ignore[method-assign]
    with pytest.raises(PreflightError, match=f"backend.checkout: {CK}: write failed: disk full"):
        make(transport, cell_path)
    assert transport.files == original


# ---- shell injection at cell load: rejected with the key, or (paths) kept for argv quoting ---

HOSTILE = ["a;touch X", "$(touch X)", "`touch X`", "a b", "'q'", '"q"', "a\nb", "a|b", "a&&b", "a>b", "a\\b"]


def _base_cell() -> dict[str, object]:
    return {"model_tag": "demo", "nodelist": "node[01-02]", "parallelism": "FSDP=2",
            "env_file": [{"flag": "--xla_a=true", "image_default": "false"}],
            "waves": {2: [{"name": "p", "xla_flags": ["--xla_b=1"], "env": {"NCCL_X": "1"}}]},
            "backend": {"kind": "maxtext-slurm", "checkout": "/ck", "partition": "debug", "time": "5:00"}}  # fmt: skip


def _set(cell: dict[str, object], spot: str, value: str) -> str:
    """Put `value` at `spot`; return the key the CellError must name."""
    profile = cell["waves"][2][0]  # type: ignore[index]
    if spot == "profile name":
        profile["name"] = value
        return "waves.2[0].name"
    if spot == "xla flag":
        profile["xla_flags"] = [f"--xla_b={value}"]
        return "waves.2[0].xla_flags[0]"
    if spot == "env value":
        profile["env"] = {"NCCL_X": value}
        return "waves.2[0].env.NCCL_X"
    if spot == "env name":
        profile["env"] = {value: "1"}
        return f"waves.2[0].env.{value}"
    if spot == "override value":
        cell["overrides"] = {"x": value}
        return "overrides.x"
    if spot == "image default":
        cell["env_file"] = [{"flag": "--xla_a=true", "image_default": value}]
        return "env_file[0].image_default"
    if spot in ("model_tag", "nodelist"):
        cell[spot] = value
        return spot
    cell["backend"][spot] = value  # type: ignore[index]
    return f"backend.{spot}"


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("spot", ["profile name", "xla flag", "env value", "env name", "override value",
                                  "image default", "model_tag", "nodelist", "partition", "time"])  # fmt: skip
def test_hostile_text_is_rejected_at_cell_load_naming_the_key(tmp_path: Path, spot: str, value: str) -> None:
    cell = _base_cell()
    key = _set(cell, spot, value)
    path = tmp_path / "hostile.yml"
    path.write_text(yaml.safe_dump(cell))
    with pytest.raises(CellError) as info:
        load_cell(path)
    assert info.value.key == key
    assert str(info.value).startswith(f"{path}:") and "\n" not in str(info.value)


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_checkout_paths_load_as_written_except_newlines(tmp_path: Path, value: str) -> None:
    """Paths are free text: they reach commands only as argv entries (integration: marker files)."""
    cell = _base_cell()
    _set(cell, "checkout", f"/srv/{value}")
    path = tmp_path / "hostile.yml"
    path.write_text(yaml.safe_dump(cell))
    if "\n" in value:
        with pytest.raises(CellError, match=re.escape("backend.checkout: expected a path on one line")):
            load_cell(path)
    else:
        assert load_cell(path).backend.option("checkout") == f"/srv/{value}"


def test_a_third_setting_of_one_profile_and_tag_gets_the_numbered_arm(cell_path: Path) -> None:
    cell = load_cell(cell_path)
    transport = FakeTransport(checkout_files())
    launcher = make(transport, cell_path)
    requests = list(possible_requests(cell, expand(cell)))
    launcher.check_requests(requests)
    # "winner" and "winner.default" are taken (two evidence runs); other flags under that tag: the next.
    third = replace(next(r for r in requests if r.profile == "winner"), xla_flags=("--xla_third=1",))
    assert launcher.arm_for(third) == ("winner.default.2", True)
    launcher.check_requests([third])
    assert launcher.arm_for(third) == ("winner.default.2", False)
    launcher.close()


# ---- a model the checkout has no config for -------------------------------------------------

REPO = TESTS.parent
# `ls configs/` of the unmodified upstream maxtext-slurm at f64d93f (../shared/upstream/).
UPSTREAM_CONFIGS = (DATA / "upstream_configs_f64d93f.txt").read_text().split()


def test_the_shipped_qwen3_32b_cell_names_the_config_to_add_and_the_nearest_to_start_from(tmp_path: Path) -> None:
    """Upstream has no configs/qwen3-32b.gpu.yml (nor a name containing it): pre-flight says, in
    one line, which file to add and which upstream config to copy (the dense Qwen3, not the MoE)."""
    cell_path = tmp_path / "qwen3-32b_fsdp8.yml"
    cell_path.write_text(
        (REPO / "cells" / "qwen3-32b_fsdp8.yml")
        .read_text()
        .replace("checkout: /shared/maxtext-slurm", f"checkout: {CK}")
    )
    files = checkout_files()
    del files[f"{CK}/configs/demo.gpu.yml"], files[f"{CK}/configs/demo.env.sh"]
    files.update({f"{CK}/configs/{name}": b"" for name in UPSTREAM_CONFIGS})
    with pytest.raises(PreflightError) as info:
        make(FakeTransport(files), cell_path, prepare=False).prepare()
    message = str(info.value)
    assert message.startswith(f"{cell_path}: model_tag: expected configs/qwen3-32b.gpu.yml"), message
    assert (
        "found no match: add configs/qwen3-32b.gpu.yml, starting from configs/qwen3-14b.gpu.yml, "
        "the nearest config there"
    ) in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("wanted", "nearest"),
    [
        ("qwen3-32b", "qwen3-14b"),
        ("qwen3-235b-a22b", "qwen3-480b-a35b"),
        ("llama3.1-8b", "llama3.1-70b"),
        ("grok-3", "grok-2"),
        ("deepseek3-16b", "deepseek3-671b"),
    ],
)
def test_nearest_config_is_the_same_family_dense_or_moe_and_closest_size(wanted: str, nearest: str) -> None:
    from pytest_xlatune.launch.maxtext.checks import nearest_config

    names = [n.removesuffix(".gpu.yml") for n in UPSTREAM_CONFIGS if n.endswith(".gpu.yml")]
    assert nearest_config(names, wanted) == nearest


def test_every_checkout_problem_is_in_one_preflight_message(cell_path: Path) -> None:
    """A checkout without train_env.sh nor the model's config: both in one line, each with its fix
    (was: one per run, the second seen only after fixing the first)."""
    files = checkout_files()
    del files[f"{CK}/train_env.sh"], files[f"{CK}/configs/demo.gpu.yml"]
    files[f"{CK}/configs/demo-big.env.sh"] = b""
    with pytest.raises(PreflightError) as info:
        make(FakeTransport(files), cell_path, prepare=False).prepare()
    message = str(info.value)
    assert message.startswith(
        f"{cell_path}: backend.checkout: expected train_env.sh in the maxtext-slurm "
        f"checkout {CK}, found none; and {cell_path}: model_tag: expected "
        "configs/demo.gpu.yml"
    ), message
    assert "\n" not in message
