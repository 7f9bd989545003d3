"""The maxtext-slurm launcher: the checkout's own submit.sh, profiles as TUNE_PROFILE case arms.

The block (the xla-tuning skill's "train_env.sh editing pattern") is installed once by `prepare()`
and removed byte-exact by `close()`: submit.sh freezes the checkout per submission. Upstream
sources configs/<M>.env.sh AFTER train_env.sh, so a second block at the end of that file applies
the profile again (`maxtext_files.render_env_file_block`), else restore_default is silently wrong.
"""

from __future__ import annotations

import atexit
import math
import posixpath
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..grammar import CONTAINER_IMAGE, job_name
from ..model import Profile
from ..preflight import PreflightError
from ..slurm.client import SlurmClient
from ..transport import Transport, TransportError, TransportTimeout
from . import maxtext_files as mf
from .maxtext_blocks import TuneBlocks, as_text
from .base import JobRequest, LauncherError, SubmittedJob
from .slurm_jobs import SlurmJobs, SlurmPlacement

DEFAULT_TIME = "45:00"  # the skill's submission template
TUNING_MD_LIMIT = 64 << 10  # characters of an existing <MODEL_TAG>-tuning.md kept in the inventory
Record = Callable[..., None]
Arm = tuple[tuple[str, ...], dict[str, "str | None"]]


@dataclass(frozen=True)
class RestoreDefault:
    """What restore_default changes (plan.restore_default_changes): flags, env reset, env unset."""

    flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    unset: tuple[str, ...] = ()

    @property
    def env_pairs(self) -> tuple[tuple[str, str | None], ...]:
        """render_tune_block's `restore_env`: None means unset."""
        return self.env + tuple((name, None) for name in self.unset)


