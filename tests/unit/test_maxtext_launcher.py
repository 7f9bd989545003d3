"""MaxTextSlurmLauncher over a scripted in-memory transport: argv, block life cycle, ownership, logs."""

from __future__ import annotations

import fnmatch
import posixpath
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from pytest_xlatune.cell import CellError, load_cell
from dataclasses import replace

from pytest_xlatune.compose import job_request, possible_requests
from pytest_xlatune.launch.base import JobRequest, LauncherError, SubmittedJob
from pytest_xlatune.launch.maxtext_files import install_block, render_tune_block
from pytest_xlatune.launch.maxtext_slurm import MaxTextSlurmLauncher, RestoreDefault
from pytest_xlatune.launch.slurm_jobs import SlurmPlacement
from pytest_xlatune.plan import expand, restore_default_changes
from pytest_xlatune.preflight import PreflightError
from pytest_xlatune.slurm.client import SlurmClient
from pytest_xlatune.transport import CommandResult, TransportError

TESTS = Path(__file__).resolve().parents[1]
STANDIN = TESTS / "maxtext_slurm_standin"
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
    return (f"MODEL_NAME=demo\nJOB_NAME={name}\n[ARTIFACT] Building artifact...\nSubmitted batch job {job_id}\n"
            f"[ARTIFACT] {workspace}/{job_id}-{name}/artifact -> .artifacts/artifact_20261201_000000_abcd\n")


class FakeTransport:
    """Files and directories in dicts; commands answered from a script; every call recorded."""

    def __init__(self, files: Mapping[str, bytes]) -> None:
        self.files = dict(files)
        self.dirs: set[str] = set()
        self.modes = {path: "755" for path in self.files}
        self.calls: list[tuple[tuple[str, ...], str | None]] = []
        self.submit_replies: list[tuple[int, str, str]] = []
        self.connections_opened = 1

    def run(self, argv: Sequence[str], *, timeout: float | None = None, cwd: str | None = None,
            env: Mapping[str, str] | None = None) -> CommandResult:
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
        if args[0] == "grep":
            return CommandResult(args, 0 if args[3].encode() in self.files.get(args[4], b"") else 1, "", "")
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
            depth = path[len(top):].count("/")
            kind = "d" if path in self.dirs else "f"
            if (int(opts.get("-mindepth", 0)) <= depth <= int(opts.get("-maxdepth", 99))
                    and opts.get("-type", kind) == kind
                    and fnmatch.fnmatchcase(posixpath.basename(path), opts.get("-name", "*"))
                    and fnmatch.fnmatchcase(path, opts.get("-path", "*"))):
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


def make(transport: FakeTransport, cell_path: Path, *, ray: bool = False, prepare: bool = True,
         events: list[tuple[str, dict[str, object]]] | None = None, image: str = "") -> MaxTextSlurmLauncher:
    cell = load_cell(cell_path)
    launcher = MaxTextSlurmLauncher(
        transport, SlurmClient(transport), CK, SlurmPlacement("node[01-02]", 2, "debug"), "demo",
        sweep_id=SWEEP, ray=ray, profiles=cell.profiles, cell=str(cell_path), lookup_interval=0,
        restore_default=RestoreDefault(*restore_default_changes(cell.env_file)),
        record=lambda event, **payload: (events if events is not None else []).append((event, payload)),
        image=image,
    )
    if prepare:
        launcher.prepare()
    return launcher


def request(cell_path: Path, profile: str) -> JobRequest:
    cell = load_cell(cell_path)
    return job_request(cell, next(s for s in expand(cell) if s.profile == profile))


def submitted_argv(transport: FakeTransport) -> list[str]:
    argv, cwd = [(a, c) for a, c in transport.calls if "./submit.sh" in a][-1]
    assert cwd == CK
    return list(argv)


# ---- submit argv -----------------------------------------------------------------------------

# FSDP=2 is what the stand-in's gpu.yml has: the skill passes no parallelism override then.
TEMPLATE = ["./submit.sh", "demo:{tag}", "--partition=debug", "--nodes=2", "--nodelist=node[01-02]", "--time=45:00",
            "--", "steps=15", "dataset_type=synthetic", "per_device_batch_size=2"]  # fmt: skip
HEARTBEAT = "jax_distributed_heartbeat_timeout_seconds=99999"


@pytest.mark.parametrize("profile, arm, extra", [
    ("no_eigen_mt", "no_eigen_mt", []),
    ("nccl_chan8", "nccl_chan8", []),
    ("baseline", "baseline", []),
    ("baseline-r2", "baseline", []),
    ("restore_default", "restore_default", []),
    ("evidence", "baseline", ["profiler=xplane", "skip_first_n_steps_for_profiler=5", "profiler_steps=4",
                              "_env_ENABLE_XLA_DUMP=1"]),
])  # fmt: skip
def test_submit_argv_is_the_skill_template(cell_path: Path, profile: str, arm: str, extra: list[str]) -> None:
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79"), ""))
    make(transport, cell_path).submit(request(cell_path, profile))
    expected = [part.format(tag=profile) for part in TEMPLATE]
    assert submitted_argv(transport) == [*expected, *extra, HEARTBEAT, f"_env_TUNE_PROFILE={arm}"]


def test_parallelism_overrides_only_where_gpu_yml_differs(tmp_path: Path) -> None:
    cell_path = tmp_path / "fsdp4.yml"
    cell_path.write_text(CELL.replace("FSDP=2", "FSDP=4"))
    transport = FakeTransport(checkout_files())
    transport.submit_replies.append((0, submit_output("79"), ""))
    make(transport, cell_path).submit(request(cell_path, "no_eigen_mt"))
    # dcn_pipeline_parallelism=1 is gpu.yml's value too: the same config without it
    assert submitted_argv(transport)[-4:] == ["per_device_batch_size=2", "dcn_fsdp_parallelism=4", HEARTBEAT,
                                              "_env_TUNE_PROFILE=no_eigen_mt"]  # fmt: skip


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


