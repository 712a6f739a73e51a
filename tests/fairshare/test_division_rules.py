"""KAI's fair-share division (its proportion plugin's resource division), one rule per test, computed by hand.

Every example divides GPUs; the divider runs the same code for cpu and memory.
"""

from __future__ import annotations

import pytest

from tests.fairshare.division_helpers import Q, gpu_shares

# ------------------------------------------------------------------ deserved phase


def test_the_deserved_share_is_the_quota_capped_by_what_the_queue_requests() -> None:
    shares, remaining = gpu_shares([Q("a", quota=4, request=3), Q("b", quota=4, request=10, weight=0)], total=10)
    assert shares == {"a": 3, "b": 4}
    assert remaining == 3


def test_a_limit_below_the_quota_caps_the_deserved_share() -> None:
    shares, _ = gpu_shares([Q("a", quota=6, limit=2, request=10)], total=10)
    assert shares == {"a": 2}


def test_quotas_that_add_up_to_more_than_the_total_are_not_scaled_down() -> None:
    shares, remaining = gpu_shares([Q("a", quota=8, request=8), Q("b", quota=6, request=6)], total=10)
    assert shares == {"a": 8, "b": 6}
    assert remaining == 0


def test_quota_minus_one_deserves_everything_requested_up_to_the_total() -> None:
    shares, _ = gpu_shares([Q("a", quota=-1, request=7, weight=0), Q("b", request=5)], total=10)
    assert shares == {"a": 7, "b": 3}
    shares, _ = gpu_shares([Q("a", quota=-1, request=30)], total=10)
    assert shares == {"a": 10}


def test_queue_priority_does_not_matter_for_the_deserved_share() -> None:
    shares, _ = gpu_shares([Q("vip", priority=200, request=10), Q("plain", quota=6, request=10)], total=10)
    assert shares == {"plain": 6, "vip": 4}


# ------------------------------------------------------------------ over-quota phase


def test_surplus_is_split_by_over_quota_weight() -> None:
    shares, _ = gpu_shares([Q("a", weight=2, request=100), Q("b", weight=1, request=100)], total=9)
    assert shares == {"a": 6, "b": 3}


def test_surplus_is_handed_out_in_whole_units_then_the_remainder_by_largest_fraction() -> None:
    # 10 by 2:1 is 6.67 and 3.33: whole units 6 and 3, the last unit to the larger fraction (a).
    shares, remaining = gpu_shares([Q("a", weight=2, request=100), Q("b", weight=1, request=100)], total=10)
    assert shares == {"a": 7, "b": 3}
    assert remaining == 0


def test_what_a_satisfied_queue_does_not_take_goes_round_again() -> None:
    shares, _ = gpu_shares([Q("small", request=2), Q("big", request=100)], total=10)
    assert shares == {"small": 2, "big": 8}


def test_a_higher_priority_queue_takes_surplus_before_a_lower_one() -> None:
    shares, _ = gpu_shares([Q("high", priority=200, request=7), Q("low", priority=100, request=10)], total=10)
    assert shares == {"high": 7, "low": 3}
    shares, _ = gpu_shares([Q("high", priority=100, request=7), Q("low", priority=100, request=10)], total=10)
    assert shares == {"high": 5, "low": 5}


def test_priority_beats_weight() -> None:
    # The deep-dive doc's example: priority 2 with weight 1 is served before priority 1 with weight 100.
    shares, _ = gpu_shares(
        [Q("p2", priority=2, weight=1, request=6), Q("p1", priority=1, weight=100, request=6)], total=8
    )
    assert shares == {"p2": 6, "p1": 2}


def test_sub_unit_parts_of_a_higher_bucket_flow_on_to_the_next_bucket() -> None:
    # Three high-priority queues would each get 2/3 of a GPU: no whole unit, so the rounds of the
    # lower bucket take both GPUs before remainders are handed out (KAI's order of phases).
    queues = [Q(n, priority=200, request=10, created=i) for i, n in enumerate("abc")]
    shares, _ = gpu_shares([*queues, Q("low", priority=100, request=10)], total=2)
    assert shares == {"a": 0, "b": 0, "c": 0, "low": 2}


def test_weight_zero_gets_nothing_over_its_quota_even_from_idle_capacity() -> None:
    shares, remaining = gpu_shares([Q("a", quota=2, weight=0, request=10), Q("b", request=3)], total=10)
    assert shares == {"a": 2, "b": 3}
    assert remaining == 5


def test_a_limit_caps_the_over_quota_share_and_the_rest_goes_to_others() -> None:
    shares, _ = gpu_shares([Q("capped", limit=3, request=10), Q("other", request=10)], total=10)
    assert shares == {"capped": 3, "other": 7}


# ------------------------------------------------------------------ leftover phase


