"""The maxtext-slurm launcher: the checkout's own submit.sh, each run a TUNE_PROFILE case arm.

The block (the xla-tuning skill's "train_env.sh editing pattern") is installed by `prepare()`,
holds one arm per distinct run (its XLA flags, env vars AND MaxText settings, appended to
_train.sh's PASSTHROUGH_ARGS), and is removed byte-exact by `close()`. submit.sh freezes the
checkout per submission, so what the block says at submission is what that job runs, and the
argv carries only `_env_TUNE_PROFILE=<arm>`: JOB_NAME stays short for every upstream config.
Upstream sources configs/<M>.env.sh AFTER train_env.sh, so a second block at the end of that
file applies the flags and env again (`maxtext_files.render_env_file_block`).
"""

from __future__ import annotations

import atexit
import posixpath
import shlex
import sys
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...cell.grammar import CONTAINER_IMAGE, MODEL_TAG, SLURM_TIME, arm_name, job_name
from ...cell.jobnames import XLA_DUMP_ARG
from ...cell.values import HEARTBEAT_ARG, HEARTBEAT_KEY
from ...slurm.client import SlurmClient
from ...transport.base import Transport, TransportError, TransportTimeout
from ...transport.hostcmd import file_commands
from ..base import JobRequest, LauncherError, SubmittedJob
from ..preflight import PreflightError
from ..slurm_jobs import SlurmJobs, SlurmPlacement
from . import files as mf
from . import submit
from .blocks import TuneBlocks, as_text
from .checks import check_submit_tools, resolve_model_name
from .files import Arm
from .inventory import checkout_cache, checkout_inventory
from .jobfiles import MaxTextJobFiles

DEFAULT_TIME = "45:00"  # the skill's submission template
Record = Callable[..., None]


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


