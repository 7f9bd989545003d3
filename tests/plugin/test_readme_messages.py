"""The messages the docs quote (option errors, incidents, STOP lines, the gate's regression
line, the submit.sh command line, …) are what the tool prints, compared with README.md and the
docs/ pages of test_readme_examples.DOC_PAGES read at test time (issue 17; the console blocks and
the sweep excerpt: test_readme_examples.py).

Each example is found by an anchor, text that occurs in exactly one quoted example of those pages
(an inline code span, or a line of a fenced block that is not a console block), and produced by
the tool: the real function that formats it, given the README's inputs, or a real pytest run on a
small cell with the scripted fake trainer (the Outcomes table's lines: the sweep excerpt, which
test_readme_examples.py compares with the plugin). `…` in the README matches any text;
everything else must be what the tool prints, character for character, as a whole line of its
output. An example edited anywhere (any one word or number) no longer matches.

Not checked (nothing here prints them): the adaptive run's excerpt and the report's Tie TL;DR
(records of one loaded run), the host-cmd "no server answers" line (needs upstream's bridge
client: tests/integration/test_hostcmd.py), the busy-nodes and adaptive progress lines, and the
schematic examples with `<placeholders>` or `N`.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from pytest_xlatune.cell import catalog
from pytest_xlatune.cell.load import load_cell
from pytest_xlatune.engine.recover import recover_submissions
from pytest_xlatune.evidence.artifacts import EvidenceFacts
from pytest_xlatune.launch.base import SubmittedJob
from pytest_xlatune.launch.maxtext import files as maxtext_files
from pytest_xlatune.launch.registry import maxtext_backend
from pytest_xlatune.launch.slurm_jobs import SlurmPlacement
from pytest_xlatune.plan import catalog as plan_catalog
from pytest_xlatune.plan.expand import expand
from pytest_xlatune.plan.request import job_request
from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.slurm.client import SlurmClient
from pytest_xlatune.store import ResultStore
from pytest_xlatune.transport.base import LocalTransport
from pytest_xlatune.transport.hostcmd import BridgeInfo, result_error
from pytest_xlatune.verdict.gate import image_gate
from pytest_xlatune.verdict.lock import Lock, LockedRecipe
from tests.conftest import store_full_at
from tests.plugin.test_readme_examples import CELL_PAGE, DOC_PAGES, blocks, excerpt, run, run_inprocess, section

Lines = list[str]


# ---- the README's quoted examples -----------------------------------------------------------


def quoted_examples(text: str) -> Lines:
    """Every inline code span outside fenced blocks (a line break inside one reads as a space),
    then every line of the fenced blocks that are not console blocks."""
    outside = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.M | re.S)
    spans = [
        re.sub(r"\s*\n\s*", " ", m.group(2)).strip()
        for m in re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", outside, flags=re.S)
    ]
    return spans + [line.strip() for b in blocks(text) if b.lang != "console" for line in b.lines]


def quoted(anchor: str) -> str:
    found = [q for page in DOC_PAGES for q in quoted_examples(page.read_text()) if anchor in q]
    assert len(found) == 1, f"docs: expected one quoted example holding {anchor!r}, found {found}"
    return found[0]


def matches(example: str, printed: Lines) -> bool:
    """Whether a line the tool printed is the example (`…` matches any text)."""
    pattern = re.compile(".*?".join(map(re.escape, example.split("…"))))
    return any(pattern.fullmatch(line.strip()) for line in printed)


# ---- what the tool prints, given the README's inputs ----------------------------------------


def option_errors(root: Path) -> Lines:
    """Bad option values: each is a usage error (exit code 4) before anything runs."""
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "cells" / "x.yml").mkdir(parents=True)
    printed = []
    for value in ("--xlatune-store=/proc/x", "--xlatune-poll-interval=nan", "--xlatune-policy=p.yml", "cells/x.yml"):
        code, lines = run_inprocess([value], root)
        out = "\n".join(lines)
        assert code == pytest.ExitCode.USAGE_ERROR and "Traceback" not in out, out
        printed += lines
    assert not (root / ".xlatune").exists()  # nothing ran
    return printed


CELL = (
    "model_tag: x\nnodes: 1\nparallelism: FSDP=8\nbaseline_repeats: 1\n"
    "waves:\n  2:\n    - {{name: {name}, xla_flags: [{flag}]}}\n"
)


def cell_dir(root: Path, name: str, flag: str) -> Path:
    """`x.yml` (its store `.xlatune/x.jsonl`) with one wave-2 profile."""
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "x.yml").write_text(CELL.format(name=name, flag=flag))
    return root


def retry_incident(root: Path) -> Lines:
    """p's job 1 hits a coordination timeout: the playbook resubmits it on the same nodelist."""
    return run("pytest x.yml -k wave2", cell_dir(root, "p", "--xla_fake_fail=coord_timeout"))