def test_the_largest_remainder_wins_the_leftover_unit_over_a_larger_weight() -> None:
    # Parts 0.67 and 1.33: b gets 1 in the round; the leftover unit goes to a (0.67 > 0.33).
    shares, _ = gpu_shares([Q("a", weight=1, request=10), Q("b", weight=2, request=10)], total=2)
    assert shares == {"a": 1, "b": 1}


def test_equal_remainders_go_to_the_older_queue_first() -> None:
    shares, _ = gpu_shares([Q("young", created=5, request=10), Q("old", created=1, request=10)], total=1)
    assert shares == {"old": 1, "young": 0}
    shares, _ = gpu_shares([Q(n, created=i, request=10) for i, n in enumerate(["c", "a", "b"])], total=10)
    assert shares == {"c": 4, "a": 3, "b": 3}


def test_equal_remainders_and_creation_times_go_by_name() -> None:
    shares, _ = gpu_shares([Q("beta", request=10), Q("alpha", request=10)], total=1)
    assert shares == {"alpha": 1, "beta": 0}


def test_a_leftover_unit_never_lifts_a_queue_above_its_request() -> None:
    # kai-ray's documented difference from KAI: a asks 1.8 and gets 1 in the round; KAI's leftover
    # phase would add a whole unit (2.0); kai-ray adds 0.8 and the last 0.2 goes to b.
    shares, remaining = gpu_shares([Q("a", request=1.8, created=0), Q("b", request=1.8, created=1)], total=3)
    assert shares == pytest.approx({"a": 1.8, "b": 1.2})
    assert remaining == pytest.approx(0)


# ------------------------------------------------------------------ hierarchy


def test_a_parents_fair_share_is_divided_among_its_children() -> None:
    queues = [
        Q("d1", quota=6),
        Q("d2", quota=4),
        Q("t1", parent="d1", quota=2, request=8, created=1),
        Q("t2", parent="d1", quota=2, request=8, created=2),
        Q("t3", parent="d2", quota=4, request=1),
    ]
    shares, remaining = gpu_shares(queues, total=10)
    # Top: d1 6 + surplus 3 (d2 asks only 1). Inside d1: quotas 2+2, surplus 5 as 2+2, the odd unit to t1.
    assert shares == {"d1": 9, "d2": 1, "t1": 5, "t2": 4, "t3": 1}
    assert remaining == 0


def test_three_levels_are_divided_level_by_level() -> None:
    queues = [
        Q("org", quota=-1),
        Q("dept-a", parent="org", quota=8),
        Q("dept-b", parent="org"),
        Q("a1", parent="dept-a", quota=4, request=10),
        Q("a2", parent="dept-a", request=2),
        Q("b1", parent="dept-b", request=6),
    ]
    shares, _ = gpu_shares(queues, total=12)
    # org deserves all 12; dept-a 8 + 2 of the 4 spare, dept-b 2; a2's unused part goes round to a1.
    assert shares == {"org": 12, "dept-a": 10, "dept-b": 2, "a1": 8, "a2": 2, "b1": 2}


def test_children_never_share_more_than_their_parent_got() -> None:
    queues = [Q("parent", quota=3, weight=0), Q("c1", parent="parent", request=5), Q("c2", parent="parent", request=5)]
    shares, remaining = gpu_shares(queues, total=10)
    assert shares["parent"] == 3 and shares["c1"] + shares["c2"] == 3
    assert remaining == 7


# ------------------------------------------------------------------ time-based fair share


def test_with_k_zero_usage_is_ignored() -> None:
    shares, _ = gpu_shares([Q("busy", usage=0.5, request=100), Q("idle", request=100)], total=10, k_value=0)
    assert shares == {"busy": 5, "idle": 5}


@pytest.mark.parametrize(
    ("usage", "busy", "idle"),
    [
        (0.0, 5, 5),  # w = nW + k*(nW - 0): both 1.0, an even split
        (0.5, 3, 7),  # w = 0.5 and 1.0: parts 3.33 / 6.67 -> 3 / 6, the odd unit to idle (.67 > .33)
        (0.8, 2, 8),  # w = 0.2 and 1.0: parts 1.67 / 8.33 -> 1 / 8, the odd unit to busy (.67 > .33)
        (2.0, 0, 10),  # w = max(0, 0.5 + (0.5 - 2)) = 0: busy gets no surplus at all
    ],
)
def test_historical_usage_shrinks_the_over_quota_weight(usage: float, busy: float, idle: float) -> None:
    shares, _ = gpu_shares([Q("busy", usage=usage, request=100), Q("idle", request=100)], total=10, k_value=1)
    assert shares == {"busy": busy, "idle": idle}


def test_usage_does_not_touch_the_deserved_share() -> None:
    shares, _ = gpu_shares([Q("busy", quota=4, usage=5.0, request=100), Q("idle", request=100)], total=10, k_value=1)
    assert shares == {"busy": 4, "idle": 6}
