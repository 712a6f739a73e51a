"""The oracle tier's model of KAI v0.12's heaps behaves as Go's ``container/heap`` does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.oracle.kai_job_order import GoHeap


@given(st.lists(st.integers(min_value=-50, max_value=50)))
def test_pops_in_order_while_keys_hold(values: list[int]) -> None:
    heap: GoHeap[int] = GoHeap(lambda left, right: left < right)
    for value in values:
        heap.push(value)
    assert [heap.pop() for _ in values] == sorted(values)


def test_a_top_whose_key_changed_stays_on_top_until_fixed() -> None:
    """What KAI's department comparison meets: a queue served and flagged, not yet re-placed."""
    share = {"a": 1, "b": 2, "c": 3}
    heap: GoHeap[str] = GoHeap(lambda left, right: share[left] < share[right])
    for queue in share:
        heap.push(queue)
    share["a"] = 9  # served: now the last in order, but nothing re-placed it
    assert heap.peek() == "a"
    heap.fix(0)
    assert [heap.pop() for _ in range(3)] == ["b", "c", "a"]
