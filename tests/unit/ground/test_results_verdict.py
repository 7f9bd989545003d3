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


def test_run_kind_round_trips_through_the_stored_json_unchanged() -> None:
    """JobResult.kind is a RunKind; the store keeps writing (and reading) its plain value."""
    import json

    from pytest_xlatune.results import JobResult, RunKind

    result = JobResult(
        key="k",
        item="p",
        wave="wave2",
        profile="p",
        config_tag="t",
        kind="profile",
        job_id="7",
        verdict=Verdict.SUCCESS,
        tgs=1.0,
    )
    assert result.kind is RunKind.PROFILE
    stored = json.loads(json.dumps(result.to_dict()))
    assert stored["kind"] == "profile" and type(stored["kind"]) is str
    assert JobResult.from_dict(stored) == result
    assert f"{result.kind}" == str(result.kind) == "profile"  # as before in messages and templates
