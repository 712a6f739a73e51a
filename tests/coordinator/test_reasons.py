"""Pending reasons that say what is really wrong: unusable queues, no ready node at all."""

from __future__ import annotations

from dataclasses import replace

from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.io.queue_tree import classify_queues
from tests.builders import JobSpec, build, config, node, queue


def _reason(snapshot: object, pod: str = "default/j-0") -> str:
    coordinator = in_process_coordinator(config(), shards=2)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))  # type: ignore[arg-type]
    decision = coordinator.cycle(100.0).decisions.pods[pod]
    assert decision.status == "Pending"
    return decision.reason


def test_when_every_node_is_not_ready_or_cordoned_the_reason_says_so() -> None:
    nodes = [replace(node("a"), ready=False), replace(node("b"), unschedulable=True)]
    reason = _reason(build(nodes, [queue("q")], [JobSpec("j", "q", gpu=8)]))
    assert reason.endswith(
        "1 node(s) were not ready. 1 node(s) were unschedulable. Every node is not ready or cordoned."
    )


def test_a_node_too_small_is_still_named_when_some_node_may_be_used() -> None:
    nodes = [replace(node("a"), ready=False), node("b", gpu=4)]
    reason = _reason(build(nodes, [queue("q")], [JobSpec("j", "q", gpu=8)]))
    assert "1 node(s) were not ready" in reason
    assert "Max GPU resources available in a single node is topped at 4" in reason


def test_orphan_and_cyclic_queues_are_not_said_to_be_missing() -> None:
    queues = [queue("root"), queue("orphan", parent="gone"), queue("a", parent="b"), queue("b", parent="a")]
    forest = classify_queues({q.name: q for q in queues})
    assert forest.usable == ("root",)
    snapshot = build([node("n")], [queue("root")], [JobSpec("j", "orphan"), JobSpec("k", "a")])
    snapshot = replace(snapshot, unusable_queues=forest.unusable)
    assert _reason(snapshot) == (
        "queue orphan is not usable: its parent queue 'gone' does not exist (orphaned queues are ignored, as in KAI)"
    )
    assert _reason(snapshot, "default/k-0") == "queue a is not usable: its parent queues form a cycle (a -> b -> a)"
    missing = build([node("n")], [queue("root")], [JobSpec("j", "nowhere")])
    assert _reason(missing).startswith("QueueDoesNotExist: queue nowhere does not exist")


def test_a_running_job_whose_queue_was_deleted_does_not_stop_the_cycle() -> None:
    """Found by the churn test: reclaim offered it as a victim and every cycle failed on its queue."""
    snapshot = build(
        [node("n", gpu=8)],
        [queue("root"), queue("team", parent="root", gpu_quota=8)],
        [JobSpec("orphaned", "gone", gpu=8, running_on=["n"], priority=50), JobSpec("j", "team", gpu=8)],
    )
    coordinator = in_process_coordinator(config(), shards=2)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    result = coordinator.cycle(100.0)
    assert result.decisions.pods["default/j-0"].status == "Pending"
    assert result.decisions.pods["default/orphaned-0"].status == "Running"


def test_a_gang_that_reached_its_minimum_before_a_pod_failed_is_not_said_to_be_short_of_it() -> None:
    """A gang of two with one pod still releasing on a cordoned node: the attempt places g-1 on
    the free node, and g-2 finds no room. At that moment the gang has its two (the releasing pod
    counts), so KAI names the pod that failed; the gang form ("found for 1 pods while 2 are
    required") would describe the job after the rollback, which the shards' streams once did."""
    gang = JobSpec("g", "q", pods=3, min_member=2, releasing_on=["a"])
    nodes = [replace(node("a", gpu=1), unschedulable=True), node("b", gpu=1)]
    snapshot = build(nodes, [queue("q", gpu_quota=4)], [gang])
    for shards in (1, 2):
        coordinator = in_process_coordinator(config(), shards=shards)
        coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
        decision = coordinator.cycle(100.0, ("allocate",)).decisions.pods["default/g-2"]
        assert decision.status == "Pending"
        assert decision.reason.startswith("Resources were not found for pod default/g-2 due to: ")
