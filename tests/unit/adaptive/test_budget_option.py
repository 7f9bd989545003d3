"""--xlatune-budget: node-hours, queue hours or none; anything else is refused naming the forms."""

from __future__ import annotations

import argparse

import pytest

from pytest_xlatune.adaptive.values import Budget
from pytest_xlatune.options import budget_value


def test_node_hours_queue_hours_and_none() -> None:
    assert budget_value("2.5nh") == Budget(node_hours=2.5)  # the skill's 8 h of queue time stays
    assert budget_value(" 8H ") == Budget(queue_hours=8.0)
    assert budget_value("none") == Budget(queue_hours=None)


@pytest.mark.parametrize("text", ["8", "-1h", "0nh", "nanh", "infh", "two hours"])
def test_a_bad_budget_names_the_expected_forms(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"expected node-hours like 2.5nh, queue hours like 8h"):
        budget_value(text)
