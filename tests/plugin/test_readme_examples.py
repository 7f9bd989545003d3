"""The docs' examples are executed and compared with what the tool prints (as pytest's regendoc
does), so the docs cannot drift from the tool. The examples sit in README.md and the docs/ pages
of DOC_PAGES; each check below names the page it reads.

- every ```console block of FAKE_PAGES: each `$ pytest …` / `$ python -m …` line runs, in the
  pages' order, in one directory holding a copy of `cells/`; its output must match the lines below it. A line `...`
  stands for any lines, `...` inside a line for any text; decimal numbers (TGS, Δ %, intervals,
  durations) match any decimal number, everything else (ids, counts, job ids, words) exactly.
  The scripted fake trainer stands in for JAX: the demo cell's copy tells it how fast each
  profile is (the speeds of the README's sweep excerpt), so the verdicts are those of the excerpt.
- the sweep excerpt: ids in run order, Δ % and verdict words consistent with its own TGS figures,
  each line's outcome and verdict as the plugin prints them for that item;
- the options table against `pytest --help` (flag, metavar, ini twin, default), both ways;
- the bad-cell error line, the example cell (it collects), the workload's step line, the layout.

The README's and the tutorial's own console blocks run for real, from a fresh clone, in
tests/integration/test_demo_script.py. The messages the docs quote inline (option errors,
incidents, STOP lines, the gate's line, the submit.sh command line …) are checked by
tests/plugin/test_readme_messages.py.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from _pytest.config import _get_prog_name
from _pytest.config import _main as console_main

from pytest_xlatune.triage.lines import parse_step_line

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
# The pages whose quoted messages test_readme_messages.py compares with the tool (each anchor in
# exactly one of them); the pages other helpers own are left out.
DOC_PAGES = (
    README,
    *(
        DOCS / p
        for p in (
            "index.md",
            "tutorial.md",
            "architecture.md",
            "performance.md",
            "how-to/select-items.md",
            "how-to/sbatch.md",
            "how-to/maxtext-slurm.md",
            "how-to/ssh.md",
            "how-to/host-cmd.md",
            "how-to/reports.md",
            "how-to/backend-plugin.md",
            "reference/cell.md",
            "reference/options.md",
            "reference/outcomes.md",
            "reference/failures.md",
            "reference/workload.md",
            "explanation/verdicts.md",
            "explanation/adaptive.md",
            "explanation/gate.md",
        )
    ),
)
# The pages whose console blocks run here with the fake trainer, in this order, in one directory.
FAKE_PAGES = (DOCS / "how-to/select-items.md", DOCS / "explanation/gate.md", DOCS / "how-to/reports.md")
CELL_PAGE = DOCS / "reference/cell.md"
# tests.conftest.FAKE with the cache provider: the fake trainer played in memory (tests/fake_launcher.py).
FAKE = ["--xlatune-workload=fake_trainer", "--xlatune-poll-interval=0.05", "-p", "tests.fake_launcher"]
NUMBER = re.compile(r"[-+]?\d+\.\d+")

# What the fake trainer measures for the demo cell's runs: the README excerpt's figures (the
# deployed env file's -O0 at 669.55 TGS, the raw image at opt_o2's speed: the same effective settings,
# so opt_o2 shares restore_default's job); stale_flag fails by itself.
DEMO_SPEEDS = {
    "opt_o1": 1256.2,
    "opt_o2": 1180.0,
    "no_expensive": 662.0,
    "vec256": 681.0,
    "no_eigen_mt": 640.0,
    "no_ar_combine": 655.0,
    "seq_sched": 623.7,
    "split4": 668.0,
    "o2_no_fastmath": 1150.0,
    "o1_bf16": 900.0,
    "o2_vec256": 1180.0,
}  # restore_default's program (inert): its speed
# Profiles whose loss leaves the baseline's (bfloat16 compute): the fake trainer's loss drifts.
DEMO_LOSS_DRIFT = {"o1_bf16": -0.002}


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # 1-based line of the opening fence
    lines: tuple[str, ...]


def blocks(text: str) -> list[Block]:
    out, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            out.append(Block(lines[i][3:].strip(), i + 1, tuple(lines[i + 1 : end])))
            i = end
        i += 1
    return out


def section(text: str, title: str) -> str:
    """The `## title` section of a page's text."""
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of a console block."""
    out: list[tuple[str, list[str]]] = []
    for line in block.lines:
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            assert out, f"README.md:{block.line}: a console block starts with a `$ ` command"
            out[-1][1].append(line)
    return out


def _norm(line: str) -> str:
    line = re.sub(r"(in \d+\.\d+s) \(\d+:\d\d:\d\d\)$", r"\1", line.rstrip())  # pytest's long-run form
    return NUMBER.sub("N", line)


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether the output matches the README's lines (`...` wildcards, any decimal numbers)."""
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == "..." else ".*?".join(map(re.escape, _norm(line).split("..."))) + r"\n"
        for line in expected
    )
    return re.fullmatch(pattern, "".join(_norm(line) + "\n" for line in actual)) is not None


