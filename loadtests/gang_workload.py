"""A gang-heavy workload: 8-GPU nodes already partly used, and waves of all-or-nothing gangs.

Other schedulers' pods take 1-7 GPUs on most nodes, so free GPUs are scattered in small
pieces and an 8-pod gang (1 GPU per pod, minMember 8) nearly always spans several nodes,
which is what exercises a gang commit across shards. Gangs arrive in waves, spread over
a few queues; there is room for every gang, so a correct scheduler binds them all.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kai_ray.deltas import ClusterDeltas
from kai_ray.model import Node, Pod, PodGroup, PodState, Queue, QueueResource, ResourceVector

GIB = 2**30
GPUS_PER_NODE = 8
NAMESPACE = "bench"


@dataclass(frozen=True, slots=True)
class GangWorkload:
    nodes: int
    gangs: int
    pods_per_gang: int
    cluster: ClusterDeltas  # nodes, queues and the pods already running
    waves: tuple[ClusterDeltas, ...]  # pod groups and their pending pods, in arrival order
    free_gpus: int  # GPUs not used by the running pods

    @property
    def label(self) -> str:
        return f"{self.nodes} nodes / {self.gangs} gangs x {self.pods_per_gang} pods"


def gang_workload(
    nodes: int, gangs: int, waves: int, pods_per_gang: int = 8, queues: int = 4, used_share: float = 0.6, seed: int = 7
) -> GangWorkload:
    """``used_share`` of the nodes run another scheduler's pod that holds 1-7 of their GPUs."""
    rng = random.Random(seed)
    node_list = [
        Node(
            f"node-{i:05d}",
            ResourceVector.of(cpu=64_000, memory=512 * GIB, gpu=GPUS_PER_NODE, pods=110),
            labels={"kubernetes.io/hostname": f"node-{i:05d}"},
            gpu_memory_mib=81_920,
        )
        for i in range(nodes)
    ]
    running: list[Pod] = []
    free = nodes * GPUS_PER_NODE
    for node in node_list:
        if rng.random() < used_share:
            gpus = rng.randint(1, GPUS_PER_NODE - 1)
            free -= gpus
            running.append(
                Pod(
                    "other",
                    f"busy-{node.name}",
                    uid=f"uid-busy-{node.name}",
                    scheduler_name="default-scheduler",
                    state=PodState.RUNNING,
                    node=node.name,
                    requests=ResourceVector.of(cpu=4_000 * gpus, memory=32 * GIB * gpus, gpu=gpus, pods=1),
                )
            )
    if free < gangs * pods_per_gang:
        raise ValueError(f"{gangs} gangs of {pods_per_gang} do not fit in {free} free GPUs")
    quota = float(gangs * pods_per_gang // queues + pods_per_gang)
    unlimited = QueueResource(-1.0, 1.0, -1.0)
    queue_list = tuple(
        Queue(
            f"team-{q}",
            None,
            100,
            gpu=QueueResource(quota, 1.0, -1.0),
            cpu=unlimited,
            memory=unlimited,
            created=float(q),
        )
        for q in range(queues)
    )
    cluster = ClusterDeltas(nodes_upserted=tuple(node_list), pods_upserted=tuple(running), queues_upserted=queue_list)
    per_wave = -(-gangs // waves)
    arrivals = []
    for first in range(0, gangs, per_wave):
        groups: list[PodGroup] = []
        pods: list[Pod] = []
        for g in range(first, min(first + per_wave, gangs)):
            name, queue = f"gang-{g:05d}", f"team-{g % queues}"
            groups.append(
                PodGroup(
                    NAMESPACE,
                    name,
                    queue,
                    priority=50,
                    preemptible=True,
                    min_member=pods_per_gang,
                    created=float(g),
                    uid=f"uid-{name}",
                )
            )
            pods.extend(
                Pod(
                    NAMESPACE,
                    f"{name}-{k}",
                    uid=f"uid-{name}-{k}",
                    created=float(g),
                    pod_group=name,
                    queue_label=queue,
                    requests=ResourceVector.of(cpu=4_000, memory=32 * GIB, gpu=1, pods=1),
                )
                for k in range(pods_per_gang)
            )
        arrivals.append(ClusterDeltas(pods_upserted=tuple(pods), pod_groups_upserted=tuple(groups)))
    return GangWorkload(nodes, gangs, pods_per_gang, cluster, tuple(arrivals), free)
