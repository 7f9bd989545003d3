"""Pre-flight failures: one line naming the option that fixes them, printed once per cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_xlatune.launch.preflight import failure_line
from pytest_xlatune.transport.base import TransportError
from tests.conftest import FAKE

CELL = """\
model_tag: pf
nodes: 1
parallelism: FSDP=8
baseline_repeats: 1
waves:
  2:
    - {name: a, xla_flags: [--xla_a=1]}
backend: {kind: sbatch}
"""


def test_an_unreachable_ssh_host_is_one_line_once_per_cell_and_no_false_in_use(pytester: pytest.Pytester) -> None:
    cell = pytester.makefile(".yml", pf=CELL)
    # Port 1 on loopback refuses at once: the transport's connect fails inside pre-flight.
    result = pytester.runpytest(str(cell), "--xlatune-ssh-host=127.0.0.1:1", *FAKE)
    result.assert_outcomes(failed=4)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*pf.yml: --xlatune-ssh-host: pre-flight failed: cannot connect to 127.0.0.1:1 *; check "
            "--xlatune-ssh-host 127.0.0.1:1 (the host, its key in known_hosts, your SSH key), or pass "
            "--xlatune-host-cmd CHECKOUT from inside the maxtext-slurm container"
        ]
    )
    # The failure sections, not pytest's short summary (whole lines under CI=true, cut elsewhere).
    body = "\n".join(line for line in out.splitlines() if not line.startswith("FAILED "))
    assert body.count("pre-flight failed: cannot connect") == 1  # the first item; the others point there
    assert body.count("pf.yml: not run: pre-flight failed (see pf.yml::wave1::baseline[default] above)") == 3
    assert "Traceback" not in out and "in use by" not in out and "--dist loadgroup" not in out


@pytest.mark.parametrize(
    ("ssh", "host_cmd", "slurm", "option", "hint"),
    [
        ("", "", True, "backend", "no Slurm client here: reach the cluster with --xlatune-ssh-host HOST"),
        ("login", "", True, "--xlatune-ssh-host", "check --xlatune-ssh-host login"),
        ("", "/maxtext-slurm", True, "--xlatune-host-cmd", "check --xlatune-host-cmd /maxtext-slurm"),
        ("", "", False, "backend", ""),
    ],
)
def test_failure_line_names_the_option_that_fixes_it(
    ssh: str, host_cmd: str, slurm: bool, option: str, hint: str
) -> None:
    line = failure_line(Path("c.yml"), TransportError("auth failed\n  for x"), ssh, host_cmd, slurm)
    assert line.startswith(f"c.yml: {option}: pre-flight failed: auth failed for x")
    assert hint in line and "\n" not in line
    assert ("; " in line) is bool(hint)
    other = failure_line(Path("c.yml"), FileNotFoundError(2, "No such file or directory"), "", "", False)
    assert other == "c.yml: backend: pre-flight failed: FileNotFoundError: [Errno 2] No such file or directory"
