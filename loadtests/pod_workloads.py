"""Pending-pod workloads for the benchmark suite, on the synthetic GPU node pools.

- ``scheduler_perf``: kube-scheduler's SchedulingBasic shape on a GPU cluster: single-pod
  jobs, 70% asking one GPU and 30% CPU only, all pending at once.
- ``kai_fill``: KAI's own scale test "fill the cluster": 500 nodes of 8 GPUs and 4,000
  one-GPU jobs, exactly enough to fill every GPU.

All jobs sit in one leaf queue with unlimited quota, so what is measured is placement and
commit, not fair-share waiting.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_ray.app.sim.cluster import SHAPES, kwok_node, model_nodes
from kai_ray.deltas import ClusterDeltas
from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_core import parse_node
from kai_ray.model import Node, Pod, PodGroup, Queue, QueueResource, ResourceVector, Toleration

GIB = 2**30
NAMESPACE = "bench"
UNLIMITED = QueueResource(quota=-1, over_quota_weight=1, limit=-1)
QUEUES = (
    Queue("bench", None, gpu=UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED),
    Queue("bench-team", "bench", gpu=UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED, created=1.0),
)
KWOK = Toleration("kwok.x-k8s.io/node", "Exists", "", "NoSchedule")


@dataclass(frozen=True, slots=True)
class PodWorkload:
    label: str
    cluster: ClusterDeltas  # nodes and queues, loaded before the clock starts
    pending: ClusterDeltas  # pod groups and their pods, all pending
    pods: int


def _job(index: int, gpus: float, cpu_millis: float, memory: float) -> tuple[PodGroup, Pod]:
    name = f"job-{index:06d}"
    group = PodGroup(
        NAMESPACE, name, "bench-team", 50, True, 1, priority_class_name="train", created=float(index), uid=f"pg-{name}"
    )
    pod = Pod(
        NAMESPACE,
        f"{name}-0",
        uid=f"pod-{name}",
        requests=ResourceVector.of(cpu=cpu_millis, memory=memory, gpu=gpus, pods=1),
        tolerations=(KWOK,),
        created=float(index),
        pod_group=name,
        queue_label="bench-team",
        priority_class_name="train",
    )
    return group, pod


def _pending(jobs: list[tuple[PodGroup, Pod]]) -> ClusterDeltas:
    return ClusterDeltas(pod_groups_upserted=tuple(g for g, _ in jobs), pods_upserted=tuple(p for _, p in jobs))


def scheduler_perf(nodes: int, pods: int) -> PodWorkload:
    jobs = [_job(i, 1, 4_000, 16 * GIB) if i % 10 < 7 else _job(i, 0, 2_000, 4 * GIB) for i in range(pods)]
    cluster = ClusterDeltas(nodes_upserted=tuple(model_nodes(nodes, taint=True)), queues_upserted=QUEUES)
    return PodWorkload(f"SchedulingBasic {nodes:,} nodes / {pods:,} pods", cluster, _pending(jobs), pods)


def eight_gpu_nodes(count: int) -> list[Node]:
    """KAI's scale-test nodes: 8 GPUs each, kwok's taint."""
    eight_gpu = SHAPES[0]
    return [parse_node(ObjectReader(kwok_node(f"gpu-node-{i:04d}", eight_gpu, i, taint=True), i)) for i in range(count)]


def kai_fill(nodes: int = 500, jobs: int = 4_000) -> PodWorkload:
    pods = [_job(i, 1, 1_000, 4 * GIB) for i in range(jobs)]
    cluster = ClusterDeltas(nodes_upserted=tuple(eight_gpu_nodes(nodes)), queues_upserted=QUEUES)
    return PodWorkload(f"KAI fill: {nodes:,} x 8-GPU nodes / {jobs:,} one-GPU jobs", cluster, _pending(pods), jobs)
