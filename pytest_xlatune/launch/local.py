"""The embedded default: each job is a local subprocess of the JAX workload, one at a time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO, Protocol

from ..evidence.fingerprint import read_dump
from ..evidence.inert import PROGRAM_DIR, program_dump_flags
from ..jaxcache import CACHE_DIR, USER_NAMES, cache_env, cache_path
from ..paths import job_dir_name, job_log_name
from ..safefs import LinkRefused, check_no_links, open_nofollow
from .base import JobPhase, JobProgress, JobRequest, JobState, LauncherError, SubmittedJob, for_image

EXIT_SIGTERM = 143
MARK_ENV = "XLATUNE_SUBMISSION"  # the submission's mark, in the job's log header and environment
HEADER_LINES = 5  # JOB_ID, JOB_NAME, the mark, XLA_FLAGS, PASSTHROUGH_ARGS="…" (written before the job starts)
HEADER_LIMIT = 64 << 10


def _dumps(flags: list[str], inherited: str) -> bool:
    """Whether the run's own XLA flags already dump (--xla_dump_to and the like)."""
    return any(f.startswith("--xla_dump") for f in (*flags, *inherited.split()))


def compose_environment(
    base: Mapping[str, str],
    request: JobRequest,
    dump_dir: Path | None,
    cache_root: Path | None = None,
    program_dir: Path | None = None,
) -> dict[str, str]:
    """The job's environment: XLA flags appended to the inherited ones (last wins), env, then the
    run's compilation cache under `cache_root` (none when the environment already names one).
    `dump_dir`: an evidence run's full dump; `program_dir`: only the train step's (inert flags),
    unless the run's own XLA flags dump already."""
    env = dict(base)
    flags = list(request.xla_flags)
    if dump_dir is not None:
        flags += [f"--xla_dump_to={dump_dir}", "--xla_dump_hlo_as_text"]
    elif program_dir is not None and not _dumps(flags, env.get("XLA_FLAGS", "")):
        # A run that dumps on its own keeps its dump as asked (no fingerprint, so never cut).
        flags += program_dump_flags(str(program_dir))
    if flags:
        inherited = env.get("XLA_FLAGS", "")
        env["XLA_FLAGS"] = " ".join(([inherited] if inherited else []) + flags)
    for name in request.unset_env:
        env.pop(name, None)
    env.update(dict(request.env))
    directory = cache_path(str(cache_root), request.compile_cache) if cache_root is not None else ""
    if request.evidence or not any(name in env for name in USER_NAMES):
        env.update(cache_env(request.evidence, directory))
    env.setdefault("JAX_PLATFORMS", "cpu")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class JobProcess(Protocol):
    """What LocalLauncher holds of a started job: a subprocess.Popen, or a stand-in of a subclass."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class LocalLauncher:
    """Runs `python -m <module>` (the JAX workload by default) with MaxText-style passthrough args.

    The process seam is `_spawn` and `_signal` (the plugin tests' in-process launcher,
    tests/fake_launcher.py, overrides both; everything else is this class's)."""

    name = "local"
    queue_depth = 0  # one CPU-bound job at a time: queued local jobs would run concurrently

    def __init__(
        self,
        jobs_dir: Path,
        first_job_number: int,
        python: str = sys.executable,
        module: str = "pytest_xlatune.workload",
        pythons: Mapping[str, str] | None = None,
        cache_root: Path | None = None,
    ) -> None:
        self.jobs_dir = jobs_dir
        # Compilation caches (absolute: a job runs in its own dir); default beside the jobs dir.
        self.cache_root = (cache_root or jobs_dir.parent / "jax-cache").absolute()
        # A relative interpreter (venv/bin/python) is where pre-flight probed it, from this
        # directory: a job runs in its own dir. Absolute, links kept (a venv's python is a link
        # to the base interpreter, and only its own path finds the venv).
        self.python = _absolute(python)
        self.pythons = {image: _absolute(p) for image, p in (pythons or {}).items()}  # image → interpreter
        self.module = module
        # Never below an id on disk: an emptied or lost store must not reuse (and overwrite) a
        # job's log or dir.
        self._next_number = max(first_job_number, largest_job_number(jobs_dir) + 1)
        self._processes: dict[str, JobProcess] = {}
        self._orphans: dict[str, int] = {}

    def submit(self, request: JobRequest) -> SubmittedJob:
        try:
            return self._start(request)
        except LinkRefused as error:
            raise LauncherError(f"cannot start the job: {error.strerror}") from None
        except OSError as error:  # e.g. the job log on a full disk
            raise LauncherError(
                f"cannot start the job: {error.filename or self.jobs_dir}: {error.strerror or error}"
            ) from None

    def _start(self, request: JobRequest) -> SubmittedJob:
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        check_no_links(self.jobs_dir.parent.parent, self.jobs_dir)  # <store>/<slug>/jobs
        while True:  # a log is created, never truncated: a taken id is skipped
            job_id = str(self._next_number)
            self._next_number += 1
            log_path = self.jobs_dir / job_log_name(job_id, request.job_name)
            try:
                log_fd = open_nofollow(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            break
        job_dir = self.jobs_dir / job_dir_name(job_id, request.job_name)
        try:
            job_dir.mkdir()
        except FileExistsError:
            check_no_links(self.jobs_dir, job_dir)  # a dir left by a job of a lost store: reused
        dump_dir = job_dir / "xla_dump" if request.evidence else None
        argv = [
            for_image(self.python, self.pythons, request),
            "-m",
            self.module,
            *request.passthrough,
            f"base_output_directory={job_dir}",
            f"run_name={request.job_name}",
        ]
        env = compose_environment(os.environ, request, dump_dir, self.cache_root, job_dir / PROGRAM_DIR)
        ours = cache_path(str(self.cache_root), request.compile_cache)
        cache = ours if ours and env.get(CACHE_DIR) == ours else ""
        if request.mark:
            env[MARK_ENV] = request.mark
        with os.fdopen(log_fd, "wb") as log:
            log.write(f"JOB_ID={job_id}\nJOB_NAME={request.job_name}\n".encode())
            if request.mark:
                log.write(f"{MARK_ENV}={request.mark}\n".encode())
            log.write(f"XLA_FLAGS={env.get('XLA_FLAGS', '')}\n".encode())
            log.write(f'PASSTHROUGH_ARGS="{" ".join(request.passthrough)}"\n'.encode())
            log.flush()
            self._processes[job_id] = self._spawn(argv, env, job_dir, log)
        return SubmittedJob(
            job_id=job_id,
            log_path=str(log_path),
            job_dir=str(job_dir),
            handle=str(self._processes[job_id].pid),
            compile_cache=cache,
        )

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: Path, log: BinaryIO) -> JobProcess:
        """Start the job's process in a session of its own, its output into `log`."""
        return subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )

    def _signal(self, process: JobProcess, signum: int) -> None:
        """Signal the job's whole process group (it leads its own session); never a pid ≤ 1: a
        process group 0 is the caller's own (this pytest and everything started with it)."""
        if process.pid > 1:
            os.killpg(process.pid, signum)

    def reattach(self, job: SubmittedJob) -> bool:
        """Adopt a job of a killed session: watch its pid if it still runs, else judge its log."""
        if not Path(job.log_path).exists():
            return False
        self._orphans[job.job_id] = int(job.handle) if job.handle.isdigit() else 0
        self._next_number = max(self._next_number, int(job.job_id) + 1) if job.job_id.isdigit() else self._next_number
        return True

    def find_submission(self, mark: str, job_name: str, since: float) -> SubmittedJob | None:
        """A job of a session killed as it started it: the log whose header names the mark, and
        the process whose environment carries it (none: it has ended)."""
        header = f"{MARK_ENV}={mark}\n".encode()
        for log_path in sorted(self.jobs_dir.glob(job_log_name("*", job_name))):
            try:
                with log_path.open("rb") as handle:
                    head = handle.read(HEADER_LIMIT)
            except OSError:
                continue
            if header not in head:
                continue
            job_id = log_path.name.split("-", 1)[0]
            pid = next((p for p in _pids() if header.rstrip() in _environ(p)), 0)
            if not pid and head.rstrip(b"\n").endswith(b'"') and head.count(b"\n") <= HEADER_LINES:
                return None  # killed after the header, before the process started: it never ran
            job = SubmittedJob(
                job_id=job_id,
                log_path=str(log_path),
                job_dir=str(self.jobs_dir / job_dir_name(job_id, job_name)),
                handle=str(pid or ""),
            )
            return job if self.reattach(job) else None
        return None

    def _orphan_alive(self, pid: int) -> bool:
        # Not our child, so no exit code: alive means the pid still runs our workload module.
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read().split(b"\0")
            with open(f"/proc/{pid}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            return False
        return state != b"Z" and self.module.encode() in cmdline

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
        progress = {}
        for job_id in job_ids:
            if job_id in self._orphans:
                alive = self._orphan_alive(self._orphans[job_id])
                progress[job_id] = (
                    JobProgress(JobPhase.RUNNING, JobState.RUNNING)
                    if alive
                    else JobProgress(JobPhase.FINISHED, JobState.UNKNOWN, None)
                )  # ended, exit unknown
                continue
            process = self._processes.get(job_id)
            if process is None:
                progress[job_id] = JobProgress(JobPhase.FINISHED, JobState.UNKNOWN, None)
                continue
            code = process.poll()
            if code is None:
                progress[job_id] = JobProgress(JobPhase.RUNNING, JobState.RUNNING)
            else:
                exit_code = 128 - code if code < 0 else code  # -15 → 143, as a shell reports it
                state = JobState.COMPLETED if code == 0 else JobState.FAILED
                progress[job_id] = JobProgress(JobPhase.FINISHED, state, exit_code)
        return progress

    def cancel(self, job_id: str) -> None:
        if job_id in self._orphans:
            pid = self._orphans[job_id]
            if pid > 1 and self._orphan_alive(pid):
                os.killpg(pid, signal.SIGTERM)
            return
        process = self._processes.get(job_id)
        if process is None or process.poll() is not None:
            return
        self._signal(process, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._signal(process, signal.SIGKILL)
            process.wait()

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        try:
            with open(job.log_path, "rb") as handle:
                handle.seek(offset)
                return handle.read(-1 if limit is None else limit)
        except FileNotFoundError:
            return b""

    def artifacts(self, job: SubmittedJob) -> dict[str, str]:
        found = {}
        job_dir = Path(job.job_dir)
        dump = job_dir / "xla_dump"
        if dump.is_dir():
            found["hlo_dump"] = str(dump)
        profiles = sorted(job_dir.glob("**/plugins/profile/*"))
        if profiles:
            found["profile"] = str(profiles[-1])
        return found

    def program_dump(self, job: SubmittedJob, *, stepped: bool) -> dict[str, str]:
        """The job's program dump (its evidence dump for an evidence run), {} when none is here.
        One process compiles and dumps: its compile line means the dump is whole."""
        for name in (PROGRAM_DIR, "xla_dump"):
            directory = os.path.join(job.job_dir, name)
            if job.job_dir and os.path.isdir(directory):
                return read_dump(directory)
        return {}

    def check_requests(self, requests: Iterable[JobRequest]) -> None:
        """Every request runs as a local process: nothing to refuse."""

    def log_source(self, job: SubmittedJob) -> str:
        return job.log_path

    def unusable_nodes(self) -> list[tuple[str, str]]:
        return []  # this machine

    def resume_node(self, node: str) -> None:
        raise LauncherError(f"cannot resume {node}: the local backend has no nodes")

    def close(self) -> None:
        for job_id in list(self._processes):
            self.cancel(job_id)


def largest_job_number(jobs_dir: Path) -> int:
    """The largest job id a log or dir in `jobs_dir` is named after (`<id>-<name>`), else 0."""
    try:
        names = os.listdir(jobs_dir)
    except OSError:
        return 0
    return max((int(head) for name in names if (head := name.split("-", 1)[0]).isdigit()), default=0)


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()] if os.path.isdir("/proc") else []


def _environ(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return []


def _absolute(python: str) -> str:
    """An interpreter path with a `/` made absolute against the current directory, links kept; a
    bare name (python3, found on PATH) as it is."""
    return os.path.abspath(python) if "/" in python and not python.startswith("/") else python
