"""A damaged store end to end: one flipped TGS digit never becomes the recipe or the lock."""

from __future__ import annotations

import json
import stat

import pytest

from tests.cells import cell_yaml
from tests.conftest import FAKE

# Adaptive: the win `a` is locked once a control ran after its first run (before `b`).
CELL = cell_yaml("dmg", ("a", "--xla_fake_tgs=1100"), ("b", "--xla_fake_tgs=900"), step_sleep=0.01)


def test_a_flipped_tgs_digit_is_quarantined_and_the_item_runs_again(
    pytester: pytest.Pytester, fake_trainer_env: None
) -> None:
    cell = pytester.makefile(".yml", cell=CELL)
    pytester.runpytest(str(cell), *FAKE).assert_outcomes(passed=5)
    store = pytester.path / ".xlatune" / "cell.jsonl"
    lock = pytester.path / "cell.lock.json"
    assert stat.S_IMODE(lock.stat().st_mode) & 0o044 == 0o044  # readable as umask allows, not 0600
    stored = [json.loads(line) for line in store.read_text().splitlines()]
    winner = next(r for r in stored if r["event"] == "result" and r["profile"] == "a")
    lines = store.read_text().splitlines(keepends=True)
    at = stored.index(winner)
    flipped = json.dumps(winner["tgs"])
    assert lines[at].count(f'"tgs": {flipped}') == 1
    lines[at] = lines[at].replace(f'"tgs": {flipped}', f'"tgs": 9{flipped[1:]}')  # one digit of a's record
    store.write_text("".join(lines))
    rerun = pytester.runpytest(str(cell), *FAKE, "-rA")
    rerun.assert_outcomes(passed=5)
    out = rerun.stdout.str()
    assert out.count("was quarantined into") == 1
    assert (
        f"cell.jsonl:{stored.index(winner) + 1}: the result record of wave2::a[default] was quarantined "
        f"into {store}.quarantine (it fails its checksum); it is not used, and the item runs "
        "again"
    ) in out
    assert "9" + flipped[1:] not in lock.read_text()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    results = [json.loads(line) for line in store.read_text().splitlines()]
    assert [r["job_id"] for r in results if r["event"] == "result" and r["profile"] == "a"] != [
        winner["job_id"]
    ]  # it ran again
