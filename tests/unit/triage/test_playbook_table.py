"""The playbook table: every rule, retry budgets, in-a-row counting, stop triggers, overrides."""

from __future__ import annotations

import fnmatch

import pytest

from pytest_xlatune.results import Verdict
from pytest_xlatune.triage.diagnosis import Diagnosis, FailureClass, MemoryFigures
from pytest_xlatune.triage.hang import HangPhase
from pytest_xlatune.triage.playbook import (
    DEFAULT_PLAYBOOK,
    Decision,
    Playbook,
    Remedy,
    StopOn,
    SweepCounters,
    decide,
    incident,
)
from pytest_xlatune.triage.playbook_overrides import PolicyError, playbook_from_mapping, playbook_from_text

F = FailureClass


def diag(failure: FailureClass, reason: str = "", **kw: object) -> Diagnosis:
    return Diagnosis(failure, Verdict.FAILED, reason or f"a {failure.value}", **kw)  # type: ignore[arg-type]


def test_every_class_has_a_row() -> None:
    assert set(DEFAULT_PLAYBOOK.rules) == set(FailureClass)
    table = DEFAULT_PLAYBOOK.markdown()
    for failure in FailureClass:
        assert f"| {failure.value} |" in table


@pytest.mark.parametrize(
    ("failure", "action"),
    [
        (F.SUCCESS, Remedy.COUNT_AS_SUCCESS),
        (F.SOFT_SUCCESS, Remedy.COUNT_AS_SUCCESS),
        (F.OOM, Remedy.XFAIL_ITEM),
        (F.UNKNOWN_FLAG, Remedy.FAIL_ITEM),
        (F.XLA_COMPILE_FAIL, Remedy.FAIL_ITEM),
        (F.PYTHON_EXCEPTION, Remedy.FAIL_ITEM),
        (F.CANCELLED, Remedy.FAIL_ITEM),
        (F.RCCL_INIT_FLAKE, Remedy.RETRY_SAME_NODELIST),
        (F.COORDINATION_TIMEOUT, Remedy.RETRY_SAME_NODELIST),
        (F.HEARTBEAT_TIMEOUT, Remedy.RETRY_SAME_NODELIST),
        (F.NCCL_TIMEOUT, Remedy.RETRY_SAME_NODELIST),
        (F.GPU_RUNTIME_ERROR, Remedy.RETRY_SAME_NODELIST),
        (F.NIC_FAULT, Remedy.RETRY_SAME_NODELIST),
        (F.HANG, Remedy.RETRY_SAME_NODELIST),
        (F.UNKNOWN, Remedy.RETRY_SAME_NODELIST),
        (F.NODE_FAIL, Remedy.RESUME_NODE_THEN_RETRY),
        (F.NODE_DOWN, Remedy.RESUME_NODE_THEN_RETRY),
        (F.CONTROLLER_UNREACHABLE, Remedy.BACKOFF_RETRY),
    ],
)
def test_first_occurrence_of_each_class(failure: FailureClass, action: Remedy) -> None:
    decision = decide([], diag(failure, node="gpu-a08"))
    assert decision.action is action
    assert decision.stop_reason == ""


def test_oom_is_never_retried_and_the_xfail_reason_carries_the_figures() -> None:
    d = Diagnosis(
        F.OOM,
        Verdict.OOM,
        "out of memory (allocating 8.00GiB, Total memory 287.98GiB, Temp 241.50GiB): ...",
        memory=MemoryFigures("8.00GiB", "287.98GiB", "241.50GiB"),
    )
    decision = decide([], d)
    assert decision.action is Remedy.XFAIL_ITEM
    assert "Total memory 287.98GiB" in decision.reason and "never retried" in decision.reason


def test_a_full_disk_stops_the_sweep_at_once_saying_where() -> None:
    d = Diagnosis(
        F.DISK_FULL,
        Verdict.DISK_FULL,
        "disk full or failing (not an OOM): free space "
        "where this line says: ... RESOURCE_EXHAUSTED: /scratch/dump/m.txt; No space left on device",
    )
    decision = decide([], d)
    assert decision.action is Remedy.STOP and "/scratch/dump/m.txt" in decision.stop_reason
    assert decision.stop_reason.startswith("disk_full: ") and "free space" in decision.recovery
    assert DEFAULT_PLAYBOOK.cancel_on_sight(F.DISK_FULL)


