"""The README's and the tutorial's commands, run in order from a fresh clone, print what the docs
show; and scripts/demo.sh (the README's first command) exits 0 when the designed failure is the
only one.

Each page's ```console blocks are its commands: a `$ ` line is a command, the lines below it are
patterns that must appear as whole lines of its output, in that order, other lines between them
allowed (as pytest's LineMatcher.fnmatch_lines, but `*` is the only wildcard: the item
ids' `[default]` is text, not an fnmatch character class). A ```yaml block whose first line is
`# <path>` is the file the page asks you to write, written there at that point. Each page starts
from its own clone of this repository (`git clone`, plus the working tree's uncommitted changes) and runs in one bash
session, so `cd` and `source` carry on as in a terminal; the existing venv is reused through
XLATUNE_VENV instead of installing a new one. Kept cheap: `./scripts/demo.sh` runs with
`-k stale_flag` appended (the same script and cell, one real JAX job instead of the whole sweep,
so the lines the docs show — the designed failure, the report, the closing line — are the ones it
prints); every other command runs as written.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.fixtures_infra import REPO

pytestmark = [pytest.mark.jax]

CLONE_URL = "<URL of this repository>"
DEMO_SELECTION = " -k stale_flag"


def unmatched(patterns: list[str], lines: list[str]) -> str | None:
    """The first pattern not found, in order, among the lines (None: all found)."""
    position = 0
    for pattern in patterns:
        regex = re.compile(".*".join(map(re.escape, pattern.split("*"))))
        found = next((i for i in range(position, len(lines)) if regex.fullmatch(lines[i])), None)
        if found is None:
            return pattern
        position = found + 1
    return None


def steps(page: Path) -> list[tuple[str, str, list[str]]]:
    """("run", command, patterns) and ("write", path, lines) of a page, in page order."""
    out: list[tuple[str, str, list[str]]] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^\s*```(\w*)", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
        body = lines[i + 1 : end]
        if fence.group(1) == "console":
            for line in body:
                if line.startswith("$ "):
                    out.append(("run", line[2:], []))
                else:
                    assert out and out[-1][0] == "run", f"{page}: a console block starts with `$ `"
                    out[-1][2].append(line)
        elif fence.group(1) == "yaml" and body and re.match(r"^# [\w./-]+$", body[0]):
            out.append(("write", body[0][2:], body))
        i = end + 1
    return out


def fresh_clone(dest: Path) -> None:
    """A clone of this repository as a user gets it, with the working tree's changes on top."""
    subprocess.run(["git", "clone", "-q", str(REPO), str(dest)], check=True, timeout=300)
    changed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-m", "-o", "--exclude-standard", "-z"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split("\0")
    for name in filter(None, changed):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    # scripts/venv.sh reinstalls the package when pyproject.toml is newer than the venv's stamp:
    # in the clone that would point this session's venv at a temporary directory. The clone's
    # pyproject is dated 1970 and the venv marked installed (it is: this test imports from it).
    os.utime(dest / "pyproject.toml", (0, 0))
    stamp = Path(sys.prefix) / ".xlatune-installed"
    if not stamp.exists():
        stamp.touch()


def run_page(page: Path, home: Path) -> list[tuple[str, int, list[str], list[str]]]:
    """Run a page's steps in one bash session in `home`: (command, exit code, output, patterns)."""
    script = ["cd " + str(home)]
    runs = []
    for kind, what, body in steps(page):
        if kind == "write":
            script.append(f"cat > {what} <<'XLATUNE_DOC_EOF'\n" + "\n".join(body) + "\nXLATUNE_DOC_EOF")
            continue
        command = what
        if command.startswith("git clone ") and CLONE_URL in command:
            target = command.split()[-1]
            fresh_clone(home / target)
            command = f"test -d {target}"
        elif command.startswith("./scripts/demo.sh"):
            command += DEMO_SELECTION
        index = len(runs)
        runs.append((what, body))
        script.append(f"echo '@@xlatune-doc-step {index}'\n{command} 2>&1\necho \"@@xlatune-doc-rc {index} $?\"")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CI", "BUILD_NUMBER"))}
    env.update(XLATUNE_VENV=sys.prefix, COLUMNS="80")
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)], capture_output=True, text=True, env=env, timeout=1800, check=False
    )
    output = done.stdout + done.stderr
    results = []
    for index, (command, patterns) in enumerate(runs):
        found = re.search(rf"^@@xlatune-doc-step {index}\n(.*?)^@@xlatune-doc-rc {index} (\d+)$", output, re.M | re.S)
        assert found, f"{page.name}: `{command}` did not run\n{output[-3000:]}"
        results.append((command, int(found.group(2)), found.group(1).splitlines(), patterns))
    return results


@pytest.mark.parametrize("page", ["README.md", "docs/tutorial.md"])
def test_the_pages_commands_print_what_the_page_shows(page: str, tmp_path: Path) -> None:
    results = run_page(REPO / page, tmp_path)
    commands = [command for command, *_ in results]
    assert any(c.startswith("./scripts/demo.sh") for c in commands), commands
    for command, code, output, patterns in results:
        assert code == 0, f"{page}: `{command}` exited {code}\n" + "\n".join(output[-60:])
        missing = unmatched(patterns, output)
        assert missing is None, (
            f"{page}: `{command}` printed no line matching\n  {missing}\n--- it printed\n" + "\n".join(output[-80:])
        )
    clone = tmp_path / "pytest-xlatune"
    assert (clone / "report.html").exists() and (clone / "demo-tuning.md").exists()
    if page == "docs/tutorial.md":
        assert (clone / "mine-tuning.md").exists()


def test_an_edited_pattern_no_longer_matches(tmp_path: Path) -> None:
    """Not vacuous: the tutorial's patterns fail against output with an edited id or count."""
    patterns = next(
        p
        for kind, command, p in steps(REPO / "docs/tutorial.md")
        if kind == "run" and command == "pytest cells/mine.yml -v"
    )
    printed = [p.replace("*", "1") for p in patterns]
    assert unmatched(patterns, printed) is None
    assert unmatched(patterns, printed[1:]) == patterns[0]  # a line left out
    assert unmatched(patterns, printed[::-1]) is not None  # out of order
    for old, new in (
        ("opt_o1", "opt_o2"),
        ("5 passed", "4 passed"),
        ("mine-tuning", "demo-tuning"),
        ("[default]", "[dense]"),
    ):
        assert old in "".join(patterns), old
        assert unmatched(patterns, [line.replace(old, new) for line in printed]) is not None, old


def demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XLATUNE_VENV": sys.prefix, "XLATUNE_DEMO_JUNIT": str(tmp_path / "junit.xml")}
    return subprocess.run(
        [
            str(REPO / "scripts" / "demo.sh"),
            f"--xlatune-store={tmp_path / 'store'}",
            f"--xlatune-report-dir={tmp_path}",
            f"--html={tmp_path / 'report.html'}",
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


def test_any_other_failure_ends_the_demo_with_pytests_code(tmp_path: Path) -> None:
    proc = demo(tmp_path, "-k", "wave1 and baseline and not r2", "--xlatune-python=/bin/false")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "wave1::baseline[default] FAILED" in proc.stdout
    assert "demo: done" not in proc.stdout
