"""The cycle's time budget between its victim searches: an action keeps for the ones after it
what they are expected to need, not an even share each."""

from __future__ import annotations

import pytest

from coordinator.action_shares import MARGIN, ActionShares, ActionUse

BUDGET = 1.0


def test_actions_never_seen_get_even_shares() -> None:
    shares = ActionShares(BUDGET)
    assert shares.deadline(10.0, 10.9, ["reclaim", "preempt"]) == pytest.approx(10.3)
    assert shares.deadline(10.3, 10.9, ["preempt"]) == pytest.approx(10.6)
    assert shares.deadline(10.6, 10.9, []) == pytest.approx(10.9)


def test_an_action_that_needed_little_last_cycle_leaves_the_rest_to_the_one_before_it() -> None:
    shares = ActionShares(BUDGET)
    shares.last["preempt"] = ActionUse(seconds=0.01, cut_short=False)
    # reclaim may spend all but what preempt took last cycle and a margin
    assert shares.deadline(0.0, 0.9, ["preempt"]) == pytest.approx(0.9 - 0.01 - MARGIN * BUDGET)


def test_an_action_stopped_at_its_deadline_keeps_its_even_share() -> None:
    shares = ActionShares(BUDGET)
    shares.last["preempt"] = ActionUse(seconds=0.45, cut_short=True)
    assert shares.deadline(0.0, 0.9, ["preempt"]) == pytest.approx(0.45)


def test_an_action_keeps_no_more_than_an_even_share_and_the_running_one_no_less() -> None:
    shares = ActionShares(BUDGET)
    shares.last["reclaim"] = ActionUse(seconds=5.0, cut_short=False)  # a search past the budget
    shares.last["preempt"] = ActionUse(seconds=0.0, cut_short=False)
    deadline = shares.deadline(0.0, 0.9, ["reclaim", "preempt"])
    assert deadline == pytest.approx(0.9 - 0.3 - MARGIN * BUDGET)
    # past the session's deadline every share is empty: each action still runs its first job
    assert shares.deadline(1.0, 0.9, ["preempt"]) == pytest.approx(1.0)
