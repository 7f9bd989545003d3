"""Did a requested NCCL setting take effect? Recorded public NCCL debug text, applied and ignored."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_xlatune.evidence.nccl_applied import Applied, read_trace, took_effect

CASES = sorted((Path(__file__).parents[2] / "data" / "nccl").glob("*.txt"))


def _case(path: Path) -> tuple[dict[str, object], str]:
    header, _, body = path.read_text().partition("\n---\n")
    return yaml.safe_load(header), body


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_recorded_debug_text(path: Path) -> None:
    meta, body = _case(path)
    assert str(meta["source"]).startswith("https://github.com/")
    requested = {str(k): str(v) for k, v in dict(meta["requested"]).items()}  # type: ignore[call-overload]
    found = {f.name: f.applied.value for f in took_effect(requested, read_trace(body))}
    assert found == {str(k): str(v) for k, v in dict(meta["expect"]).items()}  # type: ignore[call-overload]


def test_the_corpus_has_each_verdict_for_algorithm_and_protocol() -> None:
    seen = set()
    for path in CASES:
        meta, _ = _case(path)
        seen |= {(k, v) for k, v in dict(meta["expect"]).items()}  # type: ignore[call-overload]
    for name in ("NCCL_ALGO", "NCCL_PROTO"):
        assert (name, "applied") in seen and (name, "not applied") in seen


def test_an_unknown_token_is_not_applied_even_when_echoed() -> None:
    text = "h:1:2 [0] NCCL INFO NCCL_PROTO set by environment to Simpel\n"
    (finding,) = took_effect({"NCCL_PROTO": "Simpel"}, read_trace(text))
    assert finding.applied is Applied.NOT_APPLIED
    assert "'Simpel'" in finding.reason


def test_negated_list_and_per_collective_spec() -> None:
    trace = read_trace("[0] NCCL INFO 1024 Bytes -> Algo 1 proto 2 time 3.0\n")
    assert took_effect({"NCCL_PROTO": "^LL,LL128"}, trace)[0].applied is Applied.APPLIED
    assert took_effect({"NCCL_PROTO": "^Simple"}, trace)[0].applied is Applied.NOT_APPLIED
    assert took_effect({"NCCL_ALGO": "allreduce:ring"}, trace)[0].applied is Applied.APPLIED


def test_no_library_lines_means_unknown_not_within_noise() -> None:
    findings = took_effect({"NCCL_ALGO": "Ring", "XLA_FLAGS": "--x"}, read_trace("completed step: 1\n"))
    assert [(f.name, f.applied) for f in findings] == [("NCCL_ALGO", Applied.UNKNOWN)]


def test_debug_on_but_no_trace_of_the_setting_is_not_applied() -> None:
    text = "h:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
    (finding,) = took_effect({"NCCL_NCHANNELS_PER_NET_PEER": "8"}, read_trace(text))
    assert finding.applied is Applied.NOT_APPLIED
    echoed = text + "h:1:2 [0] NCCL INFO NCCL_NCHANNELS_PER_NET_PEER set by environment to 8.\n"
    assert took_effect({"NCCL_NCHANNELS_PER_NET_PEER": "8"}, read_trace(echoed))[0].applied is Applied.APPLIED


def test_newer_two_row_tuning_table() -> None:
    text = "\n".join(
        [
            "[0] NCCL INFO   Algorithm   |                Tree                  |                Ring                  |",
            "[0] NCCL INFO   Protocol    |     LL |     LL128 |     Simple |     LL |     LL128 |     Simple |",
            "[0] NCCL INFO     AllReduce |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |"
            "     6.3/   0.0 |    14.0/   0.0 |    18.0/   9.0 |",
        ]
    )
    trace = read_trace(text)
    assert trace.enabled == frozenset({("Ring", "Simple")})
    assert took_effect({"NCCL_ALGO": "Tree"}, trace)[0].applied is Applied.NOT_APPLIED


# Two communicators' ring lines as a job with an intra-node and an inter-node replica group prints
# them: a 4-rank one-node communicator with 24 channels (pytorch/torchtitan#1570) set up first, then
# a 16-rank two-node one with 8 (NVIDIA/nccl#1412). Real lines of two public logs, placed in one.
TITAN = "[rank0]:costa-671b-5-worker-1:382:675 [0] NCCL INFO "
SWAT = "swat1-04:2017630:2017669 [0] NCCL INFO "
TWO_COMMUNICATORS = "".join(
    [
        f"{TITAN}comm 0x43be0680 rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0\n",
        f"{TITAN}Channel 00/24 : 0 1 2 3\n",
        f"{TITAN}Channel 01/24 : 0 1 2 3\n",
        f"{SWAT}Channel 00/08 :    0   5   4   7   6   3   2   1   8  13  12  15  14  11  10   9\n",
        f"{SWAT}Channel 01/08 :    0   5   4   7   6   3  10   9   8  13  12  15  14  11   2   1\n",
    ]
)


def test_a_channel_bound_holds_for_every_communicator_not_the_last_one_logged() -> None:
    trace = read_trace(TWO_COMMUNICATORS)
    assert trace.channel_counts == frozenset({24, 8}) and trace.coll_channels == 24
    (cap,) = took_effect({"NCCL_MAX_NCHANNELS": "16"}, trace)  # the 24-channel communicator exceeds it
    assert cap.applied is Applied.NOT_APPLIED and "24 channels" in cap.reason
    (floor,) = took_effect({"NCCL_MIN_NCHANNELS": "16"}, trace)  # the 8-channel one falls short
    assert floor.applied is Applied.NOT_APPLIED and "8 channels" in floor.reason
    assert took_effect({"NCCL_MAX_NCHANNELS": "24"}, trace)[0].applied is Applied.APPLIED


def test_a_connection_line_index_is_no_channel_count() -> None:
    # aws/aws-k8s-tester#454: `Channel 00/1 : 26[2] -> 28[4]` is channel 0's connection 1.
    text = (
        "[1,26]<stdout>:bert-mpi-training-worker-3:23:574 [2] NCCL INFO 2 coll channels, 0 collnet channels, "
        "0 nvls channels, 2 p2p channels, 1 p2p channels per peer\n"
        "[1,26]<stdout>:bert-mpi-training-worker-3:23:574 [2] NCCL INFO Channel 00/1 : 26[2] -> 28[4] "
        "via P2P/indirect/24[0]\n"
    )
    trace = read_trace(text)
    assert trace.channel_counts == frozenset({2})
    assert took_effect({"NCCL_MIN_NCHANNELS": "2"}, trace)[0].applied is Applied.APPLIED
