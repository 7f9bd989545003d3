"""pytest's own selection flags on a cell with a failing profile, as on any test suite: --lf,
--ff, --sw, -x, --deselect, -k, -m, node ids and --collect-only select, order and stop cell items
as they would Python tests; a deselected item submits no job; --collect-only writes no file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cells import cell_yaml
from tests.conftest import store_full_at

# The scripted fake trainer, with the cache provider on (--lf/--ff/--sw need it).
# Selection mechanics count on every selected item running once, in order: the fixed protocol.
# tests.conftest.FIXED with the cache provider (--lf, --ff, --sw need it): jobs played in memory.
ARGS = [
    "--xlatune-workload=fake_trainer",
    "--xlatune-poll-interval=0.05",
    "--xlatune-fixed-protocol",
    "-p",
    "tests.fake_launcher",
]

CELL = cell_yaml(
    "sel",
    ("good", "--xla_fake_tgs=1100"),
    ("bad", "--xla_obsolete_flag=1"),
    parallelism="FSDP=2",
    baseline_repeats=None,
)
ALL = [
    "wave1::baseline[default]",
    "wave1::baseline-r2[default]",
    "wave1.5::evidence[default]",
    "wave2::good[default]",
    "wave2::bad[default]",
    "evidence2::winner[default]",
]


def submitted(pytester: pytest.Pytester, store: str = ".xlatune", cell: str = "cell") -> list[str]:
    """The items a job was submitted for, in order (the store records each submission)."""
    path = pytester.path / store / f"{cell}.jsonl"
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return [e["item"] for e in events if e["event"] == "submitted"]


def ran(result: pytest.RunResult) -> list[str]:
    """Items in the order they ran (-v lines)."""
    return [
        line.split("::", 1)[1].split(" ")[0]
        for line in result.outlines
        if line.startswith("cell.yml::") and any(w in line for w in (" PASSED", " FAILED", " REUSED", " SKIPPED"))
    ]


def files(root: Path) -> dict[str, int]:
    """Every file under root except pytest's own cache, with its mtime."""
    return {
        str(p.relative_to(root)): p.stat().st_mtime_ns
        for p in root.rglob("*")
        if p.is_file() and ".pytest_cache" not in p.parts
    }


@pytest.fixture
def cell(pytester: pytest.Pytester, fake_trainer_env: None) -> pytest.Pytester:
    pytester.makefile(".yml", cell=CELL)
    return pytester


# The adaptive sweep: it runs the control after the win's first run that the fixed protocol does
# not run, so that the win is locked (a win no control brackets never is: verdicts.unbracketed).
ADAPTIVE = [a for a in ARGS if a != "--xlatune-fixed-protocol"]


def locked_once(cell: pytest.Pytester) -> None:
    """Write the lock: the stored sweep again, adaptively (one control: `good` is locked)."""
    cell.runpytest("cell.yml", *ADAPTIVE).stdout.fnmatch_lines(["xlatune: recipe lock written to cell.lock.json*"])


@pytest.fixture
def failed_once(cell: pytest.Pytester) -> pytest.Pytester:
    """The whole cell ran once: 5 passed, `wave2::bad` failed (XLA rejects its flag)."""
    result = cell.runpytest("cell.yml", "-v", *ARGS)
    result.assert_outcomes(passed=5, failed=1)
    assert ran(result) == ALL and submitted(cell) == ALL
    return cell


def test_lf_runs_only_the_failed_item_and_submits_nothing_for_the_others(failed_once: pytest.Pytester) -> None:
    # A fresh store: anything --lf lets through would have to be submitted again.
    result = failed_once.runpytest("cell.yml", "--lf", "-v", "--xlatune-store=fresh", *ARGS)
    result.assert_outcomes(failed=1, deselected=5)
    result.stdout.fnmatch_lines(["run-last-failure: rerun previous 1 failure*"])
    assert ran(result) == ["wave2::bad[default]"]
    assert submitted(failed_once, "fresh") == ["wave2::bad[default]"]


def test_ff_runs_the_failed_item_first_then_the_rest(failed_once: pytest.Pytester) -> None:
    result = failed_once.runpytest("cell.yml", "--ff", "-v", *ARGS)
    result.assert_outcomes(passed=5, failed=1)
    assert ran(result) == ["wave2::bad[default]"] + [n for n in ALL if n != "wave2::bad[default]"]
    assert submitted(failed_once) == ALL  # everything else reused from the store


def test_stepwise_stops_at_the_failure_and_resumes_from_it(cell: pytest.Pytester) -> None:
    first = cell.runpytest("cell.yml", "--sw", "-v", *ARGS)
    first.assert_outcomes(passed=4, failed=1)
    assert submitted(cell) == ALL[:5]  # the winner's evidence run never started
    first.stdout.fnmatch_lines(
        [
            "*recipe lock * not written: 1 item(s) of the cell did not run "
            "in this session (evidence2::winner[[]default[]])*"
        ]
    )
    assert not (cell.path / "cell.lock.json").exists()
    again = cell.runpytest("cell.yml", "--stepwise", "-v", *ARGS)
    again.assert_outcomes(failed=1, deselected=4)
    assert ran(again) == ["wave2::bad[default]"]


