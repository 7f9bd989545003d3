"""Slurm parsers against real output recorded from scripts/local-slurm.sh (Slurm 22.05), and argv builders."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_xlatune.slurm import JobState, NodeState, SlurmParseError, commands, parsers
from pytest_xlatune.slurm.parsers import (
    parse_exit_code,
    parse_hostnames,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol_show_job,
    parse_scontrol_show_jobs,
    parse_sinfo_nodes,
    parse_squeue,
    parse_submitted_batch_job,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "slurm"


def recorded(name: str) -> str:
    return (DATA / name).read_text()


S = JobState

# (file, {job_id: (state, reason, nodes, name)})
SQUEUE_CASES = [
    (
        "squeue_running_pending.txt",
        {
            "9": (S.FAILED, "NonZeroExitCode", "node03", "xlt-fail"),
            "7": (S.PENDING, "Resources", "", "xlt-second"),
            "11": (S.PENDING, "Resources", "", "xlt-cancel-me"),
            "6": (S.RUNNING, "", "node01", "xlt-long"),
            "8": (S.RUNNING, "", "node02", "xlt name|with pipe"),
            "10": (S.RUNNING, "", "node03", "xlt-timeout"),
        },
    ),
    (
        "squeue_all_states.txt",
        {
            "14": (S.CANCELLED, "Resources", "", "xlt-wait"),
            "7": (S.COMPLETED, "", "node01", "xlt-second"),
            "12": (S.FAILED, "NonZeroExitCode", "node03", "xlt-fail"),
            "15": (S.PENDING, "ReqNodeNotAvail, UnavailableNodes:node04", "", "xlt-on-down-node"),
            "13": (S.RUNNING, "", "node03", "xlt-run"),
            "10": (S.TIMEOUT, "TimeLimit", "node03", "xlt-timeout"),
        },
    ),
    (
        "squeue_reqnodenotavail.txt",
        {
            "8": (S.CANCELLED, "", "node02", "xlt name|with pipe"),
            "11": (S.CANCELLED, "Resources", "", "xlt-cancel-me"),
            "6": (S.COMPLETED, "", "node01", "xlt-long"),
            "7": (S.PENDING, "ReqNodeNotAvail, UnavailableNodes:node01", "", "xlt-second"),
            "10": (S.RUNNING, "", "node03", "xlt-timeout"),
        },
    ),
    ("squeue_node_fail.txt", {"17": (S.NODE_FAIL, "NodeDown", "node04", "xlt-node-fail")}),
    ("squeue_unknown_and_known.txt", {"13": (S.RUNNING, "", "node03", "xlt-run")}),
]


@pytest.mark.parametrize(("name", "expected"), SQUEUE_CASES, ids=[c[0] for c in SQUEUE_CASES])
def test_parse_squeue_reads_every_recorded_job(name: str, expected: dict[str, tuple[S, str, str, str]]) -> None:
    jobs = parse_squeue(recorded(name))
    assert {j: (s.state, s.reason, s.nodes, s.name) for j, s in jobs.items()} == expected
    assert all(s.exit_code is None and s.job_id == j for j, s in jobs.items())


# (file, job_id, state, exit_code, nodes, reason)
SCONTROL_CASES = [
    ("scontrol_show_job_pending.txt", "7", S.PENDING, None, "", "Resources"),
    (
        "scontrol_show_job_pending_reqnodenotavail.txt",
        "7",
        S.PENDING,
        None,
        "",
        "ReqNodeNotAvail,_UnavailableNodes:node01",
    ),
    ("scontrol_show_job_running.txt", "6", S.RUNNING, None, "node01", ""),
    ("scontrol_show_job_completed.txt", "7", S.COMPLETED, 0, "node01", ""),
    ("scontrol_show_job_failed.txt", "12", S.FAILED, 3, "node03", "NonZeroExitCode"),
    ("scontrol_show_job_cancelled_pending.txt", "11", S.CANCELLED, 0, "", "Resources"),
    ("scontrol_show_job_cancelled_running.txt", "8", S.CANCELLED, 143, "node02", ""),
    ("scontrol_show_job_timeout.txt", "10", S.TIMEOUT, 143, "node03", "TimeLimit"),
    ("scontrol_show_job_node_fail.txt", "17", S.NODE_FAIL, 0, "node04", "NodeDown"),
]


@pytest.mark.parametrize(
    ("name", "job_id", "state", "exit_code", "nodes", "reason"), SCONTROL_CASES, ids=[c[0] for c in SCONTROL_CASES]
)
def test_parse_scontrol_show_job_reads_state_exit_code_and_nodes(
    name: str, job_id: str, state: S, exit_code: int | None, nodes: str, reason: str
) -> None:
    status = parse_scontrol_show_job(recorded(name))
    assert (status.job_id, status.state, status.exit_code, status.nodes, status.reason) == (
        job_id,
        state,
        exit_code,
        nodes,
        reason,
    )


def test_parse_scontrol_keeps_an_empty_nodelist_apart_from_schednodelist() -> None:
    # Recorded: "NodeList= SchedNodeList=node03" for a job cancelled while pending.
    assert "SchedNodeList=node03" in recorded("scontrol_show_job_cancelled_pending.txt")
    assert parse_scontrol_show_job(recorded("scontrol_show_job_cancelled_pending.txt")).nodes == ""


@pytest.mark.parametrize("name", ["scontrol_show_job_all.txt", "scontrol_show_job_all_oneliner.txt"])
def test_parse_scontrol_show_jobs_reads_every_record_multi_line_or_oneliner(name: str) -> None:
    jobs = parse_scontrol_show_jobs(recorded(name))
    assert {j: (s.state, s.exit_code) for j, s in jobs.items()} == {
        "7": (S.PENDING, None),
        "10": (S.TIMEOUT, 143),
        "12": (S.FAILED, 3),
        "13": (S.RUNNING, None),
        "14": (S.PENDING, None),
    }


def test_parse_scontrol_show_jobs_with_no_jobs_is_empty() -> None:
    assert parse_scontrol_show_jobs(recorded("scontrol_show_job_no_jobs.txt")) == {}
    with pytest.raises(SlurmParseError, match="expected one job record, found 0"):
        parse_scontrol_show_job(recorded("scontrol_show_job_no_jobs.txt"))


N = NodeState
# (file, {node: (state, responding, reason)})
SINFO_CASES = [
    ("sinfo_nodes_idle.txt", dict.fromkeys(("node01", "node02", "node03", "node04"), (N.IDLE, True, ""))),
    (
        "sinfo_nodes_busy.txt",
        {
            "node01": (N.ALLOCATED, True, ""),
            "node02": (N.IDLE, True, ""),
            "node03": (N.ALLOCATED, True, ""),
            "node04": (N.IDLE, True, ""),
        },
    ),
    (
        "sinfo_nodes_drain_just_killed.txt",
        {
            "node01": (N.DRAINING, True, "xlatune test: draining busy"),
            "node02": (N.DRAINED, True, "xlatune test: drained idle"),
            "node03": (N.ALLOCATED, True, ""),
            "node04": (N.IDLE, True, ""),
        },
    ),
    (
        "sinfo_nodes_not_responding.txt",
        {
            "node01": (N.IDLE, True, ""),
            "node02": (N.IDLE, True, ""),
            "node03": (N.IDLE, True, ""),
            "node04": (N.IDLE, False, ""),
        },
    ),
    (
        "sinfo_nodes_drained_down.txt",
        {
            "node01": (N.IDLE, True, ""),
            "node02": (N.DRAINED, True, "xlatune test: drained idle"),
            "node03": (N.IDLE, True, ""),
            "node04": (N.DOWN, False, "Not responding"),
        },
    ),
    (
        "sinfo_nodes_resumed_one.txt",
        {
            "node01": (N.ALLOCATED, True, ""),
            "node02": (N.DRAINED, True, "xlatune test: drained idle"),
            "node03": (N.ALLOCATED, True, ""),
            "node04": (N.DOWN, False, "Not responding"),
        },
    ),
]


@pytest.mark.parametrize(("name", "expected"), SINFO_CASES, ids=[c[0] for c in SINFO_CASES])
def test_parse_sinfo_nodes_strips_flags_and_keeps_reasons(
    name: str, expected: dict[str, tuple[NodeState, bool, str]]
) -> None:
    nodes = parse_sinfo_nodes(recorded(name))
    assert {n: (s.state, s.responding, s.reason) for n, s in nodes.items()} == expected
    assert {s.partition for s in nodes.values()} == {"debug"}


@pytest.mark.parametrize(
    ("line", "state", "responding"),
    [
        ("gpu01|mixed|batch|none", N.MIXED, True),
        ("gpu01|idle~|batch|none", N.IDLE, True),
        ("gpu01|drained*|batch|bad gpu", N.DRAINED, False),
        ("gpu01|completing|batch|none", N.COMPLETING, True),
        ("gpu01|allocated+|batch|none", N.ALLOCATED, True),
        ("gpu01|inval|batch|none", N.UNKNOWN, True),
    ],
)
def test_parse_sinfo_nodes_states_not_reproducible_on_one_cpu_nodes(
    line: str, state: NodeState, responding: bool
) -> None:
    # Synthetic lines in the recorded format for states this 1-CPU-per-node cluster cannot show.
    (status,) = parse_sinfo_nodes(line).values()
    assert (status.state, status.responding) == (state, responding)


def test_parse_sinfo_nodes_keeps_the_first_partition_of_a_node_listed_twice() -> None:
    nodes = parse_sinfo_nodes("n1|idle|debug*|none\nn1|idle|long|none\n")
    assert list(nodes) == ["n1"] and nodes["n1"].partition == "debug"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("scontrol_show_hostnames.txt", ["node01", "node02", "node03", "node04"]),
        ("scontrol_show_hostnames_mixed.txt", ["node01", "node03", "node04", "node02"]),
    ],
)
def test_parse_hostnames_keeps_slurm_order(name: str, expected: list[str]) -> None:
    assert parse_hostnames(recorded(name)) == expected


@pytest.mark.parametrize(
    ("text", "job_id"),
    [
        (recorded("sbatch_parsable.txt"), "6"),
        ("123;cluster\n", "123"),
        ("sbatch: warning: something\n77\n", "77"),
    ],
)
def test_parse_sbatch_parsable(text: str, job_id: str) -> None:
    assert parse_sbatch_parsable(text) == job_id


@pytest.mark.parametrize("text", ["", "sbatch: error: Batch job submission failed: Invalid partition name specified\n"])
def test_parse_sbatch_parsable_rejects_output_without_an_id(text: str) -> None:
    with pytest.raises(SlurmParseError, match="no job id in sbatch --parsable output"):
        parse_sbatch_parsable(text)


SUBMIT_SH_OUTPUT = """\
MODEL_NAME=qwen3-32b
EXP_TAG=fsdp8-baseline
JOB_NAME=JAX-qwen3-32b-fsdp8-baseline
[ARTIFACT] Building artifact...
MAXTEXT_SLURM_DIR=/shared/maxtext-slurm/outputs/.artifacts/artifact_20260101_000000_1a2b
Submitted batch job 4242
[ARTIFACT] /shared/outputs/4242-JAX-qwen3-32b-fsdp8-baseline/artifact -> .artifacts/artifact_20260101_000000_1a2b
"""


@pytest.mark.parametrize(
    ("text", "job_id"),
    [
        (recorded("sbatch_submitted.txt"), "7"),
        (SUBMIT_SH_OUTPUT, "4242"),  # shaped after maxtext-slurm submit.sh (see shared notes)
    ],
)
def test_parse_submitted_batch_job(text: str, job_id: str) -> None:
    assert parse_submitted_batch_job(text) == job_id


def test_parse_submitted_batch_job_without_the_line_names_the_output() -> None:
    with pytest.raises(SlurmParseError, match="Invalid partition"):
        parse_submitted_batch_job("sbatch: error: Batch job submission failed: Invalid partition name specified")


SACCT_CASES = [
    (
        "sacct_mixed_states.txt",
        {
            "80": (S.PENDING, None, ""),
            "81": (S.PENDING, None, ""),
            "82": (S.RUNNING, None, "node02"),
            "83": (S.PENDING, None, ""),
            "84": (S.CANCELLED, 143, "node03"),
            "85": (S.CANCELLED, 0, ""),
            "86": (S.RUNNING, None, "node04"),
            "87": (S.PENDING, None, ""),
        },
    ),
    (
        "sacct_finished_states.txt",
        {
            "80": (S.COMPLETED, 0, "node01"),
            "81": (S.FAILED, 3, "node01"),
            "82": (S.COMPLETED, 0, "node02"),
            "83": (S.COMPLETED, 0, "node02"),
            "84": (S.CANCELLED, 143, "node03"),
            "85": (S.CANCELLED, 0, ""),
            "86": (S.TIMEOUT, 143, "node04"),
            "87": (S.FAILED, 1, "node01"),
        },
    ),
]


@pytest.mark.parametrize(("name", "expected"), SACCT_CASES, ids=[c[0] for c in SACCT_CASES])
def test_parse_sacct_skips_steps_and_reads_cancelled_by_uid(
    name: str, expected: dict[str, tuple[S, int | None, str]]
) -> None:
    # Recorded with `scripts/local-slurm.sh up --accounting` (slurmdbd + MariaDB).
    text = recorded(name)
    assert "CANCELLED by 0" in text and ".batch|" in text
    jobs = parse_sacct(text)
    assert {j: (s.state, s.exit_code, s.nodes) for j, s in jobs.items()} == expected


def test_parse_sacct_takes_a_signal_from_the_batch_step_like_scontrol_does() -> None:
    # The allocation line says 0:0 for a job killed at its time limit; its batch step says 0:15.
    text = "86|TIMEOUT|0:0|node04\n86.batch|CANCELLED|0:15|node04\n"
    assert parse_sacct(text)["86"].exit_code == 143
    assert parse_sacct("86|TIMEOUT|0:0|node04\n")["86"].exit_code == 0
    assert parse_sacct("21_3|COMPLETED|0:0|node01\n")["21_3"].state is S.COMPLETED


def test_a_cancelled_jobs_shell_that_exited_143_reads_143_not_slurmdbds_15() -> None:
    # CI, under load: scancel killed `sleep 60` first, bash exited 143, slurmdbd kept 143 - 128.
    text = "1464|CANCELLED by 0|0:0|node03\n1464.batch|CANCELLED|15:0|node03\n"
    assert parse_sacct(text)["1464"].exit_code == 143
    assert parse_sacct(text.replace("15:0", "9:0"))["1464"].exit_code == 137
    # A failed job's own exit code is never shifted, nor another code of a cancelled one.
    assert parse_sacct("7|FAILED|15:0|node01\n7.batch|FAILED|15:0|node01\n")["7"].exit_code == 15
    assert parse_sacct("8|CANCELLED by 0|0:0|n\n8.batch|CANCELLED|1:0|n\n")["8"].exit_code == 1


def test_sacct_without_accounting_prints_nothing_on_stdout() -> None:
    assert parse_sacct(recorded("sacct_disabled_stdout.txt")) == {}
    assert "accounting storage is disabled" in recorded("sacct_disabled_stderr.txt")


def test_squeue_single_unknown_id_error_text_is_the_known_constant() -> None:
    assert parsers.INVALID_JOB_ID in recorded("squeue_single_unknown_stderr.txt")


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("CANCELLED by 0", S.CANCELLED),
        ("CANCELLED+", S.CANCELLED),
        ("OUT_OF_MEMORY", S.OUT_OF_MEMORY),
        ("OOM", S.OUT_OF_MEMORY),
        ("PD", S.PENDING),
        ("CG", S.COMPLETING),
        ("REQUEUED", S.PENDING),
        ("SPECIAL_EXIT", S.FAILED),
        ("SOMETHING_NEW", S.UNKNOWN),
    ],
)
def test_job_state_parse_spellings(text: str, state: JobState) -> None:
    assert JobState.parse(text) is state


def test_job_state_finished_is_exactly_the_terminal_states() -> None:
    running = {S.PENDING, S.CONFIGURING, S.RUNNING, S.COMPLETING, S.UNKNOWN}
    assert {s for s in JobState if not s.finished} == running


@pytest.mark.parametrize(
    ("text", "code"), [("0:0", 0), ("3:0", 3), ("0:15", 143), ("0:9", 137), ("", None), ("1:15", 1)]
)
def test_parse_exit_code_uses_the_shell_convention_for_signals(text: str, code: int | None) -> None:
    assert parse_exit_code(text) == code


@pytest.mark.parametrize(
    ("parser", "text", "match"),
    [
        (parse_squeue, "garbage line", "unexpected squeue line"),
        (parse_sacct, "12|FAILED", "unexpected sacct line"),
        (parse_sinfo_nodes, "node01 idle", "unexpected sinfo line"),
    ],
)
def test_parsers_quote_the_line_they_do_not_understand(parser: object, text: str, match: str) -> None:
    with pytest.raises(SlurmParseError, match=match):
        parser(text)  # type: ignore[operator]


# -- argv builders --------------------------------------------------------------------------


def test_squeue_asks_for_all_jobs_in_one_call_including_finished_ones() -> None:
    assert commands.squeue(["1", 2, "3"]) == [
        "squeue",
        "--noheader",
        "--states=all",
        "--jobs=1,2,3",
        f"--format={parsers.SQUEUE_FORMAT}",
    ]


def test_squeue_repeats_a_single_id_so_an_unknown_id_is_not_an_error() -> None:
    assert "--jobs=7,7" in commands.squeue(["7"])


@pytest.mark.parametrize("bad", ["1;rm -rf /", "12 13", "-1", "abc", "", "12_", "1_2_3", "$(id)"])
def test_job_id_builders_refuse_anything_but_ids(bad: str) -> None:
    for build in (commands.scancel, commands.scontrol_show_job, lambda j: commands.squeue([j])):
        with pytest.raises(ValueError, match="invalid Slurm job id"):
            build(bad)


@pytest.mark.parametrize("good", ["12", "12_3", "12+1", 12])
def test_scancel_takes_exactly_one_job_id(good: str | int) -> None:
    assert commands.scancel(good) == ["scancel", str(good)]


def test_sbatch_builds_pinned_submission() -> None:
    argv = commands.sbatch(
        "/tmp/a b/job.sh",
        script_args=["x y"],
        job_name="xlt-1",
        nodes=1,
        nodelist="node01",
        time_limit="00:05:00",
        output="/tmp/a b/%j.out",
        requeue=False,
        exclusive=True,
    )
    assert argv == [
        "sbatch",
        "--parsable",
        "--job-name=xlt-1",
        "--nodes=1",
        "--nodelist=node01",
        "--time=00:05:00",
        "--output=/tmp/a b/%j.out",
        "--exclusive",
        "--no-requeue",
        "/tmp/a b/job.sh",
        "x y",
    ]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"nodelist": "node01;reboot"}, "invalid Slurm node list"),
        ({"job_name": "a b"}, "invalid job name"),
        ({"time_limit": "soon"}, "invalid time limit"),
        ({"nodes": 0}, "invalid node count"),
        ({"extra": ["positional"]}, "must be options"),
        ({"output": "a\nb"}, "invalid output path"),
    ],
)
def test_sbatch_refuses_values_outside_the_grammar(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        commands.sbatch(wrap="true", **kwargs)  # type: ignore[arg-type]


def test_sbatch_needs_exactly_one_of_script_and_wrap() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        commands.sbatch()
    with pytest.raises(ValueError, match="exactly one"):
        commands.sbatch("job.sh", wrap="true")


def test_node_builders() -> None:
    assert commands.scontrol_update_node("node02", "resume", "xlatune: back") == [
        "scontrol",
        "update",
        "NodeName=node02",
        "State=RESUME",
        "Reason=xlatune: back",
    ]
    assert commands.scontrol_show_hostnames("node[01-04]") == ["scontrol", "show", "hostnames", "node[01-04]"]
    assert commands.sinfo_nodes("debug") == [
        "sinfo",
        "--Node",
        "--noheader",
        f"--format={parsers.SINFO_NODES_FORMAT}",
        "--partition=debug",
    ]
    with pytest.raises(ValueError, match="needs a reason"):
        commands.scontrol_update_node("node02", "DRAIN")
    with pytest.raises(ValueError, match="invalid node state"):
        commands.scontrol_update_node("node02", "REBOOT_NOW")
    with pytest.raises(ValueError, match="invalid Slurm node list"):
        commands.scontrol_show_hostnames("node[01-04] && reboot")


def test_sacct_builder_uses_the_parsed_fields() -> None:
    assert commands.sacct([5, 6]) == [
        "sacct",
        "--parsable2",
        "--noheader",
        "--jobs=5,6",
        f"--format={parsers.SACCT_FIELDS}",
    ]


def test_parse_marks_reads_each_jobs_comment_from_recorded_squeue() -> None:
    marks = parsers.parse_marks((DATA / "squeue_marks.txt").read_text())
    assert marks["xlatune-0123456789abcdef"] == ["71"]
    assert marks["someone else|with a pipe"] == ["73"]  # the comment is the rest of the line
    assert "(null)" not in marks and all("72" not in ids for ids in marks.values())


def test_parse_marks_of_sacct_without_job_comment_finds_nothing_and_skips_steps() -> None:
    assert parsers.parse_marks((DATA / "sacct_marks_without_job_comment.txt").read_text()) == {}
    assert parsers.parse_marks("71|xlatune-0123456789abcdef\n71.batch|\n71.0|\n") == {
        "xlatune-0123456789abcdef": ["71"]
    }


def test_parse_marks_quotes_a_line_it_does_not_understand() -> None:
    with pytest.raises(SlurmParseError, match=r"want '%i\|%k'.*squeue: error"):
        parsers.parse_marks("squeue: error: Invalid user\n")


def test_the_submission_mark_reaches_sbatch_as_its_comment_and_nothing_else_does() -> None:
    argv = commands.sbatch("job.sh", comment="xlatune-0123456789abcdef")
    assert "--comment=xlatune-0123456789abcdef" in argv
    for bad in ("xlatune-0123", "x; rm -rf /", "xlatune-0123456789ABCDEF", "--comment=x"):
        with pytest.raises(ValueError, match="submission mark"):
            commands.sbatch("job.sh", comment=bad)
    with pytest.raises(ValueError, match="start time"):
        commands.sacct_marks("yesterday; rm")
    assert commands.squeue_marks()[-1] == "--format=%i|%k"