def test_a_hang_before_step0_arrives_as_oom_and_is_not_retried() -> None:
    d = Diagnosis(F.OOM, Verdict.OOM, "silent OOM", phase=HangPhase.BEFORE_STEP0)
    assert decide([F.HANG], d).action is Remedy.XFAIL_ITEM


def test_unknown_flag_fails_at_once_naming_the_flag_and_is_cancelled_on_sight() -> None:
    d = Diagnosis(F.UNKNOWN_FLAG, Verdict.UNKNOWN_FLAG, "XLA rejected flag --xla_foo: ...", flag="--xla_foo")
    decision = decide([], d)
    assert decision.action is Remedy.FAIL_ITEM and "--xla_foo" in decision.reason
    assert DEFAULT_PLAYBOOK.cancel_on_sight(F.UNKNOWN_FLAG)
    assert not DEFAULT_PLAYBOOK.cancel_on_sight(F.RCCL_INIT_FLAKE)  # wait for the hang detector


def test_rccl_flake_retries_twice_then_drops_the_item_as_infra_flake() -> None:
    flake = diag(F.RCCL_INIT_FLAKE)
    first, second = decide([], flake), decide([F.RCCL_INIT_FLAKE], flake)
    assert (first.action, first.retry) == (Remedy.RETRY_SAME_NODELIST, 1)
    assert (second.action, second.retry) == (Remedy.RETRY_SAME_NODELIST, 2)
    third = decide([F.RCCL_INIT_FLAKE, F.RCCL_INIT_FLAKE], flake)
    assert third.action is Remedy.DROP_INFRA_FLAKE
    assert "3 × rccl_init_flake in a row" in third.reason and third.stop_reason == ""


def test_coordination_timeout_retries_once_and_stops_the_sweep_on_the_second_in_a_row() -> None:
    d = diag(F.COORDINATION_TIMEOUT, "JAX coordination service timed out: DEADLINE_EXCEEDED")
    assert decide([], d).action is Remedy.RETRY_SAME_NODELIST
    stop = decide([F.COORDINATION_TIMEOUT], d)
    assert stop.action is Remedy.STOP
    assert stop.stop_reason.startswith("2 × coordination_timeout in a row")
    assert DEFAULT_PLAYBOOK.cancel_on_sight(F.COORDINATION_TIMEOUT)


def test_in_a_row_counting_resets_on_success() -> None:
    d = diag(F.COORDINATION_TIMEOUT)
    assert decide([F.COORDINATION_TIMEOUT, F.SUCCESS], d).action is Remedy.RETRY_SAME_NODELIST
    flake = diag(F.RCCL_INIT_FLAKE)
    history = [F.RCCL_INIT_FLAKE, F.RCCL_INIT_FLAKE, F.SOFT_SUCCESS]
    assert decide(history, flake).retry == 1


def test_in_a_row_counting_resets_on_another_class() -> None:
    d = diag(F.COORDINATION_TIMEOUT)
    assert decide([F.COORDINATION_TIMEOUT, F.HANG], d).action is not Remedy.STOP


def test_at_most_two_retries_per_job_across_classes() -> None:
    decision = decide([F.RCCL_INIT_FLAKE, F.HANG], diag(F.NCCL_TIMEOUT))
    assert decision.action is Remedy.FAIL_ITEM
    assert "retry budget spent: 2 retries" in decision.reason
    assert "rccl_init_flake, hang, nccl_timeout" in decision.reason


def test_a_class_retried_once_fails_the_item_on_its_second_in_a_row() -> None:
    decision = decide([F.HANG], diag(F.HANG))
    assert decision.action is Remedy.FAIL_ITEM and "2 × hang in a row" in decision.reason


