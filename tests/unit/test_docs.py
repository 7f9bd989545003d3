"""The docs site builds with warnings as errors (a broken internal link or anchor fails), and its
generated reference pages are what scripts/gen_reference.py writes from the code's tables today."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _gen_reference():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "scripts" / "gen_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mkdocs_builds_strict_without_a_broken_link(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.fail(
            "mkdocs is not installed: the docs extra (pip install -e '.[docs]', scripts/venv.sh) "
            "provides it, and CI builds the docs as a test"
        )
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "tutorial" / "index.html").is_file()


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """Not vacuous: the same build on a copy with one link pointing nowhere fails, naming it."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.fail("mkdocs is not installed (the docs extra)")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "tutorial.md"
    page.write_text(page.read_text() + "\nSee [nowhere](how-to/no-such-page.md).\n")
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0
    assert "no-such-page.md" in done.stdout + done.stderr


def test_generated_reference_pages_are_up_to_date() -> None:
    gen = _gen_reference()
    stale = [
        str(path.relative_to(REPO))
        for path, text in gen.generated().items()
        if path.read_text(encoding="utf-8") != text
    ]
    assert not stale, f"run python scripts/gen_reference.py: {stale} differ from the code's tables"


def test_generated_tables_hold_every_row_of_the_code() -> None:
    from pytest_xlatune.cell.schema import KEYS
    from pytest_xlatune.options import OPTIONS
    from pytest_xlatune.results import FailureClass, Verdict

    docs = REPO / "docs" / "reference"
    cell, options = (docs / "cell.md").read_text(), (docs / "options.md").read_text()
    outcomes, failures = (docs / "outcomes.md").read_text(), (docs / "failures.md").read_text()
    assert all(f"| `{key.name}` |" in cell for key in KEYS)
    assert all(f"`{option.ini}`" in options for option in OPTIONS)
    assert all(f"| `{verdict.value}` |" in outcomes for verdict in Verdict)
    assert all(re.search(rf"^\| {failure.value} \|", failures, re.M) for failure in FailureClass)


def test_the_readme_is_a_front_door() -> None:
    """At most 200 lines, and every docs link it holds names a page that exists."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(((?:docs/|CHANGELOG)[^)#]*)", text)
    assert links
    assert [link for link in links if not (REPO / link).exists()] == []


def test_the_ci_gates_slower_image_stand_in_works_as_written_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """docs/how-to/ci-gate.md's wrapper: its lines before the gate command, run as written in a
    checkout, make an executable that runs this Python with XLA held at -O0 after every flag the
    job set (XLA is last-wins), outside the checkout (a `slow-python` was left in the repository
    root); the gate command names it with a path (a bare name is looked up in PATH)."""
    import os
    import subprocess
    import sys

    text = (REPO / "docs" / "how-to" / "ci-gate.md").read_text(encoding="utf-8")
    section = text.split("## Try it on this machine", 1)[1]
    block = next(b for b in section.split("```bash\n")[1:] if "slow-python" in b).split("```", 1)[0]
    lines = block.splitlines()
    gate = next(line for line in lines if line.startswith("pytest ") and "--xlatune-image=" in line)
    image = re.search(r"--xlatune-image=(\S+)", gate)
    assert image is not None
    setup = "\n".join(line for line in lines if not line.startswith("pytest "))
    checkout, temp = tmp_path / "checkout", tmp_path / "tmp"
    checkout.mkdir()
    temp.mkdir()
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "TMPDIR": str(temp)}
    made = subprocess.run(
        ["bash", "-euc", f"{setup}\nprintf %s {image.group(1)}"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert list(checkout.iterdir()) == []  # nothing left in the checkout
    assert Path(made).is_absolute() and Path(made).name == "slow-python"
    env["XLA_FLAGS"] = "--xla_backend_optimization_level=2"
    done = subprocess.run(
        [made, "-c", "import os, sys; print(sys.prefix, os.environ['XLA_FLAGS'])"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    prefix, flags = done.stdout.split(" ", 1)
    assert prefix == sys.prefix  # the same venv (its JAX): only the XLA flags differ
    assert flags.split() == ["--xla_backend_optimization_level=2", "--xla_backend_optimization_level=0"]
    # The clean-up the how-to gives removes the directory its lines made (a second one here), no more.
    cleanup = re.search(r"`(rm -r [^`]*slow[^`]*)`", section)
    assert cleanup is not None
    subprocess.run(["bash", "-euc", f"{setup}\n{cleanup.group(1)}"], cwd=checkout, env=env, check=True)
    assert list(temp.iterdir()) == [Path(made).parent] and list(checkout.iterdir()) == []
