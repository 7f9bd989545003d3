"""Verdict spells every failure class a job can end with (same name and stored value), plus the sweep's words."""

from __future__ import annotations

from pytest_xlatune.results import _NOT_VERDICTS, SWEEP_VERDICTS, FailureClass, Verdict


def test_every_job_failure_class_is_a_verdict_of_the_same_name_and_value() -> None:
    classes = [(c.name, c.value) for c in FailureClass if c not in _NOT_VERDICTS]
    verdicts = [(v.name, v.value) for v in Verdict if v not in SWEEP_VERDICTS]
    assert verdicts == classes  # in the same order: reports list verdicts in this order


def test_the_incidents_and_unknown_are_no_verdicts() -> None:
    names = set(Verdict.__members__)
    assert not names & {c.name for c in _NOT_VERDICTS}
    assert {v.name for v in SWEEP_VERDICTS} == {"FAILED", "NO_STEPS", "INFRA_FLAKE", "STOPPED_EARLY"}


def test_measured_verdicts() -> None:
    assert {v for v in Verdict if v.measured} == {Verdict.SUCCESS, Verdict.SOFT_SUCCESS, Verdict.STOPPED_EARLY}