def test_history_accepts_diagnoses() -> None:
    history = [diag(F.RCCL_INIT_FLAKE), diag(F.RCCL_INIT_FLAKE)]
    assert decide(history, diag(F.RCCL_INIT_FLAKE)).action is Remedy.DROP_INFRA_FLAKE


def test_gpu_runtime_error_waits_before_the_retry_and_stops_when_the_check_finds_a_fault() -> None:
    d = diag(F.GPU_RUNTIME_ERROR, node="gpu-a10")
    retry = decide([], d)
    assert retry.action is Remedy.RETRY_SAME_NODELIST and retry.wait_s == 90 and "rocm-smi" in retry.recovery
    stop = decide([], d, SweepCounters(recovery_failed="dmesg: amdgpu 0000:c1:00.0: GPU reset begin"))
    assert stop.action is Remedy.STOP
    assert "gpu-a10" in stop.stop_reason and "GPU reset" in stop.stop_reason
    assert stop.failing_nodes == ("gpu-a10",)


def test_nic_fault_stops_when_the_reset_does_not_bring_the_nics_back() -> None:
    d = diag(F.NIC_FAULT, node="gpu-a09")
    assert decide([], d).action is Remedy.RETRY_SAME_NODELIST
    stop = decide([], d, SweepCounters(recovery_failed="ibstat: 6 of 8 NICs Active"))
    assert stop.action is Remedy.STOP and "6 of 8" in stop.stop_reason


def test_drained_node_is_resumed_and_two_failed_resumes_stop_the_sweep() -> None:
    down = incident(F.NODE_DOWN, "gpu-a08 is drained (Kill task failed)", node="gpu-a08")
    counters = SweepCounters()
    assert decide([], down, counters).action is Remedy.RESUME_NODE_THEN_RETRY
    counters = counters.resume_failed("gpu-a08")
    assert decide([], down, counters).action is Remedy.RESUME_NODE_THEN_RETRY
    counters = counters.resume_failed("gpu-a08")
    stop = decide([], down, counters)
    assert stop.action is Remedy.STOP
    assert stop.stop_reason == "gpu-a08 stays drained/down after 2 RESUME attempts"
    assert stop.failing_nodes == ("gpu-a08",) and "RESUME" in stop.recovery
    other = incident(F.NODE_DOWN, "gpu-a07 is down", node="gpu-a07")
    assert decide([], other, counters).action is Remedy.RESUME_NODE_THEN_RETRY  # per node


def test_without_permission_to_resume_a_down_node_stops_the_sweep() -> None:
    playbook = playbook_from_mapping({"resume_permitted": False})
    stop = decide([], incident(F.NODE_DOWN, "drained", node="gpu-a08"), playbook=playbook)
    assert stop.action is Remedy.STOP and "never changed" in stop.stop_reason


def test_node_fail_of_a_second_node_in_one_wave_stops_the_sweep() -> None:
    d = diag(F.NODE_FAIL, node="gpu-a08")
    assert decide([], d, SweepCounters().node_failed("gpu-a08")).action is Remedy.RESUME_NODE_THEN_RETRY
    counters = SweepCounters().node_failed("gpu-a07")
    stop = decide([], d, counters)
    assert stop.action is Remedy.STOP and "gpu-a07, gpu-a08" in stop.stop_reason
    assert stop.failing_nodes == ("gpu-a07", "gpu-a08")
    assert decide([], d, counters.new_wave()).action is Remedy.RESUME_NODE_THEN_RETRY


def test_controller_unreachable_backs_off_and_stops_after_fifteen_minutes() -> None:
    d = incident(F.CONTROLLER_UNREACHABLE, "slurm_load_jobs error: Connection refused")
    backoff = decide([], d, SweepCounters(controller_down_s=14 * 60))
    assert (backoff.action, backoff.wait_s, backoff.retry) == (Remedy.BACKOFF_RETRY, 300, 0)
    assert decide([], d, SweepCounters(controller_down_s=15 * 60)).action is Remedy.BACKOFF_RETRY
    stop = decide([], d, SweepCounters(controller_down_s=15 * 60 + 1))
    assert stop.action is Remedy.STOP and "15 min" in stop.stop_reason
    # controller trouble is no attempt of the item: it spends no retry budget
    assert decide([F.CONTROLLER_UNREACHABLE] * 5, diag(F.HANG)).action is Remedy.RETRY_SAME_NODELIST