class MaxTextSlurmLauncher(SlurmJobs):
    """Submits with `./submit.sh <M>:<profile> … -- … _env_TUNE_PROFILE=<arm>` from the checkout."""

    name = "maxtext-slurm"
    queue_depth = 2  # jobs submitted ahead; Slurm serialises them on the pinned nodelist

    def __init__(self, transport: Transport, client: SlurmClient, checkout: str, placement: SlurmPlacement,
                 model_tag: str, *, sweep_id: str, ray: bool = False, time_limit: str = DEFAULT_TIME,
                 profiles: Sequence[Profile] = (), restore_default: RestoreDefault = RestoreDefault(),
                 cell: str = "cell", record: Record | None = None, submit_timeout: float = 300.0,
                 image: str = "",
                 lookup_interval: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        if not checkout.startswith("/"):
            raise ValueError(f"checkout must be an absolute path on the cluster, found {checkout!r}")
        self.transport = transport
        self.client = client
        self.checkout = posixpath.normpath(checkout)
        self.placement = placement
        self.model_tag = mf.MODEL_TAG.check(model_tag)
        self.sweep_id = mf.SWEEP_ID.check(sweep_id)
        self.ray = ray
        self.time_limit = mf.SLURM_TIME.check(time_limit)
        self.profiles = tuple(profiles)
        self.restore = restore_default
        self.cell = cell
        self.record: Record = record or (lambda event, **payload: None)
        self.submit_timeout = submit_timeout
        # submit.sh runs under DOCKER_IMAGE=<image> (container_env.sh keeps a DOCKER_IMAGE it
        # finds in the environment); empty: container_env.sh's own default.
        self.image = CONTAINER_IMAGE.check(image) if image else ""
        self.lookup_interval = lookup_interval
        self.clock = clock
        self.train_env = self.path("train_env.sh")
        self.env_sh = self.path("configs", f"{model_tag}.env.sh")
        self.gpu_yml = self.path("configs", f"{model_tag}.gpu.yml")
        self._files: dict[str, bytes | None] = {}
        self.blocks = TuneBlocks(transport, self.sweep_id, self._clean)
        self._prepared = self._closed = False
        self._yml_parallelism: set[str] = set()  # `dcn_…_parallelism=N` args gpu.yml already sets
        self._mine: set[str] = set()
        self._logs: dict[str, str] = {}  # job id -> the file read_log reads (resolved lazily)
        self._dirs: dict[str, str] = {}  # job id -> its per-job dir as found on disk
        self._looked: dict[str, float] = {}

    # ---- paths and reads -------------------------------------------------------------------

    def path(self, *parts: str) -> str:
        return posixpath.join(self.checkout, *parts)

    def _read(self, path: str) -> bytes | None:
        """The file's bytes as found at pre-flight (None: no such file); read once."""
        if path not in self._files:
            try:
                self._files[path] = self.transport.read_from(path, 0) if self.transport.exists(path) else None
            except (TransportError, OSError) as error:
                raise PreflightError(f"{self.cell}: backend.checkout: cannot read {path}: {error}") from None
        return self._files[path]

    def _clean(self, path: str) -> str | None:
        """The file's text without a block of ours (left by a killed session of this sweep)."""
        data = self._read(path)
        return None if data is None else mf.remove_block(as_text(data), self.sweep_id)

    # ---- pre-flight, install, cleanup ------------------------------------------------------

    def prepare(self) -> None:
        """Check the checkout (files, image, clean train_env.sh), then install our block(s)."""
        try:
            self._prepare(f"{self.cell}: backend.checkout")
        except TransportError as error:
            self.cleanup()
            raise PreflightError(f"{self.cell}: backend.checkout: {self.checkout}: {error}") from None
        self._prepared = True

    def _prepare(self, where: str) -> None:
        for required in (self.path("submit.sh"), self.train_env, self.gpu_yml):
            if not self.transport.exists(required):
                raise PreflightError(f"{where}: expected {posixpath.relpath(required, self.checkout)} in the "
                                     f"maxtext-slurm checkout {self.checkout}, found none")
        settings = self.inventory()["gpu_yml"]["settings"]
        self._yml_parallelism = {f"{k}={v}" for k, v in settings.items() if k.endswith("_parallelism")}
        default = mf.parse_container_env(self._clean(self.path("container_env.sh")) or "").get("DOCKER_IMAGE", "")
        image, source = (self.image, "the image asked for") if self.image else \
            (default, f"container_env.sh of {self.checkout}")
        if image.startswith("/") and not self.transport.exists(image):
            raise PreflightError(f"{self.cell}: image: DOCKER_IMAGE {image} ({source}) "
                                 "does not exist on the cluster")
        blocks = {self.train_env: ""}
        if self._read(self.env_sh) is not None:
            blocks[self.env_sh] = ""
        for path in blocks:
            foreign = mf.foreign_block(as_text(self._read(path) or b""), self.sweep_id)
            if foreign is not None:
                raise PreflightError(f"{where}: {path} has TUNE_PROFILE content this sweep did not write, {foreign}; "
                                     f"remove it from the checkout {self.checkout} first")
        try:
            blocks = self._render(list(blocks))
        except ValueError as error:
            raise PreflightError(f"{self.cell}: waves: {error}") from None
        atexit.register(self._cleanup_at_exit)  # -x, Ctrl-C and failures end in close(); this is the net
        self.blocks.install(blocks)

    def _render(self, paths: Sequence[str]) -> dict[str, str]:
        """The block of each file, with an arm per profile (ValueError: a profile breaks it)."""
        xla, env = mf.render_tune_block(self.profiles, self.restore.flags, self.restore.env_pairs, self.model_tag)
        blocks = {self.train_env: xla + env}
        if self.env_sh in paths:
            blocks[self.env_sh] = mf.render_env_file_block(self.profiles, self.restore.env_pairs, self.model_tag)
        return blocks

    def cleanup(self) -> dict[str, str]:
        """Remove our blocks byte-exact (TuneBlocks.cleanup). Path → error."""
        return self.blocks.cleanup()

    def _cleanup_at_exit(self) -> None:
        for path, error in self.cleanup().items():
            print(f"xlatune: {self.cell}: TUNE_PROFILE block left in {path}: {error}", file=sys.stderr)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._cleanup_at_exit)
        files = self.blocks.paths
        errors = self.cleanup()
        for path, error in errors.items():
            print(f"xlatune: {self.cell}: could not remove the TUNE_PROFILE block from {path} (sweep "
                  f"{self.sweep_id}; the next session of this cell removes it): {error}", file=sys.stderr)
        self.record("cleanup", restored=[f for f in files if f not in errors], errors=errors,
                    ssh_connections=getattr(self.transport, "connections_opened", None))

    # ---- inventory (the skill's Step 2) ----------------------------------------------------

    def inventory(self) -> dict[str, Any]:
        """gpu.yml keys, what configs/<M>.env.sh deploys, container_env.sh, a prior tuning doc."""
        try:
            settings = mf.parse_gpu_yml(self._clean(self.gpu_yml) or "")
        except ValueError as error:
            raise PreflightError(f"{self.cell}: backend.checkout: {self.gpu_yml}: {error}") from None
        env_text = self._clean(self.env_sh)
        deployed = mf.parse_env_sh(env_text) if env_text is not None else []
        restored = {f.partition("=")[0] for f in self.restore.flags} | {n for n, _ in self.restore.env_pairs}
        container = self.path("container_env.sh")
        tuning_md = self.path(f"{self.model_tag}-tuning.md")
        prior = self._clean(tuning_md)
        return {
            "checkout": self.checkout, "model_tag": self.model_tag, "sweep_id": self.sweep_id,
            "gpu_yml": {"path": self.gpu_yml, "settings": settings},
            "env_file": {"path": self.env_sh, "exists": env_text is not None,
                         "deployed": [list(pair) for pair in deployed],
                         # restore_default cannot put these back: the cell's env_file omits them
                         "not_restored": sorted({name for name, _ in deployed} - restored)},
            "container_env": {"path": container, **mf.parse_container_env(self._clean(container) or ""),
                              **({"DOCKER_IMAGE": self.image} if self.image else {})},
            "tuning_md": {"path": tuning_md, "exists": prior is not None, "fresh_start": prior is None,
                          "text": (prior or "")[:TUNING_MD_LIMIT]},
        }  # fmt: skip

    # ---- jobs ------------------------------------------------------------------------------

    def _arms(self) -> dict[str, Arm]:
        own: dict[str, Arm] = {"baseline": ((), {})}
        own["restore_default"] = (self.restore.flags, dict(self.restore.env_pairs))
        return own | {p.name: (p.xla_flags, dict(p.env)) for p in self.profiles}

    def tune_profile(self, request: JobRequest) -> str:
        """The case arm that sets exactly the request's flags and env (its own name first)."""
        wanted: Arm = (tuple(request.xla_flags), {**dict(request.env), **dict.fromkeys(request.unset_env)})
        arms = self._arms()
        if arms.get(request.profile) == wanted:
            return request.profile
        for name, arm in arms.items():
            if arm == wanted:  # baseline repeats, evidence, wave-5 shapes, a wave-6 recipe
                return name
        shown = " ".join([*request.xla_flags, *(f"{k}={v}" for k, v in request.env),
                          *(f"unset {n}" for n in request.unset_env)])
        raise LauncherError(f"{request.job_name}: no TUNE_PROFILE arm of the installed block sets exactly "
                            f"{shown or 'nothing'}")

    def check_requests(self, requests: Iterable[JobRequest]) -> None:
        """Pre-flight: submit.sh would take every one of these (its JOB_NAME limit, an arm of
        the installed block), so a sweep never stops half-submitted on a name."""
        for request in requests:
            try:
                self._argv(request)
            except LauncherError as error:
                raise PreflightError(f"{self.cell}: waves: {error}") from None

    def _add_arm(self, request: JobRequest) -> str:
        """An arm named after the request for settings known only now (a stack of this
        session's winners, a locked stack in the gate): the block is rewritten with it. Queued
        jobs read train_env.sh when they start and find every arm they were submitted with."""
        if request.unset_env:
            raise LauncherError(f"{request.job_name}: no TUNE_PROFILE arm unsets "
                                f"{' '.join(request.unset_env)}, and only restore_default may")
        arm = Profile(request.profile, 0, tuple(request.xla_flags), tuple(request.env))
        profiles = tuple(p for p in self.profiles if p.name != arm.name) + (arm,)
        before, self.profiles = self.profiles, profiles
        try:
            self.blocks.update(self._render(self.blocks.paths))
        except (ValueError, TransportError) as error:
            self.profiles = before
            raise LauncherError(f"{request.job_name}: cannot add TUNE_PROFILE arm "
                                f"{arm.name!r} to the installed block: {error}") from None
        self.record("tune_arm_added", profile=arm.name, xla_flags=list(arm.xla_flags),
                    env=[list(kv) for kv in arm.env])
        return arm.name

    def _argv(self, request: JobRequest, add_arm: bool = False) -> list[str]:
        try:
            arm = self.tune_profile(request)
        except LauncherError:
            if not add_arm:
                raise
            arm = self._add_arm(request)
        # The skill's rule "no parallelism override when gpu.yml already has N" (the same config):
        # every byte counts against submit.sh's 243-byte JOB_NAME, the evidence run's most of all.
        passthrough = [a for a in request.passthrough if a not in self._yml_parallelism]
        if request.evidence:  # where the skill's evidence template has it: before the heartbeat
            at = next((i for i, a in enumerate(passthrough) if a.startswith(mf.HEARTBEAT_KEY + "=")), len(passthrough))
            passthrough.insert(at, mf.XLA_DUMP_ARG)
        p = self.placement
        try:
            argv = mf.submit_argv(self.model_tag, request.profile, p.nodes, p.nodelist, self.time_limit,
                                  p.partition, passthrough, self.ray, profile=arm)
        except ValueError as error:
            raise LauncherError(f"{request.job_name}: " + " | ".join(str(error).splitlines())) from None
        return ["env", f"DOCKER_IMAGE={self.image}", *argv] if self.image else argv

    def submit(self, request: JobRequest) -> SubmittedJob:
        if not self._prepared or self._closed:
            raise LauncherError(f"{self.cell}: the TUNE_PROFILE block is not installed (prepare() first)")
        argv = self._argv(request, add_arm=True)
        command = f"{shlex.join(argv)} (in {self.checkout})"
        try:
            result = self.transport.run(argv, timeout=self.submit_timeout, cwd=self.checkout)
        except TransportTimeout as error:
            raise LauncherError(f"{command}: {error}; it may have submitted a job (see squeue)") from None
        except TransportError as error:
            raise LauncherError(f"{command}: {error}") from None
        output = f"{result.stdout}\n{result.stderr}"
        try:
            job_id = mf.parse_submit_output(output)
        except ValueError as error:
            raise LauncherError(f"{command} exited {result.returncode}: "
                                + " | ".join(str(error).splitlines())) from None
        self._mine.add(job_id)
        if not result.ok:  # sbatch took the job, then submit.sh failed: do not leave it running unseen
            self.client.cancel(job_id)
            tail = " | ".join(output.strip().splitlines()[-3:])
            raise LauncherError(f"{command} exited {result.returncode} after submitting job {job_id} "
                                f"(cancelled): {tail}")
        name = next((line.partition("=")[2] for line in result.stdout.splitlines() if line.startswith("JOB_NAME=")),
                    job_name(self.model_tag, request.profile, argv[argv.index("--") + 1:]))
        job_dir = mf.parse_job_dir(output, job_id) or self.path("outputs", f"{job_id}-{name}")
        return SubmittedJob(job_id=job_id, log_path=f"{job_dir}.log", job_dir=job_dir)

    def reattach(self, job: SubmittedJob) -> bool:
        # The checkout's ownership rule: a job is ours iff outputs/<jobid>-* exists.
        if not job.job_id.isdigit() or not self._by_id(job):
            return False
        self._mine.add(job.job_id)
        return True

    # ---- logs and artifacts ----------------------------------------------------------------

    def _find(self, top: str, *tests: str) -> list[str]:
        """`find TOP TESTS…` as argv (no shell, whatever the path holds); [] when TOP is missing."""
        if not top.startswith("/"):
            return []
        try:
            result = self.transport.run(["find", top, *tests], timeout=60)
        except TransportError:
            return []
        return sorted(line for line in result.stdout.splitlines() if line)

    def _by_id(self, job: SubmittedJob, *tests: str, suffix: str = "") -> list[str]:
        """Entries `<jobid>-*<suffix>` next to the job dir (outputs/, the real JOB_WORKSPACE)."""
        return self._find(posixpath.dirname(job.job_dir), "-mindepth", "1", "-maxdepth", "1",
                          "-name", f"{job.job_id}-*{suffix}", *tests)

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

    def _log_file(self, job: SubmittedJob) -> str | None:
        """Slurm's log; with Ray the first ray_logs/<host>/worker*.out (the Slurm log may be cut)."""
        if job.job_id in self._logs:
            return self._logs[job.job_id]
        now = self.clock()
        if now - self._looked.get(job.job_id, -math.inf) < self.lookup_interval:
            return None  # a pending job: do not ask the file system on every poll
        self._looked[job.job_id] = now
        path = self._slurm_log(job)
        if self.ray:
            job_dir = self._job_dir(job)
            workers = self._find(posixpath.join(job_dir, "ray_logs"), "-mindepth", "2", "-maxdepth", "2",
                                 "-type", "f", "-name", "worker*.out") if job_dir else []
            if workers:
                path = workers[0]
            elif path is None or not self._ended(path):
                return None  # until training starts; a job that ended before it: its Slurm log
        if path is not None:
            self._logs[job.job_id] = path
        return path

    def _ended(self, slurm_log: str) -> bool:
        try:
            return self.transport.run(["grep", "-q", "-F", "JOB SUMMARY", slurm_log], timeout=60).ok
        except TransportError:
            return False

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None) -> bytes:
        try:
            path = self._log_file(job)
            return b"" if path is None else self.transport.read_from(path, offset, limit)
        except (TransportError, OSError):
            self._logs.pop(job.job_id, None)  # renamed under us: the same bytes under a new name
            self._dirs.pop(job.job_id, None)
            return b""

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
