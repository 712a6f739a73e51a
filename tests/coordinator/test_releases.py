"""What a pod stops holding is released on the shards; what a returning node holds comes back."""

from __future__ import annotations

from dataclasses import replace

from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import PodState
from placement.shapes import GPU
from tests.builders import JobSpec, build, config, node, queue


def _used_gpus(coordinator: object, name: str) -> float:
    """Whole GPUs held (active + releasing) on node ``name``, as its shard counts them."""
    for rows in coordinator.shards.every_row():  # type: ignore[attr-defined]
        if name in rows.names:
            row = rows.names.index(name)
            return float(rows.held[0, row, GPU] + rows.held[1, row, GPU])
    raise AssertionError(f"{name} is on no shard")


def test_a_finished_pod_gives_its_gpus_back() -> None:
    for end in (PodState.SUCCEEDED, PodState.FAILED):
        snapshot = build(
            [node("a", gpu=8)], [queue("q")], [JobSpec("first", "q", gpu=8), JobSpec("second", "q", gpu=8)]
        )
        first, second = sorted(snapshot.pods, key=lambda p: p.name)
        coordinator = in_process_coordinator(config())
        running = replace(first, state=PodState.RUNNING, node="a")
        coordinator.apply(ClusterDeltas.of_snapshot(replace(snapshot, pods=(running, second))))
        assert coordinator.cycle(100.0).binds == []  # the node is full
        coordinator.apply(ClusterDeltas(pods_upserted=(replace(running, state=end),)))
        assert _used_gpus(coordinator, "a") == 0
        [bind] = coordinator.cycle(101.0).binds
        assert bind.pod == second.key and bind.node == "a"


def test_a_node_that_registers_again_brings_back_the_pods_bound_to_it() -> None:
    snapshot = build([node("a", gpu=8)], [queue("q")], [JobSpec("old", "q", gpu=8), JobSpec("new", "q", gpu=8)])
    old, new = sorted(snapshot.pods, key=lambda p: p.name, reverse=True)
    coordinator = in_process_coordinator(config(), shards=2)
    running = replace(old, state=PodState.RUNNING, node="a")
    coordinator.apply(ClusterDeltas.of_snapshot(replace(snapshot, pods=(running,))))
    coordinator.apply(ClusterDeltas(nodes_removed=("a",)))
    coordinator.apply(ClusterDeltas(nodes_upserted=snapshot.nodes, pods_upserted=(new,)))
    assert _used_gpus(coordinator, "a") == 8
    assert coordinator.cycle(100.0).binds == []  # 8 GPUs are still taken by the pod bound there
