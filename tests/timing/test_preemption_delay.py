"""Preemption delay, rule by rule from KAI's docs/preemption-delay."""

from __future__ import annotations

import pytest

from kai_ray.model import ClusterSnapshot
from tests.builders import JobSpec, build, node, queue
from tests.timing.helpers import NOW, session, statuses, with_group


def preempt_case(delay: float | None, created_ago: float, evicted_ago: float | None = None) -> ClusterSnapshot:
    case = build(
        [node("a", gpu=2)],
        [queue("q", gpu_quota=2)],
        [
            JobSpec("low", "q", gpu=2, priority=50, running_on=["a"], created=NOW - 3600),
            JobSpec("high", "q", gpu=2, priority=75, created=NOW - created_ago),
        ],
    )
    last_eviction = None if evicted_ago is None else NOW - evicted_ago
    return with_group(case, "high", preemption_delay_seconds=delay, last_eviction=last_eviction)


def test_inside_its_window_a_job_evicts_no_one_and_says_until_when() -> None:
    decisions = session(preempt_case(delay=300, created_ago=120), ["preempt"])
    assert statuses(decisions, "low") == ["Running"]
    reason = decisions.pod_groups["default/high"].reason
    assert "PreemptionDelayNotElapsed" in reason and "(5m0s)" in reason
    assert "1970-01-12T13:49:40Z" in reason  # created 120 s before NOW (13:46:40), plus 300 s


def test_once_the_window_has_passed_evictions_proceed_normally() -> None:
    decisions = session(preempt_case(delay=300, created_ago=301), ["preempt"])
    assert statuses(decisions, "low") == ["Releasing"] and statuses(decisions, "high") == ["Pipelined"]


def test_without_a_delay_nothing_changes() -> None:
    assert statuses(session(preempt_case(delay=None, created_ago=1), ["preempt"]), "low") == ["Releasing"]


def test_the_window_restarts_when_the_job_was_evicted() -> None:
    """Counted from max(creation, last eviction): each placement attempt gets a fresh window."""
    decisions = session(preempt_case(delay=300, created_ago=3600, evicted_ago=60), ["preempt"])
    assert statuses(decisions, "low") == ["Running"]
    assert statuses(session(preempt_case(300, 3600, evicted_ago=400), ["preempt"]), "low") == ["Releasing"]


def test_the_delay_never_slows_plain_allocation() -> None:
    case = build(
        [node("a", gpu=4)],
        [queue("q", gpu_quota=4)],
        [JobSpec("high", "q", gpu=2, priority=75, created=NOW - 1)],
    )
    decisions = session(with_group(case, "high", preemption_delay_seconds=600), ["allocate"])
    assert statuses(decisions, "high") == ["Binding"]


def test_the_delay_is_no_protection_for_the_job_itself() -> None:
    case = build(
        [node("a", gpu=2)],
        [queue("q", gpu_quota=2)],
        [
            JobSpec("low", "q", gpu=2, priority=50, running_on=["a"], created=NOW - 3600),
            JobSpec("high", "q", gpu=2, priority=75, created=NOW - 10),
        ],
    )
    decisions = session(with_group(case, "low", preemption_delay_seconds=3600), ["preempt"])
    assert statuses(decisions, "low") == ["Releasing"]


@pytest.mark.parametrize("action", ["reclaim", "consolidation"])
def test_reclaim_and_consolidation_wait_too(action: str) -> None:
    if action == "reclaim":
        case = build(
            [node("a", gpu=2)],
            [queue("q1", created=0), queue("q2", created=1)],
            [
                JobSpec("hog1", "q1", gpu=1, running_on=["a"], created=1),
                JobSpec("hog2", "q1", gpu=1, running_on=["a"], created=2),
                JobSpec("wants", "q2", gpu=1, created=NOW - 10),
            ],
        )
    else:
        case = build(
            [node("a", gpu=4), node("b", gpu=4)],
            [queue("q", gpu_quota=8)],
            [
                JobSpec("small-a", "q", gpu=2, running_on=["a"]),
                JobSpec("small-b", "q", gpu=2, running_on=["b"]),
                JobSpec("wants", "q", gpu=3, created=NOW - 10),
            ],
        )
    moved = {"Releasing", "Pipelined"}
    free = session(case, [action])
    assert statuses(free, "wants") == ["Pipelined"]
    delayed = session(with_group(case, "wants", preemption_delay_seconds=60), [action])
    assert statuses(delayed, "wants") == ["Pending"]
    assert not any(p.status in moved for k, p in delayed.pods.items() if "wants" not in k)
