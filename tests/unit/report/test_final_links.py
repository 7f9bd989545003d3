"""The end-of-session rewrites of pytest's HTML and junit files never write through a link, not
even one put there between reading the file and writing it back (no check-then-write gap)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_xlatune.report import final

NODE = "cells/m.yml::default::fast"
HTML = f'<html><body><tr><td>{NODE}</td><td class="col-tgs">1000.0</td></tr></body></html>'
JUNIT = (
    "<?xml version='1.0' encoding='utf-8'?>\n<testsuites><testsuite><testcase name='fast'><properties>"
    "<property name='xlatune_cell' value='cells/m.yml'/><property name='xlatune_item' value='fast'/>"
    "<property name='xlatune_tgs' value='1000.0'/></properties></testcase></testsuite></testsuites>"
)


def _swap_for_a_link(path: Path, victim: Path) -> None:
    path.unlink()
    path.symlink_to(victim)


def test_a_link_swapped_in_after_the_html_is_read_is_replaced_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page, victim = tmp_path / "report.html", tmp_path / "victim.txt"
    page.write_text(HTML)
    victim.write_text("keep me")
    moved = final.environment_last

    def racing(text: str) -> str:  # runs between the read and the write
        _swap_for_a_link(page, victim)
        return moved(text)

    monkeypatch.setattr(final, "environment_last", racing)
    assert final.rewrite_html(page, [(NODE, 'class="col-tgs"', "1000.0", "1010.0")])
    assert victim.read_text() == "keep me"
    assert not page.is_symlink() and 'class="col-tgs">1010.0<' in page.read_text()


def test_a_link_at_the_html_is_left_as_it_is(tmp_path: Path) -> None:
    victim, page = tmp_path / "victim.html", tmp_path / "report.html"
    victim.write_text(HTML)
    page.symlink_to(victim)
    assert not final.rewrite_html(page, [(NODE, 'class="col-tgs"', "1000.0", "1010.0")])
    assert victim.read_text() == HTML and page.is_symlink()


class _Racing(dict[Any, Any]):
    """The final figures, swapping a link in for the junit file when they are looked up."""

    def __init__(self, path: Path, victim: Path) -> None:
        super().__init__()
        self.path, self.victim = path, victim

    def get(self, key: Any, default: Any = None) -> Any:
        if not self.path.is_symlink():
            _swap_for_a_link(self.path, self.victim)
        return _Figure()


class _Figure:
    def props(self) -> dict[str, object]:
        return {"xlatune_tgs": 1010.0}


def test_a_link_swapped_in_after_the_junit_is_read_is_replaced_not_followed(tmp_path: Path) -> None:
    junit, victim = tmp_path / "junit.xml", tmp_path / "victim.txt"
    junit.write_text(JUNIT)
    victim.write_text("keep me")
    assert final.rewrite_junit(junit, _Racing(junit, victim))
    assert victim.read_text() == "keep me"
    assert not junit.is_symlink() and 'value="1010.0"' in junit.read_text()