def test_x_stops_at_the_first_failure_and_submits_nothing_after_it(cell: pytest.Pytester) -> None:
    result = cell.runpytest("cell.yml", "-x", "-v", *ARGS)
    result.assert_outcomes(passed=4, failed=1)
    assert ran(result) == ALL[:5] and submitted(cell) == ALL[:5]
    assert not (cell.path / "cell.lock.json").exists()


def test_deselect_by_node_id(cell: pytest.Pytester) -> None:
    result = cell.runpytest("cell.yml", "--deselect", "cell.yml::wave2::bad[default]", "-v", *ARGS)
    result.assert_outcomes(passed=5, deselected=1)
    assert "wave2::bad[default]" not in submitted(cell)
    assert len(submitted(cell)) == 5


def test_node_id_arguments_select_a_wave_or_one_item(cell: pytest.Pytester) -> None:
    wave = cell.runpytest("cell.yml::wave2", "--collect-only", "-q", *ARGS)
    wave.stdout.fnmatch_lines(
        ["cell.yml::wave2::good[[]default[]]", "cell.yml::wave2::bad[[]default[]]", "2 tests collected*"]
    )
    one = cell.runpytest("cell.yml::wave2::good[default]", "-v", *ARGS)
    one.assert_outcomes(passed=1)
    assert submitted(cell) == ["wave2::good[default]"]


def test_k_subset_runs_only_its_items_and_says_what_it_needs(cell: pytest.Pytester) -> None:
    result = cell.runpytest("cell.yml", "-k", "good", "-v", *ARGS)
    result.assert_outcomes(passed=1, deselected=5)
    assert submitted(cell) == ["wave2::good[default]"]  # the baselines were not run behind -k
    result.stdout.fnmatch_lines(
        [
            "cell.yml::wave2::good[[]default[]] PASSED 1100.* TGS (no baseline: see the end)*",
            "*runs the selected items needed (not run)*",
            "cell.yml::wave2::good[[]default[]]: a Δ % needs a measured baseline-deployed [[]default[]]"
            ", and the store has none: pytest 'cell.yml::wave1::baseline[[]default[]]' "
            "'cell.yml::wave1::baseline-r2[[]default[]]'",
        ]
    )
    # The command it names measures exactly what was missing; then the Δ % is there.
    needed = cell.runpytest("cell.yml::wave1::baseline[default]", "cell.yml::wave1::baseline-r2[default]", "-v", *ARGS)
    needed.assert_outcomes(passed=2)
    again = cell.runpytest("cell.yml", "-k", "good", "-v", *ARGS)
    again.stdout.fnmatch_lines(["cell.yml::wave2::good[[]default[]] REUSED 1100.* TGS +10.00 %*"])
    assert "needed" not in again.stdout.str()
    assert submitted(cell) == ["wave2::good[default]", "wave1::baseline[default]", "wave1::baseline-r2[default]"]


def test_m_xlatune_selects_cell_items(cell: pytest.Pytester) -> None:
    cell.makepyfile(test_plain="def test_plain():\n    pass\n")
    only = cell.runpytest("cell.yml", "test_plain.py", "-m", "xlatune", "--collect-only", "-q", *ARGS)
    only.stdout.fnmatch_lines(["6/7 tests collected (1 deselected)*"])
    none = cell.runpytest("cell.yml", "test_plain.py", "-m", "not xlatune", *ARGS)
    none.assert_outcomes(passed=1, deselected=6)
    assert submitted(cell) == []
    assert not (cell.path / "sel-tuning.md").exists()  # no item of the cell ran


def test_collect_only_and_help_write_no_file(failed_once: pytest.Pytester) -> None:
    root = failed_once.path
    (root / "sel-tuning.md").unlink()
    assert not (root / "cell.lock.json").exists()  # the fixed protocol's win: no control, no lock
    before = files(root)
    collected = failed_once.runpytest("cell.yml", "--collect-only", "-q", *ARGS)
    collected.stdout.fnmatch_lines(["6 tests collected*"])
    assert "xlatune: tuning report" not in collected.stdout.str()
    failed_once.runpytest("--help")
    assert files(root) == before
    shutil.rmtree(root / ".xlatune")
    before = files(root)
    failed_once.runpytest("cell.yml", "--collect-only", *ARGS)
    failed_once.runpytest("cell.yml", "-k", "no_such_item", *ARGS).assert_outcomes(deselected=6)
    assert files(root) == before  # no store, no report, no lock


