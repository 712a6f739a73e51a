"""A busy shard and a batch of pending pods, the same for every system a benchmark compares.

Nodes come from ``kai_ray.app.sim.cluster`` (pools of 8-GPU, 4-GPU and CPU-only nodes with zone,
rack and instance-type labels). About a third of the cluster is already in use, seeded: whole-GPU
pods, shared GPUs with a fraction on them, CPU pods, and some terminating pods, so that
pipelining, GPU-sharing order and bin-packing all shape the decisions. Pending pods are a mix
of 1/2/4/8 whole GPUs, 0.5/0.25 fractions and CPU-only pods, about a third of them with a node
selector. Everything follows from the seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kai_ray.app.sim.cluster import model_nodes
from kai_ray.model import GpuShare, Node, Pod, PodState, ResourceVector
from placement.shapes import Constraints, TaskShape
from shards.messages import ShardDeltas
from shards.shard import Shard

GIB = 2**30
POOL = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"


@dataclass(frozen=True, slots=True)
class PendingPod:
    key: str
    shape: TaskShape


def _requests(gpus: float, cpu: float, memory_gib: float) -> ResourceVector:
    return ResourceVector.of(cpu=cpu, memory=memory_gib * GIB, gpu=gpus, pods=1)


# (weight, whole GPUs, fraction, cpu millicores, memory GiB, node selectors to pick from)
MIX = (
    (30, 1, None, 8_000, 64, ({POOL: "gpu-8x80gb"}, {ZONE: "zone-b"})),
    (10, 2, None, 16_000, 128, ({POOL: "gpu-4x40gb"},)),
    (8, 4, None, 32_000, 256, ({POOL: "gpu-8x80gb"},)),
    (5, 8, None, 64_000, 512, ()),
    (12, 0, 0.5, 4_000, 32, ({ZONE: "zone-a"},)),
    (10, 0, 0.25, 2_000, 16, ()),
    (25, 0, None, 4_000, 16, ({POOL: "cpu"}, {ZONE: "zone-c"})),
)


def pending_pods(count: int, seed: int = 7, first: int = 0) -> list[PendingPod]:
    """``count`` pending pods of the mix, named from ``first`` on."""
    rng = random.Random(seed)
    weights = [m[0] for m in MIX]
    out = []
    for i in range(count):
        _, gpus, fraction, cpu, memory, selectors = rng.choices(MIX, weights)[0]
        selector = rng.choice(selectors) if selectors and rng.random() < 0.35 else {}
        share = GpuShare(fraction=fraction) if fraction else None
        shape = TaskShape(_requests(gpus, cpu, memory), share, Constraints(tuple(sorted(selector.items()))))
        out.append(PendingPod(f"bench/pending-{first + i}", shape))
    return out


def busy_shard(nodes: int, seed: int = 11) -> Shard:
    """A shard over ``nodes`` synthetic nodes, about a third of it in use."""
    shard = Shard(0)
    cluster = model_nodes(nodes)
    shard.apply(ShardDeltas(nodes_upserted=tuple(cluster)))
    shard.apply(ShardDeltas(pods_upserted=tuple(_running_pods(cluster, random.Random(seed)))))
    return shard


def _running_pods(cluster: list[Node], rng: random.Random) -> list[Pod]:
    pods: list[Pod] = []

    def pod(
        node: Node,
        gpus: float,
        cpu: float,
        memory_gib: float,
        state: PodState = PodState.RUNNING,
        share: GpuShare | None = None,
        group: str | None = None,
    ) -> None:
        name = f"running-{len(pods)}"
        pods.append(
            Pod(
                "bench",
                name,
                uid=name,
                state=state,
                node=node.name,
                requests=_requests(gpus, cpu, memory_gib),
                gpu_share=share,
                gpu_groups=(group,) if group else (),
            )
        )

    for node in cluster:
        devices = node.gpu_count
        if devices == 0:
            for _ in range(rng.randrange(4)):
                pod(node, 0, 8_000, 32)
            continue
        used = rng.randrange(devices // 2 + 1)  # about a third of the GPUs in use
        for _ in range(used):
            pod(node, 1, 8_000, 64)
        if used < devices and rng.random() < 0.15:  # a shared GPU with one fraction on it
            pod(node, 0, 2_000, 16, share=GpuShare(fraction=0.5), group=f"{node.name}-shared")
            used += 1
        if used + 2 <= devices and rng.random() < 0.1:  # a terminating pod: capacity on its way back
            pod(node, 2, 16_000, 128, state=PodState.RELEASING)
    return pods
