"""A job that reclaim cannot serve says which of KAI's reclaim rules holds it, not only why
allocate found no node (the decisions themselves are KAI's and stay as they were)."""

from __future__ import annotations

import numpy as np

from coordinator.reclaim_rules import QueueSnapshot, reclaim_refusal
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from tests.builders import JobSpec, build, config, node, queue
from tests.fairshare.test_queue_state import QueueFacts, queue_state


def _decide(snapshot: object, pod: str) -> tuple[str, str, list[str]]:
    coordinator = in_process_coordinator(config(), shards=2)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))  # type: ignore[arg-type]
    result = coordinator.cycle(100.0)
    decision = result.decisions.pods[pod]
    return decision.status, decision.reason, [e.pod for e in result.evictions]


def test_a_queue_at_its_fair_share_is_not_reclaimed_from_and_the_reason_names_the_rule() -> None:
    # Queue b holds the only 8-GPU node, exactly its fair share; the two 4-GPU nodes are idle, so
    # a's fair share covers its 8-GPU pod, which fits on none of them. a would go above its
    # deserved quota (0), so KAI lets it take only from a queue above its fair share: none is.
    nodes = [node("big", gpu=8), node("small-1", gpu=4), node("small-2", gpu=4)]
    queues = [queue("a"), queue("b")]
    jobs = [JobSpec("held", "b", gpu=8, running_on=["big"]), JobSpec("wants", "a", gpu=8)]
    status, reason, evicted = _decide(build(nodes, queues, jobs), "default/wants-0")
    assert (status, evicted) == ("Pending", [])
    assert reason.endswith(
        "reclaim: no queue to take from: a would go above its deserved quota: only a queue above its "
        "fair share may give back, and b is not"
    )


def test_a_victim_chunk_that_would_take_its_queue_to_its_share_is_refused_by_name() -> None:
    # a stays within its deserved quota; b gives back one GPU at a time, and the chunk that starts
    # at b's share (2) fits neither strategy: b would not keep more than its share or its quota.
    queues = queue_state(
        QueueFacts("a", deserved=(8, -1, -1), fair=(8, 0, 0)),
        QueueFacts("b", deserved=(2, -1, -1), fair=(2, 0, 0), allocated=(8, 0, 0)),
    )
    frozen = QueueSnapshot(queues.allocated.copy(), queues.allocated_np.copy())
    request = np.array([8.0, 0.0, 0.0])
    chunks = {"b": [np.array([1.0, 0.0, 0.0])] * 8}
    assert reclaim_refusal(queues, frozen, "a", request, True, chunks) == (
        "it would leave b at or below its fair share and its deserved quota"
    )
    assert reclaim_refusal(queues, frozen, "a", request, True, {"b": chunks["b"][:6]}) is None


def test_a_reclaimer_more_saturated_than_the_queue_it_takes_from_is_refused_by_name() -> None:
    queues = queue_state(
        QueueFacts("x", fair=(4, 0, 0)),
        QueueFacts("x1", parent="x", fair=(4, 0, 0), allocated=(2, 0, 0)),
        QueueFacts("y", fair=(6, 0, 0)),
        QueueFacts("y1", parent="y", fair=(6, 0, 0), allocated=(8, 0, 0)),
    )
    frozen = QueueSnapshot(queues.allocated.copy(), queues.allocated_np.copy())
    refusal = reclaim_refusal(queues, frozen, "x1", np.array([4.0, 0.0, 0.0]), True, {"y1": [np.array([4.0, 0, 0])]})
    assert refusal == "x would be above its fair share and no less saturated than y, which it would take from"


def test_a_queue_above_its_fair_share_is_still_reclaimed_from() -> None:
    nodes = [node("big", gpu=8)]
    queues = [queue("a"), queue("b")]
    jobs = [JobSpec("held", "b", gpu=8, running_on=["big"]), JobSpec("wants", "a", gpu=4)]
    status, reason, evicted = _decide(build(nodes, queues, jobs), "default/wants-0")
    assert status == "Pipelined"
    assert evicted == ["default/held-0"]
    assert "reclaim:" not in reason


def test_a_queue_whose_only_possible_victims_are_not_preemptible_is_told_so() -> None:
    # As in the first test, but b's job is not preemptible (and within b's quota): KAI's victims
    # queue leaves it out, so there is nothing to take, and the reason says that.
    nodes = [node("big", gpu=8), node("small-1", gpu=4), node("small-2", gpu=4)]
    queues = [queue("a"), queue("b", gpu_quota=8)]
    jobs = [JobSpec("held", "b", gpu=8, running_on=["big"], preemptible=False), JobSpec("wants", "a", gpu=8)]
    status, reason, evicted = _decide(build(nodes, queues, jobs), "default/wants-0")
    assert (status, evicted) == ("Pending", [])
    assert reason.endswith("reclaim: the jobs other queues run are not preemptible")


def test_a_job_no_node_could_hold_gets_no_reclaim_reason() -> None:
    # a's fair share (8 of the 12 GPUs) covers its 8-GPU pod, but the pod fits no node however
    # much is evicted: reclaim fails it before looking at victims and adds nothing to allocate's reason.
    nodes = [node("small-1", gpu=4), node("small-2", gpu=4), node("small-3", gpu=4)]
    queues = [queue("a"), queue("b")]
    jobs = [JobSpec("held", "b", gpu=4, running_on=["small-1"]), JobSpec("wants", "a", gpu=8)]
    status, reason, _ = _decide(build(nodes, queues, jobs), "default/wants-0")
    assert status == "Pending"
    assert "reclaim:" not in reason
