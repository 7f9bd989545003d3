"""Slurm through a transport: the argv builders of `commands`, the parsers of `parsers`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..jobs import CommandRefused, LauncherError
from ..transport.base import CommandResult, Transport, TransportError, TransportRefused
from . import commands
from .parsers import (
    JobState,
    JobStatus,
    NodeStatus,
    SlurmParseError,
    parse_hostnames,
    parse_marks,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol_show_job,
    parse_scontrol_show_jobs,
    parse_sinfo_nodes,
    parse_squeue,
)

# stderr of `scontrol update NodeName=N State=RESUME` for a node that is not drained or down.
INVALID_NODE_STATE = "Invalid node state specified"


class SlurmClient:
    """Every Slurm CLI call of a session; each failure is a one-line LauncherError."""

    def __init__(self, transport: Transport, *, timeout: float = 60.0, accounting: bool | None = None) -> None:
        self.transport = transport
        self.timeout = timeout
        self.calls = 0
        self._accounting = accounting  # None: find out on first need

    def _run(self, argv: Sequence[str], cwd: str | None = None, harmless: str = "") -> CommandResult:
        """Run a Slurm command; a non-zero exit is a LauncherError unless stderr says `harmless`."""
        self.calls += 1
        try:
            result = self.transport.run(argv, timeout=self.timeout, cwd=cwd)
            return result if harmless and harmless in result.stderr else result.check()
        except TransportRefused as error:
            raise CommandRefused(str(error)) from None
        except TransportError as error:
            raise LauncherError(str(error)) from None

    def submit(self, argv: Sequence[str], cwd: str | None = None) -> str:
        result = self._run(argv, cwd=cwd)
        try:
            return parse_sbatch_parsable(result.stdout)
        except SlurmParseError as error:
            raise LauncherError(f"sbatch: {error}") from None

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        """One squeue call for every job; exit codes of finished ones from one more call."""
        if not job_ids:
            return {}
        try:
            found = parse_squeue(self._run(commands.squeue(job_ids)).stdout)
        except SlurmParseError as error:
            raise LauncherError(f"squeue: {error}") from None
        ended = [j for j in job_ids if j not in found or found[j].state.finished]
        if ended:
            found.update(self._finished(ended))
        return found

    def _finished(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        """Exit codes: sacct when accounting is on, else slurmctld's memory (scontrol)."""
        if self._accounting is not False:
            try:
                answer = parse_sacct(self._run(commands.sacct(job_ids)).stdout)
                self._accounting = True
            except (LauncherError, SlurmParseError):
                if self._accounting:
                    raise
                self._accounting = False
            else:
                return {j: self._exit_code_of(s) for j, s in answer.items() if j in job_ids}
        try:
            answer = parse_scontrol_show_jobs(self._run(commands.scontrol_show_jobs()).stdout)
        except SlurmParseError as error:
            raise LauncherError(f"scontrol: {error}") from None
        known = {j: s for j, s in answer.items() if j in job_ids}
        for job_id in job_ids:  # purged from slurmctld's memory: it ended long ago
            known.setdefault(job_id, JobStatus(job_id, JobState.UNKNOWN, None, "", "purged"))
        return known

    def _exit_code_of(self, status: JobStatus) -> JobStatus:
        """A FAILED job's exit code from slurmctld while it remembers the job.

        slurmdbd (22.05) stores a batch exit code N >= 128 as N - 128: sacct prints `15:0` for a
        script that exited 143 (SIGTERM after the last step), `0:0` for one that exited 128,
        while `scontrol show job` prints `143:0`. Only FAILED jobs exit with a code of their
        own; once slurmctld has purged the job, sacct's word is all there is.
        """
        if status.state is not JobState.FAILED:
            return status
        try:
            known = parse_scontrol_show_job(self._run(commands.scontrol_show_job(status.job_id)).stdout)
        except (LauncherError, SlurmParseError):
            return status  # purged (`Invalid job id specified`): keep sacct's code
        return status if known.exit_code is None else replace(status, exit_code=known.exit_code)

    def cancel(self, job_id: str) -> None:
        self._run(commands.scancel(job_id))

    def jobs_marked(self, mark: str, since: str) -> list[str]:
        """The ids of the jobs whose comment is `mark` (a submission's, see commands.SUBMISSION_MARK):
        slurmctld's jobs first (finished ones for MinJobAge), then accounting since `since` (which
        keeps comments only with AccountingStoreFlags=job_comment). A failed squeue goes up: the
        caller must not take "could not ask" for "no such job"."""
        commands.submission_mark(mark)
        try:
            found = parse_marks(self._run(commands.squeue_marks()).stdout).get(mark, [])
        except SlurmParseError as error:
            raise LauncherError(f"squeue: {error}") from None
        if found or self._accounting is False:
            return found
        try:
            found = parse_marks(self._run(commands.sacct_marks(since)).stdout).get(mark, [])
        except (LauncherError, SlurmParseError):
            return []  # no accounting here: slurmctld's answer is all there is
        return found

    def nodes(self, *, partition: str | None = None, nodelist: str | None = None) -> dict[str, NodeStatus]:
        return parse_sinfo_nodes(self._run(commands.sinfo_nodes(partition, nodelist)).stdout)

    def hostnames(self, nodelist: str) -> list[str]:
        return parse_hostnames(self._run(commands.scontrol_show_hostnames(nodelist)).stdout)

    def resume(self, node: str, reason: str = "xlatune") -> None:
        """RESUME a drained/down node; one in no state to resume is left as it is.

        Slurm refuses RESUME (`Invalid node state specified`) for a node neither drained nor
        down: one resumed already, or one RESUMEd while its slurmd is dead, which shows
        `idle*` until slurmctld marks it down again. Whether the node is back is for the
        caller's next sinfo to say; the refusal is no reason to abort the sweep.
        """
        self._run(commands.scontrol_update_node(node, "RESUME", reason), harmless=INVALID_NODE_STATE)

    def queue_on_nodes(self, nodelist: str) -> str:
        """`squeue` of the jobs holding any of these nodes, as text (pre-flight says the sweep waits)."""
        return self._run(
            ["squeue", "--noheader", "--format=%i|%u|%T|%N|%j", f"--nodelist={commands.validate_nodelist(nodelist)}"]
        ).stdout

    def queue_of_partition(self, partition: str | None) -> str:
        """`squeue` of the partition, as text (pre-flight shows other users' jobs)."""
        argv = ["squeue", "--noheader", "--format=%i|%u|%T|%N|%j"]
        if partition:
            argv.append(f"--partition={partition}")
        return self._run(argv).stdout