def speed_scripted(cell_text: str) -> str:
    """The demo cell with fake-trainer speeds: the env file runs at the excerpt's baseline and
    restores the raw image's speed, which is opt_o2's (the same effective settings, so opt_o2
    shares restore_default's job); each profile at DEMO_SPEEDS (last flag wins)."""
    cell = yaml.safe_load(cell_text)
    cell["env_file"].append({"flag": "--xla_fake_tgs=669.55", "image_default": f"{DEMO_SPEEDS['opt_o2']}"})
    for wave in cell["waves"].values():
        for profile in wave if isinstance(wave, list) else wave.get("profiles", []):
            if profile["name"] in DEMO_SPEEDS:
                profile["xla_flags"].append(f"--xla_fake_tgs={DEMO_SPEEDS[profile['name']]}")
            if profile["name"] in DEMO_LOSS_DRIFT:
                profile["xla_flags"].append(f"--xla_fake_loss_drift={DEMO_LOSS_DRIFT[profile['name']]}")
    return yaml.safe_dump(cell, sort_keys=False)


def workdir(root: Path, repo: Path = REPO) -> Path:
    # The cells as committed: a sweep in the checkout (./scripts/demo.sh) leaves its lock there,
    # and the examples start from none ("new lock", "not written").
    shutil.copytree(repo / "cells", root / "cells", ignore=shutil.ignore_patterns("*.lock.json"))
    demo = root / "cells" / "demo_fsdp8.yml"
    demo.write_text(speed_scripted(demo.read_text()))
    (root / "pytest.ini").write_text("[pytest]\n")
    return root


# `pytest` as a user types it, this Python's script (its usage errors say `pytest: error: …`).
SCRIPT = Path(sys.executable).with_name("pytest")
PYTEST = [str(SCRIPT)] if SCRIPT.is_file() else [sys.executable, "-m", "pytest"]


