"""Paths and option values are checked when pytest configures: one usage line, exit code 4,
nothing run (no store, no job), instead of an OSError after the whole sweep."""

from __future__ import annotations

import os

import pytest

from pytest_xlatune.settings import check_image
from tests.conftest import FAKE

CELL = "model_tag: fake\nnodes: 1\nparallelism: FSDP=8\nconfig_tags:\n  sparse: {}\n"
LONG = "x" * 300

CASES = [
    # (id, option, the one line pytest prints after "ERROR: ")
    (
        "report-dir-under-a-file",
        "--xlatune-report-dir=afile/reports",
        "--xlatune-report-dir: expected a writable directory, found '*afile/reports' (*afile is not a directory)",
    ),
    (
        "export-dir-under-a-file",
        "--xlatune-export=afile/out",
        "--xlatune-export: expected a writable directory, found '*afile/out' (*afile is not a directory)",
    ),
    (
        "export-dir-segment-too-long",
        f"--xlatune-export={LONG}",
        "--xlatune-export: expected path segments of at most 255 bytes, found one of 300 bytes ('xxx*",
    ),
    (
        "report-dir-segment-too-long",
        f"--xlatune-report-dir=out/{LONG}",
        "--xlatune-report-dir: expected path segments of at most 255 bytes, found one of 300 bytes*",
    ),
    (
        "policy-path-too-long",
        f"--xlatune-policy=policies/{LONG}.yml",
        "--xlatune-policy: expected path segments of at most 255 bytes, found one of 304 bytes*",
    ),
    (
        "notify-value-too-long",
        "--xlatune-notify=" + "echo " * 1000,
        "--xlatune-notify: expected at most 4096 bytes, found 5000 bytes*",
    ),
    (
        "notify-unbalanced-quote",  # shlex.split at the first STOP would raise ValueError there
        "--xlatune-notify=utils/telegram_bot.sh send 'x",
        '--xlatune-notify: expected a command as shell words, found "utils/telegram_bot.sh send \'x" '
        "(No closing quotation)",
    ),
    (
        "ssh-host-an-option",  # never an ssh option, a space or a port past 65535
        "--xlatune-ssh-host=-oProxyCommand=x",
        "--xlatune-ssh-host: expected [[]user@[]]host[[]:port[]] (an ssh_config alias or a host name, "
        "port 1-65535), found '-oProxyCommand=x'",
    ),
    (
        "ssh-host-port-too-big",
        "--xlatune-ssh-host=u@h:99999",
        "--xlatune-ssh-host: expected * found 'u@h:99999'",
    ),
    (
        "image-with-shell-characters",  # the local and sbatch backends took it as the interpreter
        "--xlatune-image=a b;c",
        "--xlatune-image: expected a container image (maxtext-slurm) or a Python interpreter path "
        "(local, sbatch) such as * found 'a b;c'",
    ),
    (
        "image-markup",
        "--xlatune-image=<script>",
        "--xlatune-image: expected * found '<script>'",
    ),
    (
        "store-a-dangling-link",  # mkdir through it failed later with a bare "File exists"
        "--xlatune-store=dangling",
        "--xlatune-store: expected a writable directory, found '*dangling' "
        "(*dangling is a symbolic link to '*gone', which does not exist)",
    ),
    (
        "export-dir-a-dangling-link",
        "--xlatune-export=dangling/out",
        "--xlatune-export: expected a writable directory, found '*dangling/out' "
        "(*dangling is a symbolic link to '*gone', which does not exist)",
    ),
    (
        "policy-a-fifo",  # "no such file"
        "--xlatune-policy=pfifo.yml",
        "--xlatune-policy: expected a policy file or YAML text, found 'pfifo.yml' (a FIFO (named pipe))",
    ),
    (
        "policy-file-too-big",  # parsed for a minute per 60 MB
        "--xlatune-policy=big.yml",
        "--xlatune-policy: expected a policy file of at most 256 KiB, found 307,202 bytes (*big.yml)",
    ),
    (
        "ssh-config-is-a-directory",
        "--xlatune-ssh-config=adir/",
        "--xlatune-ssh-config: expected a file, found 'adir/' (a directory)",
    ),
]


@pytest.mark.parametrize(("option", "line"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_path_or_value_is_one_usage_line_and_nothing_runs(
    pytester: pytest.Pytester, option: str, line: str
) -> None:
    cell = pytester.makefile(".yml", cell=CELL)
    pytester.makefile("", afile="not a directory")
    pytester.mkdir("adir")
    (pytester.path / "dangling").symlink_to(pytester.path / "gone")
    os.mkfifo(pytester.path / "pfifo.yml")
    (pytester.path / "big.yml").write_text("# " + "x" * 300 * 1024)
    result = pytester.runpytest(str(cell), option, *FAKE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {line}"])
    assert len([text for text in result.stderr.lines if text.strip()]) == 1, result.stderr.lines
    assert not (pytester.path / ".xlatune").exists()  # nothing ran
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_cell_file_name_with_an_escape_code_is_refused(pytester: pytest.Pytester) -> None:
    """pytest prints node ids unfiltered: a title-setting file name must not reach the terminal."""
    name = "\x1b]0;owned\x07.yml"
    (pytester.path / name).write_text(CELL)
    result = pytester.runpytest(name, *FAKE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: '\\x1b]0;owned\\x07.yml': expected a cell file name without control characters"]
    )
    assert "\x1b" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(
    "image",
    [
        "rocm/jax:latest",
        "docker://rocm/jax-training:maxtext-v26.3",
        "registry.example.com:5000/team/jax@sha256:0123abcd",
        "/images/maxtext-v26.3.tar",
        "/mnt/vast/images/maxtext.sqsh",
        "./slow-python",
        "slow-python",
        "venv/bin/python",
        "/venvs/new/bin/python3.12",
    ],
)
def test_an_image_or_interpreter_path_the_docs_use_is_accepted(image: str) -> None:
    check_image(image)  # the option's grammar is the cell's `image` grammar, for every backend
