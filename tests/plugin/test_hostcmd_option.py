"""--xlatune-host-cmd[=CHECKOUT] and its ini twin choose the host-cmd transport."""

from __future__ import annotations

import pytest

from pytest_xlatune.launch.registry import open_transport, remote_dir
from pytest_xlatune.settings import Settings
from pytest_xlatune.transport.hostcmd import HostCmdTransport


def test_a_bare_flag_means_the_containers_checkout(pytester: pytest.Pytester) -> None:
    settings = Settings.from_config(pytester.parseconfig("--xlatune-host-cmd"))
    assert settings.host_cmd == "/maxtext-slurm"
    transport = open_transport(settings)
    assert isinstance(transport, HostCmdTransport) and transport.checkout == "/maxtext-slurm"
    # sbatch scripts and logs go where the host can see them: under the checkout's outputs/.
    assert (
        remote_dir(transport, settings, settings.store_dir, "xlatune-jobs/c") == "/maxtext-slurm/outputs/xlatune-jobs/c"
    )


def test_a_relative_checkout_is_under_the_rootdir_and_the_ini_key_works(pytester: pytest.Pytester) -> None:
    assert Settings.from_config(pytester.parseconfig("--xlatune-host-cmd=ms")).host_cmd == str(pytester.path / "ms")
    pytester.makeini("[pytest]\nxlatune_host_cmd = /srv/maxtext-slurm\n")
    assert Settings.from_config(pytester.parseconfig()).host_cmd == "/srv/maxtext-slurm"
    assert Settings.from_config(pytester.parseconfig("--xlatune-host-cmd=/x")).host_cmd == "/x"  # CLI wins
    assert Settings.from_config(pytester.parseconfig()).host_cmd != ""


def test_without_the_option_slurm_runs_here(pytester: pytest.Pytester) -> None:
    settings = Settings.from_config(pytester.parseconfig())
    assert settings.host_cmd == "" and not isinstance(open_transport(settings), HostCmdTransport)


def test_host_cmd_and_ssh_together_are_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--xlatune-host-cmd=/ms", "--xlatune-ssh-host=login")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--xlatune-host-cmd and --xlatune-ssh-host: expected one way to reach Slurm, found both*"]
    )


def test_a_checkout_without_the_bridge_fails_the_cell_with_one_line(pytester: pytest.Pytester) -> None:
    cell = pytester.makefile(".yml", c="model_tag: c\nnodelist: node01\nparallelism: FSDP=1\nbackend: {kind: sbatch}\n")
    result = pytester.runpytest(str(cell), "-p", "no:cacheprovider", f"--xlatune-host-cmd={pytester.path / 'nope'}")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            f"*c.yml: --xlatune-host-cmd: host-cmd: expected the bridge client "
            f"{pytester.path / 'nope'}/.host-cmd/host_cmd.py in a maxtext-slurm checkout, found none"
        ]
    )