def test_report_and_lock_are_rewritten_only_when_their_content_changes(failed_once: pytest.Pytester) -> None:
    root = failed_once.path
    locked_once(failed_once)
    before = files(root)
    lock = json.loads((root / "cell.lock.json").read_text())
    assert [r["profile"] for r in lock["recipes"]] == ["good"]
    result = failed_once.runpytest("cell.yml", *ARGS)  # everything reused
    result.stdout.fnmatch_lines(
        [
            "xlatune: tuning report sel-tuning.md not changed",
            "xlatune: recipe lock cell.lock.json not changed: the sweep "
            # the recipe's figure pools the winner's profiled re-run (job 6) with its run
            "found the recipe on file (good [[]default[]] +*.* % (jobs 4, 6))",
        ]
    )
    after = files(root)
    for name in ("sel-tuning.md", "cell.lock.json"):
        assert after[name] == before[name], name


def test_lock_changes_only_after_a_whole_sweep_and_says_why(failed_once: pytest.Pytester) -> None:
    root = failed_once.path
    locked_once(failed_once)
    locked = (root / "cell.lock.json").read_text()
    (root / "cell.yml").write_text(CELL.replace("--xla_fake_tgs=1100", "--xla_fake_tgs=1300"))
    subset = failed_once.runpytest("cell.yml", "-k", "good", *ARGS)
    subset.assert_outcomes(passed=1, deselected=5)
    subset.stdout.fnmatch_lines(
        [
            "xlatune: recipe lock cell.lock.json not changed: 5 item(s) of "
            "the cell did not run in this session (*); the lock changes only "
            "after a whole sweep"
        ]
    )
    assert (root / "cell.lock.json").read_text() == locked
    whole = failed_once.runpytest("cell.yml", *ADAPTIVE)
    # The 1300 win's first run (job 8) ran in the -k session, after the last control (job 7): the
    # whole sweep repeated it but ran no control after it, so it keeps the lock and says why.
    whole.stdout.fnmatch_lines(
        [
            "xlatune: recipe lock cell.lock.json not changed: no lock: the win is not confirmed: "
            "no control (a baseline run) ran after good's first run (job 8)*; the lock on file is kept"
        ]
    )
    assert (root / "cell.lock.json").read_text() == locked


def test_a_stop_in_the_last_item_leaves_the_lock_alone(cell: pytest.Pytester) -> None:
    """A STOP is never a whole sweep, also when it comes in the cell's last item (every item
    then ran): the store could not take the winner's evidence run, so no lock is written."""
    cell.makeconftest(store_full_at("evidence2::winner[default]"))
    result = cell.runpytest_subprocess("cell.yml", "-v", *ARGS)
    result.assert_outcomes(passed=4, failed=2)
    assert ran(result) == ALL
    result.stdout.fnmatch_lines(
        [
            "xlatune STOP: *cannot write the results store (No space left on device); the result "
            "record of evidence2::winner[[]default[]] is not stored*",
            "xlatune: recipe lock cell.lock.json not written: the session stopped (xlatune STOP "
            "above); the lock changes only after a whole sweep",
        ]
    )
    assert not (cell.path / "cell.lock.json").exists()


def test_a_catalog_candidate_and_the_winner_say_what_they_need(cell: pytest.Pytester) -> None:
    cell.makefile(".yml", cat="model_tag: cat\nnodes: 1\nparallelism: FSDP=2\nwaves:\n  3: {catalog: cpu}\n")
    result = cell.runpytest("cat.yml", "-k", "opt_o1 or winner", "-v", "-rs", *ARGS)
    result.assert_outcomes(passed=2, deselected=8)
    result.stdout.fnmatch_lines(
        [
            "cat.yml::wave3::opt_o1[[]default[]]: catalog order and relevance need the wave1.5 evidence"
            " run, and the store has none: pytest 'cat.yml::wave1.5::evidence[[]default[]]'; a Δ % "
            "needs a measured baseline-deployed [[]default[]], and the store has none: pytest "
            "'cat.yml::wave1::baseline[[]default[]]' 'cat.yml::wave1::baseline-r2[[]default[]]'",
            "cat.yml::evidence2::winner[[]default[]]: a Δ % needs a measured baseline-deployed*",
        ]
    )
    assert submitted(cell, cell="cat") == ["wave3::opt_o1[default]", "evidence2::winner[default]"]
    # opt_o1, measured just before, is the best run the winner's evidence run re-runs; alone,
    # on a store without profiles, it says to measure waves 2-4.
    alone = cell.runpytest("cat.yml", "-k", "winner", "-rs", "--xlatune-store=other", *ARGS)
    alone.assert_outcomes(skipped=1, deselected=9)
    alone.stdout.fnmatch_lines(
        [
            "SKIPPED*no measured profile on the primary config tag yet: no "
            "winner to re-run (measure waves 2-4 first: pytest cat.yml -k "
            "'wave2 or wave3 or wave4')"
        ]
    )
    assert submitted(cell, "other", "cat") == []