def test_controller_limit_is_configurable() -> None:
    playbook = playbook_from_mapping({"controller_unreachable": {"stop_after": 30}})
    d = incident(F.CONTROLLER_UNREACHABLE, "down")
    assert decide([], d, SweepCounters(controller_down_s=20 * 60), playbook).action is Remedy.BACKOFF_RETRY
    assert decide([], d, SweepCounters(controller_down_s=31 * 60), playbook).action is Remedy.STOP


def test_decision_is_a_value() -> None:
    assert decide([], diag(F.HANG)) == decide([], diag(F.HANG))
    assert isinstance(decide([], diag(F.HANG)), Decision)


# ---- overrides --------------------------------------------------------------------------


def test_the_brief_example_override_applies() -> None:
    playbook = playbook_from_mapping({"rccl_init_flake": {"retries": 3}, "coordination_timeout": {"stop_after": 2}})
    flake = diag(F.RCCL_INIT_FLAKE)
    # a class's own retries may exceed the job-wide cap of 2: the 3rd flake gets the 3rd retry
    third = decide([F.RCCL_INIT_FLAKE] * 2, flake, playbook=playbook)
    assert (third.action, third.retry) == (Remedy.RETRY_SAME_NODELIST, 3)
    assert decide([F.RCCL_INIT_FLAKE] * 3, flake, playbook=playbook).action is Remedy.DROP_INFRA_FLAKE
    assert playbook.rule(F.COORDINATION_TIMEOUT) == DEFAULT_PLAYBOOK.rule(F.COORDINATION_TIMEOUT)
    assert playbook.rule(F.OOM) == DEFAULT_PLAYBOOK.rule(F.OOM)


def test_stop_after_alone_sets_an_in_a_row_trigger_and_the_retries_up_to_it() -> None:
    playbook = playbook_from_mapping({"coordination_timeout": {"stop_after": 3}, "nccl_timeout": {"stop_after": 2}})
    assert playbook.rule(F.COORDINATION_TIMEOUT).retries == 2
    assert (
        decide([F.COORDINATION_TIMEOUT], diag(F.COORDINATION_TIMEOUT), playbook=playbook).action
        is Remedy.RETRY_SAME_NODELIST
    )
    assert decide([F.COORDINATION_TIMEOUT] * 2, diag(F.COORDINATION_TIMEOUT), playbook=playbook).action is Remedy.STOP
    assert playbook.rule(F.NCCL_TIMEOUT).stop_on is StopOn.IN_A_ROW
    assert decide([F.NCCL_TIMEOUT], diag(F.NCCL_TIMEOUT), playbook=playbook).action is Remedy.STOP


def test_overrides_change_actions_and_switch_a_trigger_off() -> None:
    playbook = playbook_from_mapping(
        {
            "oom": {"action": "fail_item"},
            "coordination_timeout": {"stop_after": None},
            "hang": {"exhausted": "stop"},
            "max_retries_per_job": 4,
        }
    )
    assert decide([], diag(F.OOM), playbook=playbook).action is Remedy.FAIL_ITEM
    assert decide([F.COORDINATION_TIMEOUT], diag(F.COORDINATION_TIMEOUT), playbook=playbook).action is Remedy.FAIL_ITEM
    stop = decide([F.HANG], diag(F.HANG), playbook=playbook)
    assert stop.action is Remedy.STOP and stop.stop_reason.startswith("2 × hang in a row")
    assert playbook.max_retries_per_job == 4 and DEFAULT_PLAYBOOK.max_retries_per_job == 2


def test_overrides_layer_on_a_base_playbook() -> None:
    ini = playbook_from_text('{"rccl_init_flake": {"retries": 1}}')
    cell = playbook_from_mapping({"hang": {"retries": 0}}, base=ini)
    assert (cell.rule(F.RCCL_INIT_FLAKE).retries, cell.rule(F.HANG).retries) == (1, 0)


