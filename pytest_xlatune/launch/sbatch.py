"""The sbatch launcher: a jinja2 batch script that exports the composed flags and runs a command.

For users without maxtext-slurm: the cell's `backend.command` (e.g. a MaxText or any JAX trainer
command line) gets the MaxText-style passthrough args. Every job is pinned to the frozen nodelist
with `--nodelist`, `--nodes` and `--exclusive`, so Slurm runs the session's jobs one at a time.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import replace

import jinja2

from ..jaxcache import MAXTEXT_KEY, cache_env, cache_path
from ..paths import job_dir_name, job_log_name
from ..slurm import commands
from ..slurm.client import SlurmClient
from ..transport.base import Transport, TransportError
from ..transport.hostcmd import file_commands
from .base import JobRequest, LauncherError, SubmittedJob, for_image
from .slurm_jobs import SlurmJobs, SlurmPlacement

__all__ = ["SbatchLauncher", "SlurmPlacement", "render_script"]


def render_script(request: JobRequest, command: Sequence[str], outputs_dir: str, cache_dir: str = "") -> str:
    """The batch script; `cache_dir` is the run's compilation cache ("" for none), exported and
    given to the command as MaxText's `jax_cache_dir` (which MaxText applies over the variable)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_xlatune", "launch/templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = shlex.quote
    return env.get_template("sbatch.sh.j2").render(
        job_name=request.job_name,
        passthrough=list(request.passthrough),
        xla_flags=list(request.xla_flags),
        evidence=request.evidence,
        env=list(request.env),
        unset_env=list(request.unset_env),
        command=list(command),
        outputs_dir=outputs_dir,
        cache_env=list(cache_env(request.evidence, cache_dir)),
        cache_arg=[f"{MAXTEXT_KEY}={cache_dir}"] if cache_dir and not request.evidence else [],
    )


class SbatchLauncher(SlurmJobs):
    """Submits rendered scripts with sbatch; polls, cancels and reads logs through the transport."""

    name = "sbatch"
    queue_depth = 2  # jobs submitted ahead; Slurm serialises them on the pinned nodelist

    def __init__(
        self,
        transport: Transport,
        client: SlurmClient,
        workdir: str,
        placement: SlurmPlacement,
        command: Sequence[str],
        commands_by_image: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.transport = transport
        self.commands_by_image = {image: list(c) for image, c in (commands_by_image or {}).items()}
        self.client = client
        self.workdir = workdir
        self.placement = placement
        self.command = list(command)
        self._mine: set[str] = set()

    def submit(self, request: JobRequest) -> SubmittedJob:
        script_path = posixpath.join(self.workdir, "scripts", f"{request.job_name}.sbatch")
        outputs = posixpath.join(self.workdir, "outputs")
        log_pattern = posixpath.join(outputs, job_log_name("%j", request.job_name))
        cache = cache_path(posixpath.join(self.workdir, "jax-cache"), request.compile_cache)
        script = render_script(request, for_image(self.command, self.commands_by_image, request), outputs, cache)
        try:
            file_commands(self.transport).run(
                ["mkdir", "-p", posixpath.dirname(script_path), posixpath.dirname(log_pattern)], timeout=60
            ).check()
            self.transport.write_atomic(script_path, script.encode())
        except TransportError as error:
            raise LauncherError(str(error)) from None
        argv = commands.sbatch(
            script_path,
            job_name=request.job_name,
            partition=self.placement.partition,
            nodes=self.placement.nodes,
            nodelist=self.placement.nodelist,
            exclusive=True,
            requeue=False,
            time_limit=self.placement.time_limit,
            output=log_pattern,
            chdir=self.workdir,
            comment=request.mark or None,
        )
        job_id = self.client.submit(argv)
        self._mine.add(job_id)
        return replace(self._submitted_job(job_id, request.job_name), compile_cache=cache)

    def _submitted_job(self, job_id: str, job_name: str) -> SubmittedJob:
        outputs = posixpath.join(self.workdir, "outputs")
        return SubmittedJob(
            job_id=job_id,
            log_path=posixpath.join(outputs, job_log_name(job_id, job_name)),
            job_dir=posixpath.join(outputs, job_dir_name(job_id, job_name)),
        )

    def reattach(self, job: SubmittedJob) -> bool:
        self._mine.add(job.job_id)  # recorded as ours by the store: ours to poll and cancel
        return True

    def read_log(self, job: SubmittedJob, offset: int, limit: int | None = None, *, ended: bool = False) -> bytes:
        try:
            return self.transport.read_from(job.log_path, offset, limit)
        except (TransportError, OSError):
            return b""  # not written yet (pending job)

    def artifacts(self, job: SubmittedJob) -> dict[str, str]:
        found = {}
        dump = posixpath.join(job.job_dir, "xla_dump")
        if self.transport.exists(dump):
            found["hlo_dump"] = dump
        return found

    def close(self) -> None:
        pass
