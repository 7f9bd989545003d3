"""The notification milestones (engine/milestones.py), pure: each said once, re-runs quiet."""

from __future__ import annotations

from pathlib import Path

from pytest_xlatune.cell.load import load_cell
from pytest_xlatune.engine.milestones import Milestones
from pytest_xlatune.report.files import Output
from tests.cells import cell_yaml

BETTER = {"xlatune_direction": "better", "xlatune_tgs": 1100.0, "xlatune_delta_pct": 10.0}


def test_each_milestone_once_and_reruns_bring_no_positive_result(tmp_path: Path) -> None:
    path = tmp_path / "m.yml"
    path.write_text(cell_yaml("m", ("a", "--xla_fake_tgs=1100")))
    cell, says = load_cell(path), Milestones()
    first = says.after_item(cell, "wave1::baseline[default]", {}, 1, 0)
    assert first == ["m FSDP=8 (m.yml): xla-tuning sweep started; first item wave1::baseline[default]"]
    assert says.after_item(cell, "wave2::a[default]", BETTER, 2, 0)[0].startswith(
        "m FSDP=8 (m.yml): positive result: wave2::a[default] 1100.0 TGS"
    )
    assert says.after_item(cell, "wave2::a[default]", BETTER, 3, 0) == []  # its report again
    assert says.after_item(cell, "evidence2::winner[default]", BETTER, 3, 0, rerun=True) == []
    assert says.after_item(cell, "wave2::b[default]", {**BETTER, "xlatune_shared": "wave2::a[default]"}, 3, 0) == []
    assert says.after_item(cell, "wave2::c[default]", {**BETTER, "xlatune_reused": True}, 3, 0) == []
    (mid,) = says.after_item(cell, "wave2::d[default]", {}, 4, 8)
    assert mid.endswith("mid-point: 4 of 8 items done; better so far: wave2::a[default]")
    assert says.after_item(cell, "wave2::e[default]", {}, 5, 8) == []
    written = [
        Output(tmp_path / "m-tuning.md", "tuning report", True),
        Output(tmp_path / "x-tuning.md", "t", True),
        Output(tmp_path / "m-big-tuning.md", "t", True),  # a cell whose model tag begins with "m-"
        Output(tmp_path / "m.lock.json", "recipe lock", True),
        Output(tmp_path / "m.lock.json.bak", "t", True),
    ]
    final = says.final(cell, 5, written, tmp_path, tmp_path)
    assert "sweep finished: 5 item(s) done this session (run, reused or skipped); " in final and "m-tuning.md" in final
    assert "m.lock.json" in final and "m.lock.json.bak" not in final
    assert "x-tuning.md" not in final and "m-big-tuning.md" not in final  # other cells' reports