class MaxTextSlurmLauncher(MaxTextJobFiles, SlurmJobs):
    """Submits with `./submit.sh <M>:<profile> … -- … _env_TUNE_PROFILE=<arm>` from the checkout."""

    name = "maxtext-slurm"
    queue_depth = 2  # jobs submitted ahead; Slurm serialises them on the pinned nodelist

    def __init__(
        self,
        transport: Transport,
        client: SlurmClient,
        checkout: str,
        placement: SlurmPlacement,
        model_tag: str,
        *,
        sweep_id: str,
        ray: bool = False,
        time_limit: str = DEFAULT_TIME,
        restore_default: RestoreDefault = RestoreDefault(),
        cell: str = "cell",
        record: Record | None = None,
        submit_timeout: float = 300.0,
        image: str = "",
        profiles: Collection[str] = (),
        lookup_interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not checkout.startswith("/"):
            raise ValueError(f"checkout must be an absolute path on the cluster, found {checkout!r}")
        self.transport = transport
        self.files = file_commands(transport)  # find/grep beside the files (local under host-cmd)
        self.client = client
        self.checkout = posixpath.normpath(checkout)
        self.placement = placement
        self.model_tag = MODEL_TAG.check(model_tag)
        self.sweep_id = mf.SWEEP_ID.check(sweep_id)
        self.ray = ray
        self.time_limit = SLURM_TIME.check(time_limit)
        self.restore = restore_default
        self.cell = cell
        self.profiles = frozenset(profiles)  # the cell's own profile names: what a JOB_NAME error asks to shorten
        self.record: Record = record or (lambda event, **payload: None)
        self.submit_timeout = submit_timeout
        # submit.sh runs under DOCKER_IMAGE=<image> (container_env.sh keeps a DOCKER_IMAGE it
        # finds in the environment); empty: container_env.sh's own default.
        self.image = CONTAINER_IMAGE.check(image) if image else ""
        self.lookup_interval = lookup_interval
        self.clock = clock
        self.train_env = self.path("train_env.sh")
        self.model_name = self.model_tag  # configs/<name>.gpu.yml, resolved by prepare() as upstream does
        self.arms: dict[str, Arm] = {}  # name -> arm, in the block's order
        self._files: dict[str, bytes | None] = {}
        self.blocks = TuneBlocks(transport, self.sweep_id, self._clean)
        self._prepared = self._closed = False
        self._yml_parallelism: set[str] = set()  # `dcn_…_parallelism=N` args gpu.yml already sets
        self.user_cache = ""  # where the checkout names a compilation cache itself (then the arms name none)
        self._mine: set[str] = set()
        self._init_job_files()

    # ---- paths and reads -------------------------------------------------------------------

    def path(self, *parts: str) -> str:
        return posixpath.join(self.checkout, *parts)

    @property
    def env_sh(self) -> str:
        return self.path("configs", f"{self.model_name}.env.sh")

    @property
    def gpu_yml(self) -> str:
        return self.path("configs", f"{self.model_name}.gpu.yml")

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
        # Every problem of the checkout at once, each naming what fixes it: one pre-flight, one fix.
        problems = [
            f"expected {posixpath.relpath(required, self.checkout)} in the maxtext-slurm checkout "
            f"{self.checkout}, found none"
            for required in (self.path("submit.sh"), self.train_env)
            if not self.transport.exists(required)
        ]
        if problem := check_submit_tools(self.transport, self.checkout):
            problems.append(problem)
        configs = self._find(self.path("configs"), "-mindepth", "1", "-maxdepth", "1", "-name", "*.gpu.yml")
        try:
            self.model_name = resolve_model_name([posixpath.basename(c) for c in configs], self.model_tag)
        except ValueError as error:
            model = f"{self.cell}: model_tag: {error} (in {self.path('configs')})"
            raise PreflightError(model if not problems else f"{where}: {'; '.join(problems)}; and {model}") from None
        if problems:
            raise PreflightError(f"{where}: {'; '.join(problems)}")
        settings = self.inventory()["gpu_yml"]["settings"]
        self._yml_parallelism = {f"{k}={v}" for k, v in settings.items() if k.endswith("_parallelism")}
        self.user_cache = checkout_cache(self, settings)
        default = submit.parse_container_env(self._clean(self.path("container_env.sh")) or "").get("DOCKER_IMAGE", "")
        image, source = (
            (self.image, "the image asked for") if self.image else (default, f"container_env.sh of {self.checkout}")
        )
        if image.startswith("/") and not self.transport.exists(image):
            raise PreflightError(f"{self.cell}: image: DOCKER_IMAGE {image} ({source}) does not exist on the cluster")
        blocks = {self.train_env: ""}
        if self._read(self.env_sh) is not None:
            blocks[self.env_sh] = ""
        for path in blocks:
            foreign = mf.foreign_block(as_text(self._read(path) or b""), self.sweep_id)
            if foreign is not None:
                raise PreflightError(
                    f"{where}: {path} has TUNE_PROFILE content this sweep did not write, {foreign}; "
                    f"remove it from the checkout {self.checkout} first"
                )
        atexit.register(self._cleanup_at_exit)  # -x, Ctrl-C and failures end in close(); this is the net
        self.blocks.install(self._render(list(blocks)))

    def _render(self, paths: Sequence[str]) -> dict[str, str]:
        """The block of each file, with an arm per distinct run registered so far."""
        arms = list(self.arms.values())
        xla, env = mf.render_tune_block(arms, self.model_name)
        blocks = {self.train_env: xla + env}
        if self.env_sh in paths:
            blocks[self.env_sh] = mf.render_env_file_block(arms, self.model_name)
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
            print(
                f"xlatune: {self.cell}: could not remove the TUNE_PROFILE block from {path} (sweep "
                f"{self.sweep_id}; the next session of this cell removes it): {error}",
                file=sys.stderr,
            )
        self.record(
            "cleanup",
            restored=[f for f in files if f not in errors],
            errors=errors,
            ssh_connections=self.transport.connections_opened,
        )

    # ---- inventory (the skill's Step 2: launch/maxtext/inventory.py) -------------------------

    def inventory(self) -> dict[str, Any]:
        """gpu.yml keys, what configs/<M>.env.sh deploys, container_env.sh, a prior tuning doc."""
        return checkout_inventory(self)

    # ---- jobs ------------------------------------------------------------------------------

    def wanted_arm(self, request: JobRequest) -> Arm:
        """The arm a request needs (unnamed): its flags, env (None: unset), MaxText settings and
        compilation cache (none when the checkout names its own).

        The skill's rule "no parallelism override when gpu.yml already has N" (the same config)."""
        args = [a for a in request.passthrough if a not in self._yml_parallelism]
        if not any(a.startswith(HEARTBEAT_KEY + "=") for a in args):
            args.append(HEARTBEAT_ARG)
        env = tuple(request.env) + tuple((name, None) for name in request.unset_env)
        return Arm("", tuple(request.xla_flags), env, tuple(args), "" if self.user_cache else request.compile_cache)

    def arm_for(self, request: JobRequest) -> tuple[str, bool]:
        """(name, is new): an arm with exactly the request's settings, else a fresh name for one:
        the profile, then `<profile>.<config tag>`, then `<profile>.<config tag>.<n>`."""
        wanted = self.wanted_arm(request)
        for name, arm in self.arms.items():
            if arm.same_run(wanted):
                return name, False
        tag = request.config_tag or "run"
        names = [request.profile] + [arm_name(request.profile, tag, n) for n in range(1, len(self.arms) + 3)]
        return next(n for n in names if n not in self.arms), True

    def check_requests(self, requests: Iterable[JobRequest]) -> None:
        """Pre-flight: give every submission the sweep may make its arm (one block rewrite) and
        check submit.sh would take it (JOB_NAME limit), so a sweep never stops half-submitted."""
        added = False
        for request in requests:
            name, new = self.arm_for(request)
            if new:
                self.arms[name] = replace(self.wanted_arm(request), name=name)
                added = True
            try:
                self._argv(request, name)
            except LauncherError as error:
                raise PreflightError(f"{self.cell}: waves: {error}") from None
        if added and self._prepared:
            self.blocks.update(self._render(self.blocks.paths))

    def _add_arm(self, request: JobRequest) -> str:
        """The arm of a run known only now (a stack of this session's winners, a locked stack in
        the gate, a winner re-run): the block is rewritten with it before submit.sh freezes the
        checkout, so the job runs exactly it."""
        name, new = self.arm_for(request)
        if not new:
            return name
        arm = replace(self.wanted_arm(request), name=name)
        self.arms[name] = arm
        try:
            self.blocks.update(self._render(self.blocks.paths))
        except (ValueError, TransportError) as error:
            del self.arms[name]
            raise LauncherError(
                f"{request.job_name}: cannot add TUNE_PROFILE arm {name!r} to the installed block: {error}"
            ) from None
        self.record(
            "tune_arm_added",
            profile=name,
            xla_flags=list(arm.xla_flags),
            env=[list(kv) for kv in arm.env],
            args=list(arm.args),
        )
        return name

    def argv_for(self, request: JobRequest) -> list[str]:
        """The submit.sh argv of a request whose arm check_requests registered (or would name)."""
        return self._argv(request, self.arm_for(request)[0])

    def _argv(self, request: JobRequest, arm: str) -> list[str]:
        env_args = [XLA_DUMP_ARG] if request.evidence else []  # read by train_env.sh before our block
        p = self.placement
        try:
            argv = submit.submit_argv(
                self.model_name,
                request.profile,
                p.nodes,
                p.nodelist,
                self.time_limit,
                p.partition,
                env_args,
                self.ray,
                arm=arm,
                mark=request.mark,
                profiles=self.profiles,
            )
        except ValueError as error:
            raise LauncherError(f"{request.job_name}: " + " | ".join(str(error).splitlines())) from None
        image = self.image if request.image is None else request.image  # the gate's old-image controls
        return ["env", f"DOCKER_IMAGE={image}", *argv] if image else argv

    def submit(self, request: JobRequest) -> SubmittedJob:
        if not self._prepared or self._closed:
            raise LauncherError(f"{self.cell}: the TUNE_PROFILE block is not installed (prepare() first)")
        arm = self._add_arm(request)
        argv = self._argv(request, arm)
        command = f"{shlex.join(argv)} (in {self.checkout})"
        try:
            result = self.transport.run(argv, timeout=self.submit_timeout, cwd=self.checkout)
        except TransportTimeout as error:
            raise LauncherError(f"{command}: {error}; it may have submitted a job (see squeue)") from None
        except TransportError as error:
            raise LauncherError(f"{command}: {error}") from None
        output = f"{result.stdout}\n{result.stderr}"
        try:
            job_id = submit.parse_submit_output(output)
        except ValueError as error:
            raise LauncherError(
                f"{command} exited {result.returncode}: " + " | ".join(str(error).splitlines())
            ) from None
        self._mine.add(job_id)
        if not result.ok:  # sbatch took the job, then submit.sh failed: do not leave it running unseen
            self.client.cancel(job_id)
            tail = " | ".join(output.strip().splitlines()[-3:])
            raise LauncherError(
                f"{command} exited {result.returncode} after submitting job {job_id} (cancelled): {tail}"
            )
        name = next(
            (line.partition("=")[2] for line in result.stdout.splitlines() if line.startswith("JOB_NAME=")),
            job_name(self.model_name, request.profile, argv[argv.index("--") + 1 :]),
        )
        job_dir = submit.parse_job_dir(output, job_id) or self.path("outputs", f"{job_id}-{name}")
        cache = self.arms[arm].compile_cache  # in the outputs tree the job dir is in (mf.CACHE_ROOT)
        cache_dir = posixpath.join(posixpath.dirname(job_dir), mf.CACHE_ROOT, cache) if cache else ""
        return SubmittedJob(job_id=job_id, log_path=f"{job_dir}.log", job_dir=job_dir, compile_cache=cache_dir)

    def _submitted_job(self, job_id: str, job_name: str) -> SubmittedJob:
        """A job found by its mark: its per-job dir is outputs/<jobid>-<JOB_NAME> (submit.sh made
        it even if the session that ran submit.sh died: it runs in a session of its own)."""
        guess = SubmittedJob(job_id, "", self.path("outputs", f"{job_id}-{job_name}"))
        found = self._by_id(guess, "-type", "d")
        job_dir = found[0] if found else guess.job_dir
        return SubmittedJob(job_id=job_id, log_path=f"{job_dir}.log", job_dir=job_dir)

    def reattach(self, job: SubmittedJob) -> bool:
        # The checkout's ownership rule: a job is ours iff outputs/<jobid>-* exists.
        if not job.job_id.isdigit() or not self._by_id(job):
            return False
        self._mine.add(job.job_id)
        return True
