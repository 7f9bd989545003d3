"""backends.container_image: the maxtext-slurm image, checked before anything reaches the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_xlatune.cell.load import load_cell
from pytest_xlatune.launch.preflight import PreflightError
from pytest_xlatune.launch.registry import container_image
from pytest_xlatune.settings import Settings

CELL = """\
model_tag: m
nodelist: node[01-02]
parallelism: FSDP=2
image: {image}
backend: {{kind: maxtext-slurm, checkout: /ck}}
"""


def settings(image: str = "") -> Settings:
    return Settings(
        store_dir=Path(".xlatune"),
        report_dir=Path("."),
        write_report=False,
        remeasure=False,
        poll_interval=0.5,
        python="python3",
        image=image,
    )


def cell(tmp_path: Path, image: str):
    path = tmp_path / "m.yml"
    path.write_text(CELL.format(image=image))
    return load_cell(path)


def test_the_option_wins_over_the_cell_and_both_are_checked(tmp_path: Path) -> None:
    c = cell(tmp_path, "/images/v26.2.tar")
    assert container_image(c, settings()) == "/images/v26.2.tar"
    assert container_image(c, settings("rocm/jax-training:maxtext-v26.3")) == "rocm/jax-training:maxtext-v26.3"
    with pytest.raises(PreflightError) as error:
        container_image(c, settings("x;rm -rf /"))
    assert str(error.value) == (
        f"{c.path}: --xlatune-image: expected a container image (registry/name:tag, "
        "or the absolute path of a .tar) matching [A-Za-z0-9_./@+][A-Za-z0-9_./:@+-]*, "
        "at most 512 characters, found 'x;rm -rf /'"
    )


def test_a_bad_image_in_the_cell_names_the_cell_key(tmp_path: Path) -> None:
    """The cell loader refuses it at its line, before any pre-flight."""
    from pytest_xlatune.cell.nodes import CellError

    with pytest.raises(CellError, match=r"m.yml:4: image: expected a container image .* found '--privileged'"):
        cell(tmp_path, "'--privileged'")
