"""Files of a maxtext-slurm job on the cluster side: its per-job dir, its log (Slurm's, or with
Ray the worker file holding the step lines), its evidence artifacts. A mixin of
MaxTextSlurmLauncher; every look-up is `find`/`grep` as argv through the transport, no shell.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Callable

from ...evidence.fingerprint import program_file
from ...evidence.inert import PROGRAM_DIR
from ...transport.base import Transport, TransportError
from ..base import SubmittedJob
from ..slurm_jobs import SlurmPlacement

STEP_TEXT = "completed step:"
RAY_FALLBACK = "[!] Ray cluster failed, falling back to non-Ray mode"
# Read no more of a program dump than this (the train step's HLO, IR and PTX of a large model can
# be hundreds of MB, read over SSH while the watcher waits): a larger one gets no fingerprint.
PROGRAM_DUMP_LIMIT = 256 << 20


class MaxTextJobFiles:
    """Finds a job's files; needs `transport`, `ray`, `clock`, `lookup_interval` on the launcher."""

    transport: Transport
    files: Transport  # find/grep beside the files (local under host-cmd)
    ray: bool
    placement: SlurmPlacement
    clock: Callable[[], float]
    lookup_interval: float

    def _init_job_files(self) -> None:
        self._logs: dict[str, str] = {}  # job id -> the file read_log reads (resolved lazily)
        self._dirs: dict[str, str] = {}  # job id -> its per-job dir as found on disk
        self._looked: dict[str, float] = {}

    def _find(self, top: str, *tests: str) -> list[str]:
        """`find TOP TESTS…` as argv (no shell, whatever the path holds); [] when TOP is missing."""
        if not top.startswith("/"):
            return []
        try:
            result = self.files.run(["find", top, *tests], timeout=60)
        except TransportError:
            return []
        return sorted(line for line in result.stdout.splitlines() if line)

    def _by_id(self, job: SubmittedJob, *tests: str, suffix: str = "") -> list[str]:
        """Entries `<jobid>-*<suffix>` next to the job dir (outputs/, the real JOB_WORKSPACE)."""
        return self._find(
            posixpath.dirname(job.job_dir),
            "-mindepth",
            "1",
            "-maxdepth",
            "1",
            "-name",
            f"{job.job_id}-*{suffix}",
            *tests,
        )

    def _exists(self, path: str) -> bool:
        try:
            return self.transport.exists(path)
        except TransportError:
            return False  # asked again at the next poll

    def _job_dir(self, job: SubmittedJob) -> str | None:
        """The per-job dir; found by id when utils/tgs_tagger.py renamed it (`-TGS_<value>`)."""
        if job.job_id not in self._dirs:
            if self._exists(job.job_dir):
                self._dirs[job.job_id] = job.job_dir
            elif found := self._by_id(job, "-type", "d"):
                self._dirs[job.job_id] = found[0]
        return self._dirs.get(job.job_id)

    def _slurm_log(self, job: SubmittedJob) -> str | None:
        if self._exists(job.log_path):
            return job.log_path
        found = self._by_id(job, "-type", "f", suffix=".log")
        return found[0] if found else None

    def _log_file(self, job: SubmittedJob, ended: bool) -> str | None:
        """The file with the step lines, fixed once found (offsets are per file). Without Ray:
        Slurm's log. With Ray: Slurm's log when upstream fell back to non-Ray mode, else the
        first ray_logs/<host>/worker* file (.out or .err: MaxText logs through absl to stderr)
        holding a step line; a job that ended before any: its Slurm log."""
        if job.job_id in self._logs:
            return self._logs[job.job_id]
        now = self.clock()
        if not ended and now - self._looked.get(job.job_id, -math.inf) < self.lookup_interval:
            return None  # a pending job: do not ask the file system on every poll
        self._looked[job.job_id] = now
        path = self._slurm_log(job)
        if self.ray and not (path is not None and self._has(path, RAY_FALLBACK)):
            job_dir = self._job_dir(job)
            workers = self._grep_files(posixpath.join(job_dir, "ray_logs"), STEP_TEXT) if job_dir else []
            if workers:
                path = workers[0]
            elif not ended and (path is None or not self._has(path, "JOB SUMMARY")):
                return None  # until training starts
        if path is not None:
            self._logs[job.job_id] = path
        return path

    def _has(self, path: str, text: str) -> bool:
        try:
            return self.files.run(["grep", "-q", "-F", "--", text, path], timeout=60).ok
        except TransportError:
            return False

    def _grep_files(self, top: str, text: str) -> list[str]:
        """ray_logs/<host>/worker* files holding `text`, sorted (grep -l over find's list)."""
        files = self._find(top, "-mindepth", "2", "-maxdepth", "2", "-type", "f", "-name", "worker*")
        if not files:
            return []
        try:
            result = self.files.run(["grep", "-l", "-F", "--", text, *files], timeout=60)
        except TransportError:
            return []
        return sorted(line for line in result.stdout.splitlines() if line)

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        try:
            path = self._log_file(job, ended)
            return b"" if path is None else self.transport.read_from(path, offset, limit)
        except (TransportError, OSError):
            self._logs.pop(job.job_id, None)  # renamed under us: the same bytes under a new name
            self._dirs.pop(job.job_id, None)
            if not ended:
                return b""
        try:  # the final read: look again now (a TGS rename), never skip it
            path = self._log_file(job, True)
            return b"" if path is None else self.transport.read_from(path, offset, limit)
        except (TransportError, OSError):
            return b""

    def program_dump(self, job: SubmittedJob, *, stepped: bool) -> dict[str, str]:
        """The train step's dump the TUNE_PROFILE block has rank 0 write to <job dir>/program
        (files.py), read through the transport; {} when there is none (a compilation-cache hit,
        a run that dumps on its own, a dump over PROGRAM_DUMP_LIMIT). On more than one node,
        only once the job logged a step: another node's compile line may come before rank 0
        has written its dump, and a step means every rank has compiled."""
        if self.placement.nodes > 1 and not stepped:
            return {}
        job_dir = self._job_dir(job)
        if job_dir is None:
            return {}
        top = posixpath.join(job_dir, PROGRAM_DIR)
        sizes = {}
        for line in self._find(top, "-mindepth", "1", "-maxdepth", "1", "-type", "f", "-printf", "%s %f\n"):
            size, _, name = line.partition(" ")
            if size.isdigit() and program_file(name):
                sizes[name] = int(size)
        if not sizes or sum(sizes.values()) > PROGRAM_DUMP_LIMIT:
            return {}
        try:
            return {
                name: self.transport.read_from(posixpath.join(top, name), 0).decode("utf-8", "replace")
                for name in sorted(sizes)
            }
        except (TransportError, OSError):
            return {}  # asked again at the next step

    def log_source(self, job: SubmittedJob) -> str:
        """The file read_log read (stored as the result's log_path)."""
        return self._logs.get(job.job_id, job.log_path)

    def artifacts(self, job: SubmittedJob) -> dict[str, str]:
        job_dir = self._job_dir(job)
        if job_dir is None:
            return {}
        found = {}
        dump = posixpath.join(job_dir, "xla_dump")
        if self._exists(dump):
            found["hlo_dump"] = dump
        # <job dir>/<run_name>/tensorboard/plugins/profile/<timestamp>/ (MaxText's layout)
        profiles = self._find(job_dir, "-mindepth", "3", "-maxdepth", "6", "-type", "d", "-path", "*/plugins/profile")
        if profiles:
            found["profile"] = profiles[0]
        return found
