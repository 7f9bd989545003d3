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