def store_in_use(root: Path) -> Lines:
    """Another session (host vm, pid 4242) holds the store of x.yml: this one fails its items."""
    cell_dir(root, "a", "--xla_fake_tgs=1000")
    holder = ResultStore(root / ".xlatune" / "x.jsonl")
    holder.acquire("other session")
    # The README's holder, written into the lock file's owner note as a session writes its own.
    holder._note = {"host": "vm", "pid": 4242, "session": "other session", "started": "2026-12-01 20:47:25 UTC"}
    holder._write_note()
    try:  # another session: a process of its own
        return run("pytest x.yml -k wave2", root, process=True)
    finally:
        holder.release()


def store_full(root: Path) -> Lines:
    """The disk fills as wave2::a[default]'s result record is written."""
    cell_dir(root, "a", "--xla_fake_tgs=1000")
    (root / "conftest.py").write_text(store_full_at("wave2::a[default]"))
    return run("pytest x.yml -k wave2", root, process=True)  # the conftest patches the process


def noted_cancels(root: Path) -> Lines:
    """The session before could not store job 885's `cancelled` record and noted it."""
    before = ResultStore(root / "x.jsonl")
    before.acquire("before")
    before.append("submitted", key="a", item="wave2::a[default]", job_id="885", log_path="l", job_dir="d")
    assert before.note_cancelled("885")
    before.release()
    return ResultStore(root / "x.jsonl").acquire("next")


def recovered_submission(root: Path) -> Lines:
    """The session before was killed between `submitting` wave2::b and its job id (571)."""
    mark = "xlatune-00000000000005a1"

    class Scheduler:  # what squeue/sacct answer for the mark
        def find_submission(self, wanted: str, job_name: str, since: float) -> SubmittedJob | None:
            return SubmittedJob("571", "/jobs/571.log", "/jobs/571") if wanted == mark else None

    store = ResultStore(root / "x.jsonl")
    store.append("submitting", key="b", item="wave2::b[default]", job_name="x-b-default", mark=mark, time=time.time())
    printed: Lines = []
    assert recover_submissions(store, Scheduler(), printed.append) == 1  # type: ignore[arg-type]
    return printed


def gate_regression(root: Path) -> Lines:
    """The locked recipe 'fast' [sparse] on the new image: jobs 16 18 at 1030/1031 TGS, each after
    its old-image control, jobs 15 17 at 1100/1099; the lock (2026-12-02, the image the cell
    names) stored 1100.0."""
    lock = Lock(
        "m",
        "FSDP=8",
        "",
        "node01",
        "2026-12-02",
        (LockedRecipe("sparse", "fast", ("--xla_a=1",), (), (), 1100.0, 8.0, 12.0, 1000.0, 10.0, ("7",)),),
    )

    def runs(kind: str, jobs_tgs: dict[str, float]) -> list[JobResult]:
        return [
            JobResult(
                key=f"{kind}-{job}",
                item=f"gate::{kind}[sparse]",
                wave="gate",
                profile=kind,
                config_tag="sparse",
                kind=kind,
                job_id=job,
                verdict=Verdict.SUCCESS,
                tgs=tgs,
            )
            for job, tgs in jobs_tgs.items()
        ]

    outcome = image_gate(
        runs("gate_recipe", {"16": 1030.0, "18": 1031.0}),
        runs("baseline", {"12": 1000.0, "14": 1000.0}),
        lock,
        tolerance_pct=1.0,
        final=True,
        old_recipe_runs=runs("gate_old_recipe", {"15": 1100.0, "17": 1099.0}),
        old_baseline_runs=runs("gate_old_baseline", {"11": 1000.0, "13": 1000.0}),
    )
    return list(outcome.problems)


