"""adaptive.drift: control points, the baseline's level between and after them, the drift rate and report."""

from __future__ import annotations

import math

import pytest

from pytest_xlatune.adaptive import Role
from pytest_xlatune.adaptive.drift import Model, Point, points, prior_rate, rate, report
from tests.adaptive_driver import observation

H = 3600.0


def test_back_to_back_controls_are_one_point_and_a_candidate_between_splits_them() -> None:
    runs = [
        observation("1", "baseline", "B", Role.BASELINE, 0.0, [1000.0] * 10),
        observation("2", "baseline-r2", "B", Role.BASELINE, 600.0, [1010.0] * 10),
        observation("3", "evidence", "E", Role.EVIDENCE, 1200.0, [900.0] * 6),  # never a point
        observation("4", "p1", "p1", Role.PROFILE, 1800.0, [1100.0] * 10),
        observation("5", "baseline", "B", Role.CONTROL, 2400.0, [1020.0] * 10),
    ]
    pts = points(runs, now=5000.0)
    assert [p.runs for p in pts] == [("1", "2"), ("5",)]
    assert pts[0].level == pytest.approx((math.log(1000) + math.log(1010)) / 2)
    assert pts[0].time == pytest.approx(600.0)  # the mean of the two runs' midpoints


def noiseless(*levels_at: tuple[float, float], walk: float = 1e-6) -> Model:
    return Model(tuple(Point(t, lv, (str(i),)) for i, (t, lv) in enumerate(levels_at)), walk, 1e-9)


def test_between_two_noiseless_controls_the_level_is_their_straight_line() -> None:
    model = noiseless((0.0, 0.0), (4 * H, 0.04))
    reference = model.reference([1 * H, 2 * H])
    assert reference is not None
    (quarter, half), _ = reference
    assert quarter == pytest.approx(0.01, abs=1e-6) and half == pytest.approx(0.02, abs=1e-6)


def test_after_the_last_noiseless_control_the_level_stays_and_its_uncertainty_grows() -> None:
    model = noiseless((0.0, 0.0), (4 * H, 0.04))
    near, far = model.reference([4.5 * H]), model.reference([8 * H])
    assert near is not None and far is not None
    assert near[0][0] == pytest.approx(0.04, abs=1e-6) and far[0][0] == pytest.approx(0.04, abs=1e-6)
    assert far[1] > near[1] > 0
    assert far[1] == pytest.approx(1e-6 * 4 * H, rel=1e-3)  # the walk's variance since the last point


def test_noisy_controls_without_drift_are_averaged_into_a_local_mean() -> None:
    pts = tuple(Point(t * H, lv, (str(t),)) for t, lv in ((0, 0.0), (2, 0.01), (4, 0.02)))
    reference = Model(pts, 1e-15, 0.01).reference([1 * H])
    assert reference is not None
    assert reference[0][0] == pytest.approx(0.01, abs=1e-4)
    assert reference[1] == pytest.approx(0.01**2 / 3, rel=1e-3)  # the mean of three runs' noise


def test_one_reference_for_several_runs_counts_their_shared_error_once() -> None:
    pts = (Point(0.0, 0.0, ("a",)),)
    model = Model(pts, 1e-15, 0.01)
    one, two = model.reference([H]), model.reference([H, 2 * H])
    assert one is not None and two is not None
    assert two[1] == pytest.approx(one[1])  # both runs are compared with the same control run


def test_the_rate_is_the_prior_unless_the_controls_move_beyond_the_noise() -> None:
    floor = prior_rate(0.25)
    still = (Point(0.0, 0.0, ("a", "b")), Point(2 * H, 0.004, ("c",)), Point(4 * H, -0.003, ("d",)))
    jump = (Point(0.0, 0.0, ("a", "b")), Point(2 * H, 0.04, ("c",)), Point(4 * H, 0.041, ("d",)))
    assert rate(still, 0.8, floor) == floor
    assert rate(jump, 0.8, floor) > 10 * floor


def test_the_report_says_whether_the_drift_is_beyond_the_noise() -> None:
    still = (Point(0.0, 0.0, ("a", "b")), Point(2 * H, 0.004, ("c",)))
    moved = (Point(0.0, math.log(1000), ("a", "b")), Point(2 * H, math.log(1050), ("c",)))
    assert not report(still, 0.8).significant
    drifted = report(moved, 0.8)
    assert drifted.significant and drifted.range_pct == pytest.approx(5.0)
    assert (
        "moved 5.00 %" in drifted.text() and "beyond the noise of back-to-back baseline runs, 0.80 %" in drifted.text()
    )
    # it names which noise it is tested against: not the verdicts' pooled one (a newcomer saw three)
    assert "the verdicts' intervals use the noise pooled over every group of identical settings" in drifted.text()
    assert "not measured" in report(moved[:1], 0.8).text()
    # The wave-1 pair's point is its runs' geometric mean, not the baseline's (arithmetic) figure:
    # 900 and 1100 are 994.99 → 1050; the line says which mean it shows.
    pair = (Point(0.0, (math.log(900) + math.log(1100)) / 2, ("a", "b")), Point(2 * H, math.log(1050), ("c",)))
    assert "(995.0 → 1050.0 TGS, each point the geometric mean of its runs)" in report(pair, 0.8).text()
