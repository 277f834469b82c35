"""The receipt budget refuses before a step or call would pass the limit."""

from __future__ import annotations

import pytest

from proctor.core.budget import MAX_RUN_RECEIPTS, MAX_TREE_RECEIPTS, ReceiptBudget
from proctor.errors import RefusedCall


def test_reserve_up_to_the_limit_then_refuse() -> None:
    budget = ReceiptBudget(3)
    budget.reserve()
    budget.reserve(2)
    assert (budget.used, budget.remaining) == (3, 0)
    with pytest.raises(RefusedCall) as info:
        budget.reserve()
    assert info.value.code == "receipt_budget_exceeded"
    assert budget.used == 3  # a refused reservation reserves nothing


def test_default_is_the_run_ceiling_which_leaves_room_for_segments() -> None:
    budget = ReceiptBudget()
    budget.reserve(MAX_RUN_RECEIPTS)
    assert MAX_RUN_RECEIPTS * (1 + 1 / 1023) < MAX_TREE_RECEIPTS
    with pytest.raises(RefusedCall):
        budget.reserve(1)


@pytest.mark.parametrize("limit", [0, -1, MAX_RUN_RECEIPTS + 1])
def test_limits_outside_the_bound_are_refused(limit: int) -> None:
    with pytest.raises(ValueError):
        ReceiptBudget(limit)