def test_a_run_known_only_at_run_time_gets_its_own_arm_and_close_still_restores_bytes(
        cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    before = dict(transport.files)
    events: list[tuple[str, dict[str, object]]] = []
    launcher = make(transport, cell_path, events=events)
    # A stack of two winners: flags no installed arm sets.
    stack = JobRequest("demo-stack_top2-default", "stack_top2", ("steps=15",),
                       xla_flags=("--xla_cpu_multi_thread_eigen=false",), env=(("NCCL_NCHANNELS_PER_NET_PEER", "8"),))
    with pytest.raises(PreflightError, match="no TUNE_PROFILE arm .* sets exactly"):
        launcher.check_requests([stack])  # pre-flight does not add arms
    transport.submit_replies.append((0, submit_output("80"), ""))
    launcher.submit(stack)
    assert submitted_argv(transport)[-1] == "_env_TUNE_PROFILE=stack_top2"
    train_env = transport.files[f"{CK}/train_env.sh"].decode()
    assert "stack_top2)" in train_env and train_env.count("--xla_cpu_multi_thread_eigen=false") == 2
    assert "stack_top2)" in transport.files[f"{CK}/configs/demo.env.sh"].decode()
    assert ("tune_arm_added", {"profile": "stack_top2", "xla_flags": ["--xla_cpu_multi_thread_eigen=false"],
                               "env": [["NCCL_NCHANNELS_PER_NET_PEER", "8"]]}) in events
    # The same settings again (the winner's evidence run re-running the stack): that arm.
    transport.submit_replies.append((0, submit_output("81"), ""))
    launcher.submit(JobRequest("demo-winner-default", "winner", ("steps=15",), xla_flags=stack.xla_flags,
                               env=stack.env, evidence=True))
    assert submitted_argv(transport)[-1] == "_env_TUNE_PROFILE=stack_top2"
    unset = JobRequest("demo-x-default", "x", ("steps=15",), unset_env=("NCCL_BUFFSIZE",))
    with pytest.raises(LauncherError, match="no TUNE_PROFILE arm unsets NCCL_BUFFSIZE"):
        launcher.submit(unset)
    launcher.close()
    assert {k: transport.files[k] for k in before} == before


@pytest.mark.parametrize("code, out, err, message", [
    (1, "", "!!! Model name resolution failed. Exiting...\n", "exited 1: no 'Submitted batch job <id>' line"),
    (1, submit_output("91"), "[ERROR] Job 91 died in prolog before writing any log: FAILED\n", "died before"),
])  # fmt: skip
def test_failed_submission_is_one_line_naming_the_command(cell_path: Path, code: int, out: str, err: str,
                                                          message: str) -> None:
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
    xla, env = render_tune_block([], [], [], "demo")
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
def test_foreign_tune_content_is_refused_and_nothing_written(cell_path: Path, path: str, text: bytes | None,
                                                             line: str) -> None:
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
    with pytest.raises(PreflightError, match=f"expected configs/demo.gpu.yml in the maxtext-slurm checkout {CK}"):
        make(FakeTransport(files), cell_path)
    image = b'DOCKER_IMAGE="${DOCKER_IMAGE:-/shared/images/jax.tar}"\n'
    with pytest.raises(PreflightError, match="image: DOCKER_IMAGE /shared/images/jax.tar .* does not exist"):
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
    with pytest.raises(PreflightError, match=r"image: DOCKER_IMAGE /images/gone.tar \(the image asked for\) "
                                             "does not exist on the cluster"):
        make(FakeTransport(checkout_files()), cell_path, image="/images/gone.tar")
    with pytest.raises(ValueError, match="expected a container image .*found '-v /:/host'"):
        make(FakeTransport(checkout_files()), cell_path, image="-v /:/host")


def test_preflight_refuses_a_sweep_whose_evidence_run_would_exceed_the_job_name_limit(
        cell_path: Path) -> None:
    cell = load_cell(cell_path)
    transport = FakeTransport(checkout_files())
    launcher = make(transport, cell_path)
    requests = list(possible_requests(cell, expand(cell)))
    # Both evidence runs: wave 1.5 and the winner's, once per profile that could win.
    assert [r.profile for r in requests if r.evidence] == ["evidence", "winner", "winner"]
    launcher.check_requests(requests)
    # A MaxText override that fits a plain run but not the evidence run's profiler + HLO dump args.
    plain = next(r for r in requests if r.profile == "no_eigen_mt")

    def padded(request: JobRequest, n: int) -> JobRequest:
        return replace(request, passthrough=(*request.passthrough, f"remat_policy={'x' * n}"))

    n = 1
    while n < 243:  # the longest value the plain run still takes
        try:
            launcher.check_requests([padded(plain, n + 1)])
        except PreflightError:
            break
        n += 1
    assert 20 < n < 200
    evidence = next(r for r in requests if r.profile == "winner")
    with pytest.raises(PreflightError, match=r"demo.yml: waves: demo-winner-default: JOB_NAME would be "
                                             r"\d+ bytes; submit.sh refuses more than 243"):
        launcher.check_requests([padded(evidence, n)])
    assert not [argv for argv, _ in transport.calls if "./submit.sh" in argv]
    launcher.close()


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
        with pytest.raises(CellError, match="backend.checkout: expected a path on one line"):
            load_cell(path)
    else:
        assert load_cell(path).backend.option("checkout") == f"/srv/{value}"
