"""Collection: shipped cells collect; a bad cell is one clear line and nothing runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FAKE, refused_at_collection

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("cell", sorted((REPO / "cells").glob("*.yml")), ids=lambda p: p.name)
def test_shipped_cells_collect(pytester: pytest.Pytester, cell: Path) -> None:
    result = pytester.runpytest(str(cell), "--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*::wave1::baseline[[]*[]]", "*::wave1.5::evidence[[]*[]]"])


def test_bad_cell_is_one_line_without_traceback_and_runs_nothing(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    good = pytester.makefile(".yml", good="model_tag: g\nnodes: 1\nparallelism: FSDP=2\n")
    bad = pytester.makefile(".yml", bad="model_tag: b\nnodes: 1\nparallelism: FSDP=0\n")
    result = pytester.runpytest(str(good), str(bad), *FAKE)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*bad.yml:3: parallelism: expected *found*FSDP=0*"])
    assert "Traceback" not in result.stdout.str()
    assert "def collect" not in result.stdout.str()
    assert not (pytester.path / ".xlatune").exists()  # the good cell did not start either


def test_bad_option_value_fails_at_parse_time(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--xlatune-poll-interval=-1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--xlatune-poll-interval*expected a number of seconds > 0, from 0.01 to 300*"])


def test_help_lists_every_option_with_its_ini_twin(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "xlatune (XLA/NCCL flag tuning cells):",
            "*--xlatune-store=DIR*",
            "*--xlatune-remeasure*",
            "*xlatune_store*",
            "*xlatune_poll_interval*",
            "*xlatune_cells*",
        ]
    )


def test_a_directory_of_unnamed_cells_says_how_to_name_them(pytester: pytest.Pytester) -> None:
    """`pytest mycells/` collects no cell (cells are named or matched by xlatune_cells): the
    session says so and how, instead of a bare "no tests ran"."""
    (pytester.path / "mycells").mkdir()
    (pytester.path / "mycells" / "a.yml").write_text("model_tag: a\nnodes: 1\nparallelism: FSDP=2\n")
    result = pytester.runpytest("mycells", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(
        ["xlatune: mycells holds a.yml, not collected: cells are the YAML files named (pytest mycells/[*].yml)*"]
    )
    named = pytester.runpytest("-o", "xlatune_cells=mycells/*.yml", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert named.ret == 0 and "xlatune: mycells holds" not in named.stdout.str()


PP_CELL = """\
model_tag: pp
nodes: 1
parallelism: PP=4,FSDP=2
pdbs: 1
pipeline_shapes:
  - {microbatches: 4}
  - {microbatches: 8}
"""


def test_a_pipeline_shape_the_workload_would_refuse_is_refused_at_collection(pytester: pytest.Pytester) -> None:
    """Global batch 1 × 8 devices in 8 microbatches of 1 sequence, which FSDP=2 cannot split: the
    embedded workload refuses it at run time; the collection says which key, and what fits."""
    cell = pytester.makefile(".yml", pp=PP_CELL)
    refused_at_collection(
        pytester,
        cell,
        "pp.yml:7: pipeline_shapes[[]1[]].microbatches: expected a number of microbatches that splits the "
        "global batch 8 (per-device batch 1 × 8 devices) into microbatches divisible by data × FSDP = 2 "
        "(1, 2, 4), found 8 (microbatch size 1 is not divisible by data[*]fsdp=2)",
    )
    pytester.makefile(".yml", pp=PP_CELL.replace("pdbs: 1", "pdbs: 2"))  # batch 16: 8 microbatches of 2
    assert pytester.runpytest(str(cell), "--collect-only", "-q", "-p", "no:cacheprovider").ret == 0


def test_another_workload_module_has_its_own_rule_and_a_refused_shape_names_its_key(
    pytester: pytest.Pytester, fake_trainer_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MaxText's words for a shape it refuses, as the run's error line
    monkeypatch.setenv(
        "FAKE_TRAINER_SAY", "The number of microbatches (8) must be divisible by the number of stages (4)"
    )
    crash = "env_file:\n  - flag: --xla_fake_fail=crash\n    image_default: none\n"
    cell = pytester.makefile(".yml", pp=PP_CELL + crash)
    result = pytester.runpytest(str(cell), *FAKE, "--xlatune-fixed-protocol", "-k", "mb8")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "job * (python_exception): *The number of microbatches (8) must be divisible*",
            "pp.yml:7: pipeline_shapes[[]1[]].microbatches: the run refused shape mb8_v1 (8 microbatches, "
            "virtual_stages 1); change or drop it",
        ]
    )
