"""Time-based fair share: KAI's usage normalization and rules, and the usage ledger's invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.fairshare import UsageLedger, UsageWindow
from tests.fairshare.division_helpers import Q, gpu_shares

HOUR = 3600.0


def test_kai_doc_example_24_gpu_hours_on_10_gpus_over_10_hours_is_024() -> None:
    for used in ((8, 3), (12, 2)):  # "wether it's 8 GPUs for 3 hours, or 12 GPUs for 2 hours"
        ledger = UsageLedger(UsageWindow(10 * HOUR), resolution=60)
        ledger.observe(0, {"q": (used[0], 0, 0)}, (10, 1, 1))
        ledger.observe(used[1] * HOUR, {"q": (0, 0, 0)}, (10, 1, 1))
        ledger.observe(10 * HOUR, {}, (10, 1, 1))
        assert ledger.usage(10 * HOUR)["q"][0] == pytest.approx(0.24)


def test_usage_moves_only_the_over_quota_split() -> None:
    """KAI: deserved quota is given regardless of usage; only what is left follows usage."""
    quiet = [Q("dept"), Q("a", quota=4, request=16, parent="dept"), Q("b", quota=4, request=16, parent="dept")]
    shares, _ = gpu_shares(quiet, 16, k_value=1.0)
    assert (shares["a"], shares["b"]) == (8, 8)
    busy = [Q("dept"), Q("a", quota=4, request=16, parent="dept", usage=1.0), quiet[2]]
    shares, _ = gpu_shares(busy, 16, k_value=1.0)
    assert (shares["a"], shares["b"]) == (4, 12)  # a keeps its 4 deserved; b takes all 8 left over


def test_priority_still_comes_before_usage() -> None:
    queues = [Q("hi", request=16, priority=200, usage=1.0), Q("lo", request=16, priority=100)]
    shares, _ = gpu_shares(queues, 16, k_value=1.0)
    assert (shares["hi"], shares["lo"]) == (16, 0)


def test_kvalue_sets_how_much_usage_counts() -> None:
    queues = [Q("a", request=16, usage=0.6), Q("b", request=16)]
    assert gpu_shares(queues, 16, k_value=0.0)[0]["a"] == 8
    half = gpu_shares(queues, 16, k_value=0.5)[0]["a"]
    full = gpu_shares(queues, 16, k_value=1.0)[0]["a"]
    assert 8 > half > full  # w = 0.5 + k (0.5 - 0.6): 0.45 then 0.4, against 0.75 then 1.0


def test_decay_weighs_recent_use_more() -> None:
    early, late = UsageLedger(UsageWindow(8 * HOUR, half_life=HOUR), 60), UsageLedger(UsageWindow(8 * HOUR), 60)
    for ledger in (early, late):
        ledger.observe(0, {"old": (4, 0, 0)}, (8, 1, 1))
        ledger.observe(HOUR, {"old": (0, 0, 0), "new": (4, 0, 0)}, (8, 1, 1))
        ledger.observe(2 * HOUR, {"new": (0, 0, 0)}, (8, 1, 1))
    decayed, flat = early.usage(2 * HOUR), late.usage(2 * HOUR)
    assert flat["old"][0] == pytest.approx(flat["new"][0])
    assert decayed["new"][0] > decayed["old"][0]


def test_use_older_than_the_window_is_forgotten() -> None:
    ledger = UsageLedger(UsageWindow(HOUR), resolution=60)
    ledger.observe(0, {"q": (8, 0, 0)}, (8, 1, 1))
    ledger.observe(HOUR, {"q": (0, 0, 0)}, (8, 1, 1))
    assert ledger.usage(HOUR)["q"][0] == pytest.approx(1.0)
    ledger.observe(2 * HOUR + 60, {}, (8, 1, 1))
    assert ledger.usage(2 * HOUR + 60).get("q", (0.0,))[0] == pytest.approx(0.0, abs=1e-9)


def test_a_tumbling_window_starts_over_at_each_reset() -> None:
    window = UsageWindow(HOUR, kind="tumbling", tumbling_start=0.0)
    ledger = UsageLedger(window, resolution=60)
    ledger.observe(0, {"q": (8, 0, 0)}, (8, 1, 1))
    ledger.observe(HOUR - 60, {"q": (0, 0, 0)}, (8, 1, 1))
    assert ledger.usage(HOUR - 60)["q"][0] == pytest.approx(1.0)
    ledger.observe(HOUR + 1800, {}, (8, 1, 1))
    assert "q" not in ledger.usage(HOUR + 1800)  # the new window holds nothing of q: no usage
    assert window.start(HOUR + 1800) == HOUR


observations = st.lists(
    st.tuples(
        st.floats(1, 5000),  # seconds since the previous observation
        st.lists(st.floats(0, 1), min_size=3, max_size=3),  # each queue's part of the capacity
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(observations, st.sampled_from([0.0, 600.0]), st.sampled_from([37.0, 60.0, 500.0]))
def test_usage_is_a_share_of_the_capacity_and_survives_being_kept(
    steps: list[tuple[float, list[float]]], half_life: float, resolution: float
) -> None:
    window = UsageWindow(4 * HOUR, half_life=half_life)
    ledger = UsageLedger(window, resolution)
    now = 1_000_000.0
    capacity = (16.0, 64_000.0, 256e9)
    for gap, parts in steps:
        scale = sum(parts) or 1.0
        allocated = {f"q{i}": tuple(min(p / scale, 1.0) * c for c in capacity) for i, p in enumerate(parts)}
        ledger.observe(now, allocated, capacity)
        now += gap
    ledger.observe(now, {}, capacity)
    usage = ledger.usage(now)
    for resource in range(3):
        values = [u[resource] for u in usage.values()]
        assert all(-1e-9 <= v <= 1 + 1e-9 for v in values)
        assert sum(values) <= 1 + 1e-6  # queues that share a cluster never use more than all of it
    kept = UsageLedger(window, resolution)
    assert kept.restore(ledger.records()) == []
    for queue, values in usage.items():
        assert kept.usage(now).get(queue, (0.0, 0.0, 0.0)) == pytest.approx(values, rel=1e-4, abs=1e-9)


def test_unreadable_records_are_reported_not_fatal() -> None:
    ledger = UsageLedger(UsageWindow(HOUR), 60)
    bad = {"q": {"version": 1, "resolution": "x"}, "r": {"version": 99}, "s": {"resolution": 60, "firstBucket": 1}}
    assert sorted(ledger.restore(bad)) == ["q", "r", "s"] and ledger.usage(0) == {}