def test_ini_text_is_yaml_or_json() -> None:
    yaml_text = "rccl_init_flake:\n  retries: 3\nresume_permitted: false\n"
    json_text = '{"rccl_init_flake": {"retries": 3}, "resume_permitted": false}'
    assert playbook_from_text(yaml_text) == playbook_from_text(json_text)
    assert playbook_from_text("  ") is DEFAULT_PLAYBOOK


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"rccl_flake": {"retries": 3}}, "policy.rccl_flake: unknown key; *did you mean 'rccl_init_flake'?"),
        ({"oom": {"retries": "three"}}, "policy.oom.retries: expected an integer ≥ 0, got 'three'"),
        ({"oom": {"retries": True}}, "policy.oom.retries: expected an integer ≥ 0, got True"),
        ({"oom": {"retries": -1}}, "policy.oom.retries: expected an integer ≥ 0, got -1"),
        ({"hang": {"action": "explode"}}, "policy.hang.action: expected one of retry_same_nodelist, *got 'explode'"),
        ({"hang": {"exhausted": "later"}}, "policy.hang.exhausted: expected one of *got 'later'"),
        ({"hang": {"stop_on": "sometimes"}}, "policy.hang.stop_on: expected one of never, *got 'sometimes'"),
        ({"hang": {"stop_after": 0}}, "policy.hang.stop_after: expected a number > 0, got 0"),
        ({"hang": {"stop_after": 1.5}}, "policy.hang.stop_after: expected a whole count, got 1.5"),
        ({"hang": {"stop_on": "in_a_row"}}, "policy.hang.stop_after: stop_on in_a_row needs a number"),
        ({"hang": {"wait_s": -5}}, "policy.hang.wait_s: expected a number ≥ 0, got -5"),
        ({"hang": {"cancel_on_sight": "yes"}}, "policy.hang.cancel_on_sight: expected true or false, got 'yes'"),
        ({"hang": {"retry": 1}}, "policy.hang.retry: unknown key; expected one of action, retries, *"),
        ({"hang": 3}, "policy.hang: expected a mapping with keys *got 3"),
        (
            {"coordination_timeout": {"retries": 1, "stop_after": 3}},
            "policy.coordination_timeout.stop_after: 3 in a row is never reached with retries 1 *raise retries to 2",
        ),
        ({"max_retries_per_job": "2"}, "policy.max_retries_per_job: expected an integer ≥ 0, got '2'"),
        ({"max_failed_nodes_per_wave": 0}, "policy.max_failed_nodes_per_wave: expected an integer ≥ 1, got 0"),
        ({"resume_permitted": "no"}, "policy.resume_permitted: expected true or false, got 'no'"),
        (["rccl_init_flake"], "policy: expected a mapping of failure class → settings, got list"),
    ],
)
def test_bad_overrides_fail_with_one_line_naming_the_key(mapping: object, message: str) -> None:
    with pytest.raises(PolicyError) as info:
        playbook_from_mapping(mapping)
    text = str(info.value)
    assert "\n" not in text
    assert fnmatch.fnmatchcase(text, message), text


def test_bad_ini_text_names_the_option() -> None:
    expected = r"^xlatune_policy:1: not valid YAML/JSON: expected the node content, but found '<stream end>' "
    with pytest.raises(PolicyError, match=expected + r"\(while parsing a flow node\)$"):
        playbook_from_text("rccl_init_flake: {retries: [")
    with pytest.raises(PolicyError, match=r"^xlatune_policy\.hang\.retries: expected an integer"):
        playbook_from_text("hang: {retries: many}")


def test_playbook_is_frozen() -> None:
    with pytest.raises(AttributeError):
        DEFAULT_PLAYBOOK.max_retries_per_job = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        DEFAULT_PLAYBOOK.rules[F.OOM] = DEFAULT_PLAYBOOK.rule(F.HANG)  # type: ignore[index]
    assert isinstance(Playbook(), Playbook)