def submit_line(root: Path) -> Lines:
    """The evidence run of a deepseek3-671b cell pinned to node01 (partition debug, 10 min), as
    the maxtext-slurm launcher builds its submit.sh argv; its mark is the README line's."""
    example = quoted("./submit.sh deepseek3-671b:evidence")
    mark = re.search(r"--comment=(xlatune-[0-9a-f]{16})", example)
    assert mark, example
    # One node: FSDP=1 (FSDP is a DCN axis, one shard per node; the argv names no parallelism).
    (root / "ds.yml").write_text(
        "model_tag: deepseek3-671b\nnodelist: node01\nparallelism: FSDP=1\n"
        "backend: {kind: maxtext-slurm, checkout: /maxtext-slurm, partition: debug, "
        "time: '10:00'}\n"
    )
    cell = load_cell(root / "ds.yml")
    spec = next(s for s in expand(cell) if s.profile == "evidence")
    transport = LocalTransport()
    launcher = maxtext_backend(
        cell,
        transport,
        SlurmClient(transport),
        SlurmPlacement("node01", 1, "debug"),
        ResultStore(root / "ds.jsonl"),
        prepare=False,
    )
    return [shlex.join(launcher.argv_for(replace(job_request(cell, spec), mark=mark.group(1))))]


def tune_profile_arm(root: Path) -> Lines:
    """The README example cell's evidence run as a maxtext-slurm TUNE_PROFILE arm: its settings,
    and what the installed block prints when bash sources it for that arm."""
    text = next(b for b in blocks(section(CELL_PAGE.read_text(), "A cell")) if b.lang == "yaml").lines
    backend = "\nbackend: {kind: maxtext-slurm, checkout: /maxtext-slurm}\n"
    # On maxtext-slurm FSDP=8 is 8 nodes (a DCN axis); the block's args are the same for any slot.
    local = "\n".join(text).split("\nbackend:")[0]
    (root / "demo.yml").write_text(re.sub(r"^nodes: 1\b", "nodes: 8", local, flags=re.M) + backend)
    cell = load_cell(root / "demo.yml")
    request = job_request(cell, next(s for s in expand(cell) if s.profile == "evidence"))
    transport = LocalTransport()
    launcher = maxtext_backend(
        cell,
        transport,
        SlurmClient(transport),
        SlurmPlacement("node01", 1),
        ResultStore(root / "demo.jsonl"),
        prepare=False,
    )
    arm = replace(launcher.wanted_arm(request), name=launcher.arm_for(request)[0])
    block, _ = maxtext_files.render_tune_block([arm], launcher.model_name)
    sourced = subprocess.run(
        [
            "bash",
            "-c",
            "declare -A EXTRACTED_ENV_MAP; PASSTHROUGH_ARGS=(); "
            f"TUNE_PROFILE={shlex.quote(arm.name)}; source /dev/stdin",
        ],
        input=block,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [" ".join(arm.args), *sourced.stdout.splitlines()]


def catalog_skips(root: Path) -> Lines:
    """Catalog candidates after an evidence run (job 12) whose HLO has all-gather, reduce-scatter
    and all-reduce: the `hybrid` catalog's collective-permute ones, and `fsdp` past `max: 6`."""
    facts = EvidenceFacts("12", (("all-gather", 1 << 30), ("reduce-scatter", 1 << 29), ("all-reduce", 1 << 20)))
    return [
        reason
        for name, limit in (("hybrid", None), ("fsdp", 6))
        for _, reason in plan_catalog.decide([c.mechanism for c in catalog.get(name).candidates], name, limit, facts)
        if reason
    ]


def host_cmd(root: Path) -> Lines:
    """The bridge's pre-flight line (as the session prints it), and two results in the server's
    words: a command its policy refuses, a command that times out."""
    reached = BridgeInfo("login1", "login1", "alice", "/home/alice/maxtext-slurm", 0.51).describe()
    refused = result_error(
        {"exit_code": -3, "stderr": "POLICY VIOLATION: Denied by pattern: '^sinfo\\b'"}, "sinfo -h -N -o %N", "login1"
    )
    timed_out = result_error(
        {"exit_code": -1, "stderr": "Command timed out after 60s"}, "sbatch xlatune-jobs/x/1.sbatch", "login1"
    )
    return [f"[xlatune] {reached}", str(refused), str(timed_out)]


def sweep_excerpt(root: Path) -> Lines:
    """The lines of "What a sweep looks like" (test_readme_examples checks them against the
    plugin), outcome onward as well: the Outcomes table quotes a line from the outcome on."""
    lines = excerpt()
    return lines + [line.split(" ", 1)[1] for line in lines]


# anchor → what prints the example that holds it
EXAMPLES: dict[str, Callable[[Path], Lines]] = {
    "--xlatune-store: expected a writable directory": option_errors,
    "--xlatune-poll-interval: expected a number": option_errors,
    "--xlatune-policy: expected a policy file": option_errors,
    "cells/x.yml: expected a cell file": option_errors,
    "retry on the same nodelist": retry_incident,
    "in use by another pytest session": store_in_use,
    "cannot write the results store": store_full,
    "as cancelled by the session before": noted_cancels,
    "found job 571": recovered_submission,
    "regressed vs the lock (": gate_regression,
    "./submit.sh deepseek3-671b:evidence": submit_line,
    "steps=15 dataset_type=synthetic": tune_profile_arm,
    "[TUNE_PROFILE] evidence:": tune_profile_arm,
    "mechanism-irrelevant: acts on collective-permute": catalog_skips,
    "beyond max 6 of catalog fsdp": catalog_skips,
    "host-cmd bridge reached": host_cmd,
    "host-cmd policy on the host refused": host_cmd,
    "Command timed out after 60s": host_cmd,
    "wave2::opt_o2[default] PASSED …": sweep_excerpt,
    "PASSED … — numerics changed": sweep_excerpt,
}


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Lines]:
    """What the tool prints for an anchor's example (each producer runs once per module)."""

    @cache
    def produce(make: Callable[[Path], Lines]) -> Lines:
        return make(tmp_path_factory.mktemp(make.__name__))

    return lambda anchor: produce(EXAMPLES[anchor])


@pytest.mark.parametrize("anchor", EXAMPLES)
def test_readme_message_is_what_the_tool_prints(anchor: str, printed: Callable[[str], Lines]) -> None:
    example = quoted(anchor)
    output = printed(anchor)
    assert matches(example, output), f"README.md quotes\n  {example}\nthe tool printed\n  " + "\n  ".join(output)


@pytest.mark.parametrize("anchor", EXAMPLES)
def test_an_edited_message_no_longer_matches(anchor: str, printed: Callable[[str], Lines]) -> None:
    """Not vacuous: each word or number of the example, edited alone, fails the comparison."""
    example, output = quoted(anchor), printed(anchor)
    words = list(re.finditer(r"\w+", example))
    assert words
    for word in words:
        edited = example[: word.start()] + word.group() + "X" + example[word.end() :]
        assert not matches(edited, output), f"README.md example edited at {word.group()!r} matches: {edited}"
