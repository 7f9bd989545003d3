"""A failure class is added in one place: the playbook and the verdicts follow it, or a test says so."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from pytest_xlatune.results import Verdict
from pytest_xlatune.triage import playbook
from pytest_xlatune.triage.playbook import DEFAULT_RULES, Playbook
from pytest_xlatune.triage.signatures import FailureClass as F

# Seen by the poller or sinfo, or an unclassified failure: no verdict of their own.
NO_VERDICT = {F.UNKNOWN, F.NODE_DOWN, F.CONTROLLER_UNREACHABLE}


def test_every_failure_class_has_a_playbook_row() -> None:
    assert [c for c in F if c not in DEFAULT_RULES] == []


def test_every_job_failure_class_has_the_verdict_of_its_name() -> None:
    for failure in F:
        if failure not in NO_VERDICT:
            assert Verdict[failure.name].value == failure.value, failure


def test_a_class_without_a_row_acts_as_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        playbook, "DEFAULT_RULES", MappingProxyType({k: v for k, v in DEFAULT_RULES.items() if k is not F.OOM})
    )
    assert DEFAULT_RULES[F.OOM] != DEFAULT_RULES[F.UNKNOWN]
    assert Playbook(rules={}).rule(F.OOM) == DEFAULT_RULES[F.UNKNOWN]
