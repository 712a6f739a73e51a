"""What queues do with their fair share, as KAI's proportion plugin does: allocatable share,
capacity checks and queue order."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from coordinator.fairshare import QueueSpec, QueueTree
from coordinator.queue_state import QueueState

Triple = tuple[float, float, float]
NOTHING: Triple = (0.0, 0.0, 0.0)
TOTAL: Triple = (16.0, 64_000.0, 512e9)


@dataclass
class QueueFacts:
    name: str
    parent: str | None = None
    priority: int = 100
    created: float = 0.0
    deserved: Triple = NOTHING
    limit: Triple = (-1.0, -1.0, -1.0)
    fair: Triple = NOTHING
    allocated: Triple = NOTHING  # this queue's own jobs; parents get their children's added
    allocated_np: Triple = NOTHING
    weight: Triple = field(default=(1.0, 1.0, 1.0))


def queue_state(*facts: QueueFacts, total: Triple = TOTAL) -> QueueState:
    tree = QueueTree.build(
        [QueueSpec(f.name, f.parent, f.priority, f.created, f.deserved, f.weight, f.limit) for f in facts]
    )
    by_name = {f.name: f for f in facts}

    def column(attribute: str) -> np.ndarray:
        return np.array([getattr(by_name[n], attribute) for n in tree.names], dtype=float).reshape(len(tree), 3)

    allocated, allocated_np = tree.roll_up(column("allocated")), tree.roll_up(column("allocated_np"))
    return QueueState(tree, column("fair"), allocated.copy(), allocated, allocated_np, np.array(total))


def allocatable(facts: QueueFacts) -> list[float]:
    state = queue_state(facts)
    return list(state.allocatable[0])


# ------------------------------------------------------------------ allocatable share


def test_allocatable_is_the_larger_of_quota_and_fair_share_within_the_limit() -> None:
    assert allocatable(QueueFacts("q", deserved=(4, 0, 0), fair=(6, 0, 0), limit=(10, -1, -1)))[0] == 6
    assert allocatable(QueueFacts("q", deserved=(4, 0, 0), fair=(2, 0, 0), limit=(10, -1, -1)))[0] == 4
    assert allocatable(QueueFacts("q", deserved=(4, 0, 0), fair=(8, 0, 0), limit=(5, -1, -1)))[0] == 5


def test_allocatable_of_an_unlimited_quota_is_the_limit() -> None:
    assert allocatable(QueueFacts("q", deserved=(-1, -1, 0), fair=(3, 5, 0), limit=(7, -1, -1)))[:2] == [7, -1]


# ------------------------------------------------------------------ capacity (OverLimit)


def test_a_job_that_would_pass_the_queue_limit_is_refused_with_the_numbers() -> None:
    state = queue_state(QueueFacts("q", limit=(4, -1, -1), allocated=(3, 0, 0)))
    verdict = state.check_capacity("q", (2, 0, 0), preemptible=True)
    assert not verdict.ok and verdict.reason == "OverLimit"
    assert "queue q would exceed its gpu limit: limit 4, allocated 3, requested 2" in verdict.message
    assert state.check_capacity("q", (1, 0, 0), preemptible=True).ok  # exactly at the limit is fine


def test_a_parent_limit_binds_the_whole_subtree() -> None:
    state = queue_state(
        QueueFacts("dept", limit=(4, -1, -1)),
        QueueFacts("busy", parent="dept", allocated=(3, 0, 0)),
        QueueFacts("new", parent="dept"),
    )
    verdict = state.check_capacity("new", (2, 0, 0), preemptible=True)
    assert not verdict.ok and verdict.reason == "OverLimit" and "queue dept" in verdict.message


def test_cpu_and_memory_limits_are_named_in_their_units() -> None:
    state = queue_state(QueueFacts("q", limit=(-1, 4000, 8e9), allocated=(0, 3000, 0)))
    cpu = state.check_capacity("q", (0, 2000, 0), preemptible=True)
    assert "cpu limit: limit 4 cores, allocated 3 cores, requested 2 cores" in cpu.message
    memory = state.check_capacity("q", (0, 0, 9e9), preemptible=True)
    assert "memory limit: limit 8 GB" in memory.message


def test_a_zero_limit_refuses_any_request_of_that_resource_only() -> None:
    state = queue_state(QueueFacts("q", limit=(0, -1, -1)))
    assert state.check_capacity("q", (0.5, 0, 0), preemptible=True).reason == "OverLimit"
    assert state.check_capacity("q", (0, 1000, 1e9), preemptible=True).ok


def test_minus_one_limit_and_quota_take_anything() -> None:
    state = queue_state(QueueFacts("q", deserved=(-1, -1, -1), allocated=(1000, 0, 0), allocated_np=(1000, 0, 0)))
    assert state.check_capacity("q", (1000, 1e6, 1e12), preemptible=True).ok
    assert state.check_capacity("q", (1000, 1e6, 1e12), preemptible=False).ok


# ------------------------------------------------------------------ capacity (non-preemptible quota)


def test_non_preemptible_work_stays_within_quota() -> None:
    state = queue_state(QueueFacts("q", deserved=(4, -1, -1), allocated=(3, 0, 0), allocated_np=(3, 0, 0)))
    verdict = state.check_capacity("q", (2, 0, 0), preemptible=False)
    assert not verdict.ok and verdict.reason == "NonPreemptibleOverQuota"
    assert "quota 4, non-preemptible allocated 3, requested 2" in verdict.message
    assert state.check_capacity("q", (1, 0, 0), preemptible=False).ok
    assert state.check_capacity("q", (2, 0, 0), preemptible=True).ok  # preemptible work may go over quota


def test_only_non_preemptible_allocations_count_against_the_quota() -> None:
    state = queue_state(QueueFacts("q", deserved=(4, -1, -1), allocated=(10, 0, 0), allocated_np=(1, 0, 0)))
    assert state.check_capacity("q", (3, 0, 0), preemptible=False).ok


def test_a_parent_quota_binds_non_preemptible_work_of_its_children() -> None:
    state = queue_state(
        QueueFacts("dept", deserved=(4, -1, -1)),
        QueueFacts("a", parent="dept", deserved=(-1, -1, -1), allocated_np=(3, 0, 0), allocated=(3, 0, 0)),
        QueueFacts("b", parent="dept", deserved=(-1, -1, -1)),
    )
    verdict = state.check_capacity("b", (2, 0, 0), preemptible=False)
    assert verdict.reason == "NonPreemptibleOverQuota" and "queue dept" in verdict.message


def test_bookings_reach_every_ancestor_and_every_reader_of_the_allocation() -> None:
    state = queue_state(
        QueueFacts("dept", deserved=(4, -1, -1), limit=(10, -1, -1)),
        QueueFacts("a", parent="dept", deserved=(-1, -1, -1)),
        QueueFacts("b", parent="dept", deserved=(-1, -1, -1)),
    )
    dept, a = state.tree.index["dept"], state.tree.index["a"]
    state.add_allocation("a", (3.0, 500.0, 1e9), preemptible=False)
    state.add_allocation("a", (2.0, 0.0, 0.0), preemptible=True)
    assert list(state.allocated[dept]) == [5.0, 500.0, 1e9] and list(state.allocated[a]) == [5.0, 500.0, 1e9]
    assert list(state.allocated_np[dept]) == [3.0, 500.0, 1e9]
    over_quota = state.check_capacity("b", (2, 0, 0), preemptible=False)
    assert "non-preemptible allocated 3, requested 2" in over_quota.message
    assert "allocated 5, requested 6" in state.check_capacity("b", (6, 0, 0), preemptible=True).message
    state.add_allocation("a", (3.0, 500.0, 1e9), preemptible=False, sign=-1.0)  # given back
    assert list(state.allocated[dept]) == [2.0, 0.0, 0.0] and list(state.allocated_np[dept]) == [0.0, 0.0, 0.0]
    assert state.check_capacity("b", (2, 0, 0), preemptible=False).ok


def test_the_limit_is_checked_before_the_quota() -> None:
    state = queue_state(QueueFacts("q", deserved=(1, -1, -1), limit=(1, -1, -1)))
    assert state.check_capacity("q", (2, 0, 0), preemptible=False).reason == "OverLimit"


# ------------------------------------------------------------------ queue order


def first_of(
    state: QueueState,
    left_request: Triple = (1, 0, 0),
    right_request: Triple = (1, 0, 0),
    left_victims: Triple | None = None,
) -> str:
    """Which of the two queues (``a``, ``b``) goes first; both orders must agree."""
    a, b = state.tree.index["a"], state.tree.index["b"]
    left, right = np.array(left_request, dtype=float), np.array(right_request, dtype=float)
    victims = None if left_victims is None else np.array(left_victims, dtype=float)
    forward = state.compare(a, b, left, right, victims, None)
    backward = state.compare(b, a, right, left, None, victims)
    assert forward == -backward
    return "a" if forward < 0 else "b"


def test_a_queue_over_its_fair_share_in_every_resource_goes_last_whatever_its_priority() -> None:
    state = queue_state(
        QueueFacts("a", priority=200, fair=(2, 1000, 1e9), allocated=(3, 2000, 2e9)),
        QueueFacts("b", fair=(2, 1000, 1e9)),
    )
    assert first_of(state) == "b"


def test_over_the_fair_share_in_some_resources_only_is_not_over_utilized() -> None:
    state = queue_state(
        QueueFacts("a", priority=200, fair=(2, 5000, 5e9), allocated=(3, 2000, 2e9)),
        QueueFacts("b", fair=(2, 1000, 1e9)),
    )
    assert first_of(state) == "a"


def test_a_starved_queue_goes_before_a_higher_priority_one() -> None:
    # Starved: what it holds plus the next job fits in its quota, in every resource.
    state = queue_state(
        QueueFacts("a", deserved=(4, -1, -1), fair=(4, 0, 0), allocated=(1, 0, 0)),
        QueueFacts("b", priority=200, fair=(4, 0, 0)),
    )
    assert first_of(state) == "a"


def test_otherwise_the_higher_priority_queue_goes_first() -> None:
    state = queue_state(
        QueueFacts("a", fair=(4, 0, 0), allocated=(0, 0, 0)),
        QueueFacts("b", priority=200, fair=(4, 0, 0), allocated=(3, 0, 0)),
    )
    assert first_of(state) == "b"


def test_a_queue_with_nothing_allocatable_in_a_requested_resource_goes_after() -> None:
    # By dominant share a would go first (0.5 x 1000 against b's 601 / 1); the penalty comes before.
    state = queue_state(QueueFacts("a"), QueueFacts("b", fair=(1, 0, 0), allocated=(600, 0, 0)))
    assert first_of(state, left_request=(0.5, 0, 0)) == "b"


def test_the_smaller_dominant_share_with_the_job_goes_first() -> None:
    # a: (2 + 1) / 8 = 0.375; b: (1 + 1) / 4 = 0.5.
    state = queue_state(
        QueueFacts("a", fair=(8, 0, 0), allocated=(2, 0, 0)), QueueFacts("b", fair=(4, 0, 0), allocated=(1, 0, 0))
    )
    assert first_of(state) == "a"


def test_the_dominant_share_is_the_largest_over_resources() -> None:
    # a's gpu share is small but its cpu share (3000 + 0) / 4000 = 0.75 dominates b's 0.5.
    state = queue_state(
        QueueFacts("a", fair=(8, 4000, 0), allocated=(1, 3000, 0)),
        QueueFacts("b", fair=(4, 4000, 0), allocated=(1, 1000, 0)),
    )
    assert first_of(state) == "b"


def test_victims_being_reclaimed_lower_the_dominant_share() -> None:
    state = queue_state(
        QueueFacts("a", fair=(8, 0, 0), allocated=(6, 0, 0)), QueueFacts("b", fair=(8, 0, 0), allocated=(3, 0, 0))
    )
    assert first_of(state) == "b"
    assert first_of(state, left_victims=(4, 0, 0)) == "a"  # (6 + 1 - 4) / 8 < (3 + 1) / 8


def test_an_unlimited_allocatable_share_is_measured_against_the_cluster_total() -> None:
    # Both starved; a: (12 + 1) / 16 (the cluster's gpus), b: (3 + 1) / 8.
    state = queue_state(
        QueueFacts("a", deserved=(-1, -1, -1), fair=(16, 0, 0), allocated=(12, 0, 0)),
        QueueFacts("b", deserved=(8, -1, -1), fair=(8, 0, 0), allocated=(3, 0, 0)),
    )
    assert first_of(state) == "b"


def test_equal_shares_with_the_job_fall_back_to_the_share_without_it() -> None:
    # With the job both are 4/8; without it a holds 2/8 and b 3/8.
    state = queue_state(
        QueueFacts("a", fair=(8, 0, 0), allocated=(2, 0, 0)), QueueFacts("b", fair=(8, 0, 0), allocated=(3, 0, 0))
    )
    assert first_of(state, left_request=(2, 0, 0), right_request=(1, 0, 0)) == "a"


def test_equal_shares_put_the_queue_with_less_allocatable_first() -> None:
    state = queue_state(QueueFacts("a", fair=(8, 100, 0)), QueueFacts("b", fair=(4, 100, 0)))
    assert first_of(state, (0, 0, 0), (0, 0, 0)) == "b"


def test_last_the_older_queue_then_the_name_goes_first() -> None:
    state = queue_state(QueueFacts("a", created=2, fair=(4, 0, 0)), QueueFacts("b", created=1, fair=(4, 0, 0)))
    assert first_of(state, (0, 0, 0), (0, 0, 0)) == "b"
    state = queue_state(QueueFacts("a", fair=(4, 0, 0)), QueueFacts("b", fair=(4, 0, 0)))
    assert first_of(state, (0, 0, 0), (0, 0, 0)) == "a"
