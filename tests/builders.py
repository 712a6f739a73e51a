"""Small builders for cluster snapshots in tests: nodes, queues, jobs as model records."""

from __future__ import annotations

from dataclasses import dataclass, field

from kai_ray.config import SchedulerConfig
from kai_ray.model import (
    ClusterSnapshot,
    GpuShare,
    Node,
    Pod,
    PodGroup,
    PodState,
    Queue,
    QueueResource,
    ResourceVector,
    SubGroup,
)

GIB = 2**30


def node(
    name: str,
    gpu: int = 8,
    cpu: float = 64_000,
    memory: float = 512 * GIB,
    pods: int = 110,
    labels: dict[str, str] | None = None,
    gpu_memory: float = 81_920,
) -> Node:
    return Node(
        name,
        ResourceVector.of(cpu=cpu, memory=memory, gpu=gpu, pods=pods),
        labels={"kubernetes.io/hostname": name, **(labels or {})},
        gpu_memory_mib=gpu_memory,
    )


def queue(
    name: str,
    parent: str | None = None,
    gpu_quota: float = 0,
    gpu_limit: float = -1,
    weight: float = 1,
    priority: int = 100,
    created: float = 0.0,
) -> Queue:
    unlimited = QueueResource(quota=-1, over_quota_weight=1, limit=-1)
    return Queue(
        name,
        parent,
        priority,
        gpu=QueueResource(gpu_quota, weight, gpu_limit),
        cpu=unlimited,
        memory=unlimited,
        created=created,
    )


@dataclass
class JobSpec:
    name: str
    queue: str
    pods: int = 1
    gpu: float = 1
    fraction: float | None = None
    cpu: float = 1000
    memory: float = GIB
    priority: int = 50
    preemptible: bool | None = None
    min_member: int | None = None
    running_on: list[str] = field(default_factory=list)  # nodes of running pods, in pod order
    releasing_on: list[str] = field(default_factory=list)
    created: float = 0.0
    gpu_groups: list[str] = field(default_factory=list)
    sub_groups: list[tuple[str, int]] = field(default_factory=list)  # (name, minMember); pods dealt round-robin
    stale_since: float | None = None
    semi_preemptible: bool = False  # protected up to min_member, preemptible beyond (then not preemptible)


def build(nodes: list[Node], queues: list[Queue], jobs: list[JobSpec]) -> ClusterSnapshot:
    pods: list[Pod] = []
    groups: list[PodGroup] = []
    for job in jobs:
        preemptible = job.priority < 100 if job.preemptible is None else job.preemptible
        preemptible = preemptible and not job.semi_preemptible
        groups.append(
            PodGroup(
                "default",
                job.name,
                job.queue,
                job.priority,
                preemptible,
                min_member=job.min_member if job.min_member is not None else job.pods,
                sub_groups=tuple(SubGroup(name, m) for name, m in job.sub_groups),
                created=job.created,
                stale_since=job.stale_since,
                semi_preemptible=job.semi_preemptible,
            )
        )
        for i in range(job.pods):
            state, where = PodState.PENDING, None
            if i < len(job.running_on):
                state, where = PodState.RUNNING, job.running_on[i]
            elif i - len(job.running_on) < len(job.releasing_on):
                state, where = PodState.RELEASING, job.releasing_on[i - len(job.running_on)]
            share = GpuShare(fraction=job.fraction) if job.fraction else None
            groups_of_pod = (job.gpu_groups[i],) if share and where and i < len(job.gpu_groups) else ()
            pods.append(
                Pod(
                    "default",
                    f"{job.name}-{i}",
                    uid=f"uid-{job.name}-{i}",
                    state=state,
                    node=where,
                    requests=ResourceVector.of(cpu=job.cpu, memory=job.memory, gpu=0 if share else job.gpu, pods=1),
                    gpu_share=share,
                    gpu_groups=groups_of_pod,
                    created=job.created,
                    pod_group=job.name,
                    queue_label=job.queue,
                    subgroup=job.sub_groups[i % len(job.sub_groups)][0] if job.sub_groups else None,
                )
            )
    return ClusterSnapshot(nodes=tuple(nodes), pods=tuple(pods), pod_groups=tuple(groups), queues=tuple(queues))


def config(**overrides: object) -> SchedulerConfig:
    return SchedulerConfig.model_validate({"kValue": 0, **overrides})
