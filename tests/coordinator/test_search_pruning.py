"""Victim searches that cannot succeed are not repeated: KAI's signatures within a session,
kai-ray's backoff across sessions."""

from __future__ import annotations

from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from tests.builders import JobSpec, build, config, node, queue

NOW = 1_000_000.0


def protected_cluster(pending: list[JobSpec]):  # type: ignore[no-untyped-def]
    """q2 deserves 3 GPUs and may reclaim, but q1 runs within its own (oversubscribed) quota,
    so every search for victims fails."""
    return build(
        [node("a", gpu=4)],
        [queue("q1", gpu_quota=4, created=0), queue("q2", gpu_quota=3, created=1)],
        [JobSpec(f"mine{i}", "q1", gpu=1, running_on=["a"], created=i) for i in range(4)] + pending,
    )


def skipped(snapshot, **cfg):  # type: ignore[no-untyped-def]
    """One reclaim session: (why each job's victim search was skipped, each pod's decision)."""
    coordinator = in_process_coordinator(config(**cfg))
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    result = coordinator.cycle(NOW, ["reclaim"])
    return result.search_skipped, result.decisions.pods


def test_a_job_no_easier_than_one_that_failed_is_not_searched_again() -> None:
    snapshot = protected_cluster(
        [
            JobSpec("first", "q2", gpu=2, created=10),
            JobSpec("same", "q2", gpu=2, created=11),
            JobSpec("bigger", "q2", gpu=3, created=12),
        ]
    )
    why, pods = skipped(snapshot)
    assert "default/first" not in why
    for name in ("same", "bigger"):
        assert why[f"default/{name}"].startswith("not searched: default/first has the same constraints")
        # the skipped search changes nothing about why the job waits, as in KAI
        assert "not searched" not in pods[f"default/{name}-0"].reason


def test_an_easier_job_with_the_same_signature_is_still_searched() -> None:
    snapshot = protected_cluster(
        [JobSpec("first", "q2", gpu=2, created=10), JobSpec("smaller", "q2", gpu=1, created=11)]
    )
    assert "default/smaller" not in skipped(snapshot)[0]


def test_without_signatures_every_job_is_searched() -> None:
    snapshot = protected_cluster([JobSpec("first", "q2", gpu=2, created=10), JobSpec("same", "q2", gpu=2, created=11)])
    assert skipped(snapshot, useSchedulingSignatures=False)[0] == {}


def test_a_failing_search_pauses_longer_each_time_and_resumes() -> None:
    snapshot = protected_cluster([JobSpec("wants", "q2", gpu=2, created=10)])
    coordinator = in_process_coordinator(config())
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))

    reasons = set()

    def paused(at: float) -> bool:
        result = coordinator.cycle(at, ["reclaim"])
        reasons.add(result.decisions.pods["default/wants-0"].reason)
        return "default/wants" in result.search_skipped

    # failures at 0 and 10 s give pauses of 10 s and 20 s, then 40 s
    assert [paused(t) for t in (0.0, 5.0, 10.0, 15.0, 25.0, 30.0, 60.0, 70.0)] == [
        False,
        True,
        False,
        True,
        True,
        False,
        True,
        False,
    ]
    assert len(reasons) == 1  # paused or not, the job says the same thing: one event, not one per search


def test_the_pause_is_capped_and_zero_turns_it_off() -> None:
    snapshot = protected_cluster([JobSpec("wants", "q2", gpu=2, created=10)])
    for backoff, expect_pauses in (("30s", True), ("0s", False)):
        coordinator = in_process_coordinator(config(victimSearchBackoff=backoff))
        coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
        seen = []
        for step in range(12):
            seen.append("default/wants" in coordinator.cycle(step * 30.0, ["reclaim"]).search_skipped)
        # with a 30 s cap a search runs at least every 30 s; with 0 it runs every cycle
        assert not any(seen) if not expect_pauses else not all(seen[3:])


def test_a_job_that_is_placed_starts_from_scratch() -> None:
    snapshot = protected_cluster([JobSpec("wants", "q2", gpu=2, created=10)])
    coordinator = in_process_coordinator(config())
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    coordinator.cycle(0.0, ["reclaim"])
    assert coordinator.search_backoff.paused(1.0) == {("default/wants", "reclaim")}
    coordinator.apply(ClusterDeltas(pods_removed=("default/wants-0",), pod_groups_removed=("default/wants",)))
    coordinator.cycle(2.0, ["reclaim"])
    assert coordinator.search_backoff.paused(3.0) == frozenset()


def test_a_paused_job_keeps_saying_what_its_last_search_found() -> None:
    """A non-preemptible job over its queue's quota: preempt says why, and keeps saying it while its
    search is paused, instead of a note about the pause (the reason must name the cause)."""
    snapshot = build(
        [node("a", gpu=4)],
        [queue("q", gpu_quota=1)],
        [
            JobSpec("low", "q", pods=4, gpu=1, running_on=["a"] * 4, min_member=1),
            JobSpec("urgent", "q", gpu=2, priority=125, created=5),
        ],
    )
    coordinator = in_process_coordinator(config())
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    first = coordinator.cycle(0.0, ["allocate", "preempt"])
    assert "preempt: NonPreemptibleOverQuota" in first.decisions.pods["default/urgent-0"].reason
    later = coordinator.cycle(5.0, ["allocate", "preempt"])
    assert "default/urgent" in later.search_skipped  # paused...
    assert later.decisions.pods["default/urgent-0"].reason == first.decisions.pods["default/urgent-0"].reason


def test_what_preempt_and_consolidation_found_nothing_for_does_not_hold_back_reclaim() -> None:
    """Each action backs off on its own: q1 runs over its quota, so reclaim can make room for
    ``wants``, where preempt (no lower priority in q2) and consolidation (a full node) cannot."""
    snapshot = build(
        [node("a", gpu=4)],
        [queue("q1", gpu_quota=1, created=0), queue("q2", gpu_quota=3, created=1)],
        [JobSpec(f"mine{i}", "q1", gpu=1, running_on=["a"], created=i) for i in range(4)]
        + [JobSpec("wants", "q2", gpu=2, created=10)],
    )
    coordinator = in_process_coordinator(config())
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    first = coordinator.cycle(0.0, ["consolidation", "preempt"])
    assert not first.evictions and coordinator.search_backoff.pauses()  # both searches failed, both back off
    second = coordinator.cycle(1.0, ["reclaim"])
    assert "default/wants" not in second.search_skipped
    assert {e.preemptor for e in second.evictions} == {"default/wants"} and len(second.evictions) == 2
