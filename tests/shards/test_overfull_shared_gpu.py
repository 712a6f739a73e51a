"""A shared GPU that is already over-full (the kubelet let two 0.6 fractions onto one device) is
that device's problem only: a whole-GPU pod still binds on the node's other free device, and a
fraction that would join the full GPU is still refused."""

from __future__ import annotations

from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import GpuShare
from shards.messages import Placement, PrepareItem, ShardDeltas
from shards.shard import Shard
from tests.builders import JobSpec, build, config, node, queue

OVERFULL = JobSpec("shared", "q", pods=2, fraction=0.6, running_on=["a", "a"], gpu_groups=["a-g0", "a-g0"])


def test_a_whole_gpu_pod_binds_beside_an_over_full_shared_gpu() -> None:
    snapshot = build([node("a", gpu=2)], [queue("q", gpu_quota=2)], [OVERFULL, JobSpec("whole", "q", gpu=1, created=1)])
    coordinator = in_process_coordinator(config())
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    result = coordinator.cycle(1_000.0, ("allocate",))
    assert [(b.pod, b.node) for b in result.binds] == [("default/whole-0", "a")]
    assert result.stats.aborted_jobs == 0


def test_the_shard_still_refuses_a_fraction_that_joins_the_over_full_gpu() -> None:
    snapshot = build([node("a", gpu=2)], [queue("q", gpu_quota=2)], [OVERFULL])
    shard = Shard(0)
    shard.apply(ShardDeltas(nodes_upserted=snapshot.nodes, pods_upserted=snapshot.pods))
    pod = snapshot.pods[0]
    joining = Placement("default/join", "a", pod.requests, False, GpuShare(fraction=0.1), (("a-g0", 8192),))
    whole = Placement("default/whole", "a", pod.requests.__class__.of(cpu=1000, gpu=1, pods=1), False)
    reply = shard.prepare([PrepareItem("join", (joining,)), PrepareItem("whole", (whole,))], now=0.0)
    assert reply.held == ("whole",)
    assert "shared GPU a-g0 is full" in reply.refused["join"]
