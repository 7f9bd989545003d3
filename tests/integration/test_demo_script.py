"""scripts/demo.sh (the README's first command): exit 0 when the designed failure is the only one.

Runs the real script on the real demo cell with a selection, so it takes seconds; every output
goes to a temporary directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.fixtures_infra import REPO

pytestmark = [pytest.mark.jax]


def demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XLATUNE_VENV": sys.prefix, "XLATUNE_DEMO_JUNIT": str(tmp_path / "junit.xml")}
    return subprocess.run(
        [str(REPO / "scripts" / "demo.sh"), f"--xlatune-store={tmp_path / 'store'}",
         f"--xlatune-report-dir={tmp_path}", f"--html={tmp_path / 'report.html'}", *args],
        capture_output=True, text=True, env=env, timeout=600, check=False)


def test_the_stale_flag_failing_on_purpose_still_ends_the_demo_with_0(tmp_path: Path) -> None:
    proc = demo(tmp_path, "-k", "stale_flag")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "wave4::stale_flag[default] FAILED" in proc.stdout
    assert "demo: done. wave4::stale_flag failed on purpose" in proc.stdout
    assert (tmp_path / "report.html").exists() and (tmp_path / "demo-tuning.md").exists()


def test_any_other_failure_ends_the_demo_with_pytests_code(tmp_path: Path) -> None:
    proc = demo(tmp_path, "-k", "wave1 and baseline and not r2", "--xlatune-python=/bin/false")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "wave1::baseline[default] FAILED" in proc.stdout
    assert "demo: done" not in proc.stdout