def run_process(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    if argv[0] == "pytest":
        argv = [*PYTEST, *argv[1:], *FAKE]
    elif argv[:2] == ["python", "-m"]:
        argv = [sys.executable, *argv[1:]]
    else:
        raise AssertionError(f"README console example runs neither pytest nor python -m: {command}")
    # pytest does not shorten the summary lines when CI or BUILD_NUMBER is set: run as a user would.
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")},
        "COLUMNS": "80",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests"), str(REPO), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(argv, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def run_inprocess(argv: list[str], cwd: Path) -> tuple[int, list[str]]:
    """`pytest …` in this process with what run_process gives a fresh one (the arguments, the
    directory, the environment, an 80-column terminal, `pytest` as the program's name): its exit
    code, and its stdout, then its stderr, as lines. A fresh interpreter costs ~4 s of CPU."""
    assert not (cwd / "conftest.py").exists(), "a conftest may patch the process: run_process"
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        for key in ("CI", "BUILD_NUMBER"):
            patch.delenv(key, raising=False)
        patch.setenv("COLUMNS", "80")
        patch.setenv(
            "PYTHONPATH", os.pathsep.join(filter(None, [str(REPO / "tests"), str(REPO), os.environ.get("PYTHONPATH")]))
        )
        patch.setattr(sys, "argv", [str(SCRIPT), *argv])
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            # what the `pytest` script runs (_console_main): pytest.main would name itself
            # `pytest.main()` in usage errors
            # (a fresh interpreter imports the plugins after pytest's assertion rewriter is in
            # place; here they are imported already, and pytest would warn that it cannot)
            code = console_main(
                args=[*argv, *FAKE, "-W", "ignore::pytest.PytestAssertRewriteWarning"],
                prog=_get_prog_name(sys.argv) if SCRIPT.is_file() else "python -m pytest",
            )
    return int(code), (out.getvalue() + err.getvalue()).splitlines()


def run(command: str, cwd: Path, *, process: bool = False) -> list[str]:
    """What a console command prints: a pytest session in this process, unless `process` (a
    session whose behaviour depends on being a process of its own) or not pytest."""
    argv = shlex.split(command)
    if argv[0] == "pytest" and not process:
        return run_inprocess(argv[1:], cwd)[1]
    done = run_process(command, cwd)
    return (done.stdout + done.stderr).splitlines()


def console_blocks() -> list[Block]:
    return [b for page in FAKE_PAGES for b in blocks(page.read_text()) if b.lang == "console"]


# The tests of this module and of test_readme_messages.py share their pytest sessions through
# module-scoped fixtures: scripts/test.sh --fast runs each test file on one xdist worker
# (`--dist loadfile`), so that each runs once.


@dataclass(frozen=True)
class ConsoleRun:
    block: Block
    command: str
    expected: list[str]
    actual: list[str]


@pytest.fixture(scope="module")
def console_runs(tmp_path_factory: pytest.TempPathFactory) -> list[ConsoleRun]:
    """Every console example of FAKE_PAGES run once, in order, in one directory (run() puts
    tests/ on the sessions' PYTHONPATH, as fake_trainer_env does)."""
    root = workdir(tmp_path_factory.mktemp("console"))
    return [
        ConsoleRun(block, command, expected, run(command, root))
        for block in console_blocks()
        for command, expected in commands(block)
    ]


def test_console_examples_print_what_the_readme_shows(console_runs: list[ConsoleRun]) -> None:
    assert len(console_runs) >= 8, "the docs lost their console examples"
    problems = [
        f"docs:{r.block.line}: $ {r.command}\n--- docs\n"
        + "\n".join(r.expected)
        + "\n--- the tool printed\n"
        + "\n".join(r.actual)
        for r in console_runs
        if not matches(r.expected, r.actual)
    ]
    assert not problems, "\n\n".join(problems)


def test_an_edited_example_fails(console_runs: list[ConsoleRun]) -> None:
    """The comparison is not vacuous: an id, a count or a word edited in an example fails."""
    first = console_runs[0]
    assert first.block == console_blocks()[0] and first.command == commands(first.block)[0][0]
    expected, actual = first.expected, first.actual
    assert matches(expected, actual)
    text = "\n".join(expected)
    for old, new in (("vec256", "vec512"), ("17 tests", "18 tests"), ("collected", "selected")):
        assert old in text, old
        assert not matches(text.replace(old, new, 1).splitlines(), actual), (old, new)
    assert not matches(expected[:-3] + expected[-2:], actual)  # a line left out


OUTCOMES = DOCS / "reference/outcomes.md"


def excerpt() -> list[str]:
    text = section(OUTCOMES.read_text(), "What a sweep looks like")
    return [line for line in blocks(text)[0].lines if line.strip()]


def _figures(line: str) -> tuple[str, str, list[float], str]:
    item, outcome, *rest = line.split(" ", 2)
    figures = re.sub(r" \(same effective settings as \S+: shared\)$", "", rest[0]) if rest else ""
    figures = re.sub(r" \(\S+ = mean of [^()]*\)", "", figures)  # the runs behind a pooled figure
    numbers = [float(n) for n in NUMBER.findall(figures)]
    words = re.sub(r"[-+\d.,\[\]%]|TGS", "", figures).strip()
    return item, outcome, numbers, words


PLAN = "pytest cells/demo_fsdp8.yml --collect-only -q"


def test_sweep_excerpt_is_consistent_and_printed_like_the_plugin(
    tmp_path: Path, fake_trainer_env: None, console_runs: list[ConsoleRun]
) -> None:
    lines = excerpt()
    root = workdir(tmp_path)
    # The plan of a fresh directory: the first console example's, when it is this command.
    listed = console_runs[0].actual if console_runs[0].command == PLAN else run(PLAN, root)
    plan = [line for line in listed if "::" in line]
    ids = [_figures(line)[0] for line in lines]
    assert ids == [i for i in plan if i in ids], "excerpt ids are not in run order"
    count = re.search(r"(\d+) items", section(OUTCOMES.read_text(), "What a sweep looks like"))
    assert count and int(count.group(1)) == len(plan)
    # Δ % against the mean of the baseline repeats, inside its interval, and the verdict word
    # the interval implies.
    figures = [_figures(line) for line in lines]
    # The last repeat's line prints the baseline's pooled figure: the mean of the repeats.
    base = [n[0] for item, _, n, _ in figures if "::baseline" in item][-1]
    for item, _outcome, numbers, words in figures:
        if len(numbers) == 4:
            tgs, delta, low, high = numbers
            assert abs(100 * (tgs / base - 1) - delta) < 0.02, item
            assert low <= delta <= high, item
            assert words == ("better" if low > 0 else "worse" if high < 0 else "within noise"), item
    # Each line as the plugin prints it for that item (decimal figures aside).
    verbose = run("pytest cells/demo_fsdp8.yml -v", root)
    printed = {line.split(" ")[0]: line for line in verbose if line.startswith("cells/") and " " in line}
    for line, item in zip(lines, ids):
        assert item in printed, item
        shown = " ".join(re.sub(r"\s+\[\s*\d+%\]$", "", printed[item]).split())
        # Whether the fake rerun stops a job early depends on when its steps reach the watcher
        # (the excerpt's jobs ran to their end): that suffix alone is left out of the comparison.
        shown = re.sub(r" \(stopped early: [^()]*(\([^()]*\)[^()]*)*\)", "", shown)
        # The verdict word follows the run's noise (the fake runs agree to 0.01 %, so a +1.7 %
        # is `better` there): the excerpt's own word is checked against its interval above.
        assert _norm(VERDICT_WORDS.sub("V", shown)) == _norm(VERDICT_WORDS.sub("V", line)), (
            f"docs: {line}\nplugin: {shown}"
        )
    readme_default_run_is_printed_like_the_plugin(plan, verbose)


STOPPED = re.compile(r" \(stopped early: [^()]*(\([^()]*\)[^()]*)*\)")
VERDICT_WORDS = re.compile(r"\b(better|worse|within noise|unstable)\b")
RUNS = re.compile(r" \(\S+ = mean of (?:[^()]|\(profiled\))*\)")  # a profiled run's value is marked


def _shape(line: str) -> str:
    """A line's form: figures, verdict words and the early-stop suffix (which the real and the
    fake run decide differently) left out; `…` (the README's abridging) kept as a wildcard."""
    line = STOPPED.sub("", " ".join(re.sub(r"\s+\[\s*\d+%\]$", "", line).split()))
    line = RUNS.sub("", line)  # whether later runs had joined the figure when the item ended: timing
    shape = re.sub(r"[-+]?\d+(\.\d+)?", "N", VERDICT_WORDS.sub("V", line))
    return re.sub(r"N(?:,? N)+", "N", shape)  # a list of job ids: how many, the run decided


def readme_default_run_is_printed_like_the_plugin(plan: list[str], printed: list[str]) -> None:
    """The README's default (adaptive) run, a record of a real demo run: its item lines in run
    order, each Δ % inside its interval with the verdict word the interval implies, and each
    line in the form the plugin prints it (an item the fake run ended the same way, and the
    closing report, lock and cost lines)."""
    block = next(b for b in blocks(section(README.read_text(), "What a default run prints")) if b.lang == "text")
    lines = [line for line in block.lines if line.strip()]
    # Item lines (`cells/…[tag] PASSED …`); the terminal summary's final figures (`cells/…[tag]: …`) aside.
    items = [line for line in lines if line.startswith("cells/") and not line.split(" ")[0].endswith(":")]
    ids = [line.split(" ")[0] for line in items]
    assert len(ids) >= 8 and ids == [i for i in plan if i in ids], "README default run: ids not in run order"
    for line in items:
        figures = re.match(
            r"\S+ PASSED [\d.]+ TGS ([-+][\d.]+) % \[([-+][\d.]+), ([-+][\d.]+)\] "
            r"(better|worse|within noise)",
            line,
        )
        if figures:
            delta, low, high = map(float, figures.groups()[:3])
            assert low <= delta <= high, line
            assert figures.group(4) == ("better" if low > 0 else "worse" if high < 0 else "within noise"), line
    shown = {line.split(" ")[0]: line for line in printed if line.startswith("cells/") and " " in line}
    compared = 0
    for line in lines:
        if line.startswith("cells/"):
            fake = shown.get(line.split(" ")[0], "")
            if fake.split(" ")[1:2] != line.split(" ")[1:2] or line.split(" ")[1] == "SKIPPED":
                continue  # the fake run ended this item otherwise (or skipped it for another reason)
            candidates = [fake]
        elif line.startswith("xlatune:") and "saved node-minutes" not in line and "drift:" not in line:
            # (the savings and the drift's within/beyond follow the machine's load, not the form)
            candidates = [p for p in printed if p.startswith("xlatune:")]
        else:
            continue
        pattern = re.compile(".*?".join(map(re.escape, _shape(line).split("…"))))
        assert any(pattern.fullmatch(_shape(c)) for c in candidates), f"README: {line}\nplugin: {candidates}"
        compared += 1
    assert compared >= 8, compared


def _help_entries(text: str) -> dict[str, str]:
    """`--xlatune-x[=METAVAR]` → its help text, continuation lines joined."""
    entries: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^  (--xlatune-[a-z-]+(?:=\S+)?)\s*(.*)$", line)
        if m:
            current = m.group(1)
            entries[current] = m.group(2)
        elif current and line.startswith("    ") and line.strip():
            sep = "" if entries[current].endswith("-") else " "
            entries[current] = (entries[current] + sep + line.strip()).strip()
        else:
            current = None
    return entries


def _default(text: str) -> str:
    m = re.search(r"\(default: (.*)\)\s*$", text)
    assert m, text
    return m.group(1)


def test_options_table_matches_pytest_help(pytester: pytest.Pytester) -> None:
    help_text = pytester.runpytest_inprocess("--help").stdout.str()
    entries = _help_entries(help_text)
    rows = [
        [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        for line in (DOCS / "reference/options.md").read_text().splitlines()
        if line.startswith("| `--xlatune") or line.startswith("| — |")
    ]
    assert rows
    documented = set()
    for flag_cell, ini_cell, default_cell, _ in rows:
        ini = ini_cell.strip("`")
        assert re.search(rf"^  {ini} \(", help_text, re.M), f"README options table: {ini} not in --help"
        if flag_cell == "—":
            continue
        # argparse prints an optional value as `--x=[V]`; the README writes it the usual `--x[=V]`.
        flag = re.sub(r"\[=(\w+)\]$", r"=[\1]", flag_cell.strip("`").replace("…", "..."))
        documented.add(flag.split("=")[0])
        assert flag in entries, f"README options table: {flag} not in --help ({sorted(entries)})"
        default = _default(entries[flag])
        name = flag.split("=")[0]
        # --help states every default (it said `(default: )` where an empty value means one)
        assert default.strip(), f"--help: {name} says (default: ) instead of what it defaults to"
        expected = {"False": "off", "none": "(none)", sys.executable: "this Python"}.get(
            default, default if "`" in default else f"`{default}`"
        )
        assert default_cell == expected, (
            f"README options table: {name} default {default_cell!r}, --help says {default!r}"
        )
    cells_row = next(r for r in rows if r[0] == "—")
    assert f"(default: {cells_row[2].strip('`')})" in " ".join(help_text.split())
    missing = {flag.split("=")[0] for flag in entries} - documented
    assert not missing, f"options in --help without a README row: {sorted(missing)}"


def test_bad_cell_error_line_is_what_collection_prints(tmp_path: Path) -> None:
    text = CELL_PAGE.read_text()
    lines = [b.lines[0] for b in blocks(text) if b.lines and b.lines[0].startswith("cells/x.yml:3: parallelism:")]
    assert len(lines) >= 2, lines  # the plain error and the one that says what was meant
    (tmp_path / "cells").mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    for line in lines:
        found = re.match(r"cells/x\.yml:3: parallelism: .*found '([^']*)'( \(did you mean '.*'\?\))?$", line)
        assert found, line
        (tmp_path / "cells" / "x.yml").write_text(f"model_tag: x\nnodes: 1\nparallelism: {found.group(1)}\n")
        assert line in run("pytest cells/x.yml", tmp_path)


def test_example_cell_collects_every_wave_the_table_names(tmp_path: Path) -> None:
    text = section(CELL_PAGE.read_text(), "A cell")
    cell = next(b for b in blocks(text) if b.lang == "yaml")
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "readme.yml").write_text("\n".join(cell.lines) + "\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    out = run("pytest cells/readme.yml --collect-only -q", tmp_path)
    ids = [line for line in out if line.startswith("cells/readme.yml::")]
    assert ids, "\n".join(out)
    for wanted in (
        "wave1::baseline[sparse]",
        "wave1::baseline[dense]",
        "wave1::restore_default[sparse]",
        "wave1.5::evidence[sparse]",
        "wave2::ag1g_remat[sparse]",
        "wave3::ag_combine_512m[sparse]",
        "wave4::stack_top2[sparse]",
        "evidence2::winner[sparse]",
        "wave6::best[dense]",
    ):
        assert f"cells/readme.yml::{wanted}" in ids, wanted


def test_workload_step_line_is_what_the_parser_reads() -> None:
    text = (DOCS / "reference/workload.md").read_text()
    line = next(b for b in blocks(text) if b.lines and "completed step:" in b.lines[0]).lines[0]
    record = parse_step_line(line)
    assert record is not None and record.step == 9 and record.tokens_per_s == 1007.9


def test_layout_names_files_that_exist() -> None:
    text = section((DOCS / "architecture.md").read_text(), "Layout")
    block = blocks(text)[0]
    names = [
        token
        for line in block.lines
        for token in re.findall(r"[\w./-]+", line)
        if token.endswith((".py", "/", ".py/.yml"))
    ]
    assert len(names) > 30, names
    for name in names:
        paths = [name[: -len("/.yml")], name[: -len(".py/.yml")] + ".yml"] if name.endswith("/.yml") else [name]
        for path in paths:
            assert any((REPO / top / path).exists() for top in ("", "pytest_xlatune", "tests/integration")), (
                f"README Layout names {path}, which does not exist"
            )


def test_the_examples_start_without_the_lock_a_demo_run_left_in_the_checkout(tmp_path: Path) -> None:
    # ./scripts/demo.sh writes cells/demo_fsdp8.lock.json in the checkout; copied along, the
    # examples printed "recipe changed" and "not changed" where the README says "new lock".
    repo = tmp_path / "repo"
    (repo / "cells").mkdir(parents=True)
    (repo / "cells" / "demo_fsdp8.yml").write_text((REPO / "cells" / "demo_fsdp8.yml").read_text())
    (repo / "cells" / "demo_fsdp8.lock.json").write_text("{}")
    root = workdir(tmp_path / "work", repo)
    assert sorted(p.name for p in (root / "cells").iterdir()) == ["demo_fsdp8.yml"]
