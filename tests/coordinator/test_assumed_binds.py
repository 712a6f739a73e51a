"""A bind in flight is not undone by an update that predates it (assume until confirmed)."""

from __future__ import annotations

from dataclasses import replace

from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import PodState
from tests.builders import JobSpec, build, config, node, queue


def test_a_stale_pending_update_does_not_free_an_assumed_pod() -> None:
    snapshot = build(
        [node("a", gpu=8)],
        [queue("q", gpu_quota=2, gpu_limit=2)],
        [JobSpec(f"j{i}", "q", gpu=1, created=i) for i in range(3)],
    )
    coordinator = in_process_coordinator(config(), shards=2)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    first = coordinator.cycle(100.0)
    assert len(first.binds) == 2
    stale = tuple(p for p in snapshot.pods if p.key in {b.pod for b in first.binds})  # still Pending
    coordinator.apply(ClusterDeltas(pods_upserted=stale))
    second = coordinator.cycle(101.0)
    assert second.binds == []  # nothing placed twice, and the queue limit of 2 still holds
    confirmed = tuple(replace(p, state=PodState.RUNNING, node="a") for p in stale)
    coordinator.apply(ClusterDeltas(pods_upserted=confirmed))
    assert coordinator.cycle(102.0).binds == []
    coordinator.bind_failed([stale[0].key])  # no effect once confirmed
    assert coordinator.cycle(103.0).binds == []


def test_a_failed_bind_frees_the_pod_and_its_capacity() -> None:
    snapshot = build([node("a", gpu=1)], [queue("q", gpu_quota=1)], [JobSpec("j", "q", gpu=1)])
    coordinator = in_process_coordinator(config())
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    [bind] = coordinator.cycle(100.0).binds
    coordinator.bind_failed([bind.pod])
    [again] = coordinator.cycle(101.0).binds
    assert again.pod == bind.pod and again.node == "a"


def test_a_bind_that_fails_for_a_pod_already_gone_is_not_replayed_by_the_next_cycle() -> None:
    """The cycle that bound it counted the pod in its queue's allocation; with the pod deleted
    before the failure came back, the cluster model has nothing to undo, yet the next cycle must
    decide again rather than hand out that cycle's result once more."""
    coordinator = in_process_coordinator(config(), 1)
    snapshot = build([node("n0", gpu=4)], [queue("q")], [JobSpec("a", "q", gpu=2)])
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    first = coordinator.cycle(1_000.0)
    assert [b.pod for b in first.binds] == ["default/a-0"]
    coordinator.apply(ClusterDeltas(pods_removed=("default/a-0",)))
    assert not coordinator.cycle(1_001.0).stats.reused
    assert coordinator.cycle(1_002.0).stats.reused  # nothing new: the last result stands
    coordinator.bind_failed(["default/a-0"])
    again = coordinator.cycle(1_003.0)
    assert not again.stats.reused
    assert again.decisions.queues["q"]["allocated"]["gpu"] == 0
