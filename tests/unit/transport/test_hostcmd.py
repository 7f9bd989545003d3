"""host-cmd results → transport errors, and the container ↔ host path map (pure, recorded text)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_xlatune.transport.base import TransportError, TransportRefused, TransportTimeout
from pytest_xlatune.transport.hostcmd import START_HINT, PathMap, result_error

DATA = Path(__file__).resolve().parents[2] / "data" / "host_cmd"


def recorded(name: str) -> dict[str, object]:
    return json.loads((DATA / f"{name}.json").read_text())


@pytest.mark.parametrize("name", ["squeue_invalid_job", "ls_missing"])
def test_a_command_that_ran_is_no_bridge_error_whatever_its_exit_code(name: str) -> None:
    data = recorded(name)
    assert data["exit_code"] not in (0, None)
    assert result_error(data, str(data["command"]), "vm") is None


def test_a_policy_refusal_is_a_refusal_in_the_servers_words() -> None:
    error = result_error(recorded("refused"), "echo sudo", "vm")
    assert type(error) is TransportRefused
    assert str(error) == (
        "host-cmd policy on the host refused `echo sudo`: POLICY VIOLATION: Denied by "
        "pattern: '\\\\bsudo\\\\b' (see .host-cmd/host-cmd-ctl.sh policy)"
    )
    assert "\n" not in str(error) and "slurm" not in str(error).lower()


def test_a_server_timeout_is_a_transport_timeout_quoting_the_server() -> None:
    error = result_error(recorded("timed_out"), "sleep 5", "vm")
    assert type(error) is TransportTimeout
    assert str(error) == "host-cmd: `sleep 5` on the host: Command timed out after 1s"


def test_a_stale_request_and_a_dead_server_are_transport_errors() -> None:
    stale = result_error(recorded("stale"), "sinfo", "vm")
    assert type(stale) is TransportError
    assert str(stale) == "host-cmd could not run `sinfo` on the host: Command discarded: submitted 120s ago (limit 60s)"
    # What upstream's client poll() returns when its re-ping finds no server (host_cmd.py).
    died = {"id": "x", "exit_code": -4, "stdout": "", "stderr": "Server died — command was never picked up"}
    error = result_error(died, "squeue", "node07")
    assert type(error) is TransportError and START_HINT in str(error) and "'node07'" in str(error)


def test_the_clients_own_give_up_is_a_timeout_and_long_commands_are_shortened() -> None:
    error = result_error({"id": "x", "error": "timed out waiting for the result after 40 s"}, "x" * 300, "vm")
    assert type(error) is TransportTimeout
    assert "x" * 117 + "..." in str(error) and "x" * 118 not in str(error)


def test_path_map_turns_container_paths_into_host_paths_and_back() -> None:
    paths = PathMap("/maxtext-slurm", "/home/u/ms")
    assert paths.to_host("/maxtext-slurm") == "/home/u/ms"
    assert paths.to_host("/maxtext-slurm/outputs/x.log") == "/home/u/ms/outputs/x.log"
    assert paths.to_host("--output=/maxtext-slurm/outputs/%j.log") == "--output=/home/u/ms/outputs/%j.log"
    assert paths.to_host("--chdir=/maxtext-slurm") == "--chdir=/home/u/ms"
    # Not the checkout: another directory sharing the prefix, a relative path, an argument naming it.
    for untouched in ("/maxtext-slurm-old/x", "maxtext-slurm/x", "outputs/maxtext-slurm", "/data/maxtext-slurm"):
        assert paths.to_host(untouched) == untouched
    out = "[ARTIFACT] /home/u/ms/outputs/12-JAX-demo/artifact -> /home/u/ms/outputs/.artifacts/a\nJOB_NAME=x\n"
    assert paths.to_local(out) == (
        "[ARTIFACT] /maxtext-slurm/outputs/12-JAX-demo/artifact -> /maxtext-slurm/outputs/.artifacts/a\nJOB_NAME=x\n"
    )
    assert PathMap("/a", "/a").to_host("/a/b") == "/a/b"
