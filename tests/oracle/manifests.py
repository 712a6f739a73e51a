"""The Kubernetes objects of a seeded cluster: a ``Case`` and the manifests it is made of.

Nodes, queues, PodGroups and their pods are written here, from plain descriptions (``Job``)
the generators (``clusters.py``, ``contended.py``) draw; both schedulers read the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
GIB = 2**30
PRIORITY_CLASSES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
NODE_KINDS = {  # name: (gpus, cpu millicores, memory GiB)
    "gpu8": (8, 64_000, 512),
    "gpu4": (4, 32_000, 256),
    "gpu2": (2, 16_000, 128),
    "cpu": (0, 32_000, 128),
}

Doc = dict[str, Any]


@dataclass
class Case:
    seed: int
    focus: str
    documents: list[Doc]
    config: Doc
    actions: str
    now: str = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def case_id(self) -> str:
        return f"seed-{self.seed}-{self.focus}"


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def priority_classes() -> list[Doc]:
    return [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in PRIORITY_CLASSES.items()
    ]


def node(name: str, kind: str, pool: str, pods: int, gpu_memory: int, labels: dict[str, str] | None = None) -> Doc:
    gpus, cpu, memory = NODE_KINDS[kind]
    allocatable = {"cpu": f"{cpu}m", "memory": f"{memory}Gi", "pods": str(pods)}
    all_labels = {"pool": pool, "node-kind": kind, **(labels or {})}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
        all_labels["nvidia.com/gpu.memory"] = str(gpu_memory)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "status": {
            "allocatable": allocatable,
            "capacity": dict(allocatable),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def queue(name: str, parent: str | None, priority: int, resources: Doc, order: int) -> Doc:
    spec: Doc = {"priority": priority, "resources": resources}
    if parent:
        spec["parentQueue"] = parent
    created = stamp(datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=order))
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": spec,
    }


@dataclass
class Job:
    name: str
    queue: str
    priority_class: str
    preemptibility: str | None
    pods: int
    min_member: int
    shape: str  # whole | fraction | memory | cpu
    gpus: int
    fraction: float | None
    cpu: int
    memory: int
    age_minutes: int
    running: int
    releasing: int
    affinity_pool: str | None = None
    sub_groups: list[tuple[str, int]] = field(default_factory=list)
    runtime_minutes: int | None = None  # since kai.scheduler/last-start-timestamp
    stale_seconds: int | None = None  # since kai.scheduler/stale-podgroup-timestamp
    placed: list[tuple[str, str]] = field(default_factory=list)  # (node, gpu group) of running/releasing pods
    gpu_memory_mib: int | None = None  # the gpu-memory annotation: a share of a GPU sized per node
    node_selector: dict[str, str] | None = None


def pod_group(job: Job) -> Doc:
    created = NOW - timedelta(minutes=job.age_minutes)
    annotations: Doc = {}
    if job.runtime_minutes is not None and job.placed:
        annotations["kai.scheduler/last-start-timestamp"] = stamp(NOW - timedelta(minutes=job.runtime_minutes))
    if job.stale_seconds is not None:
        annotations["kai.scheduler/stale-podgroup-timestamp"] = stamp(NOW - timedelta(seconds=job.stale_seconds))
    spec: Doc = {"minMember": job.min_member, "queue": job.queue, "priorityClassName": job.priority_class}
    if job.preemptibility:
        spec["preemptibility"] = job.preemptibility
    if job.sub_groups:
        spec["subGroups"] = [{"name": n, "minMember": m} for n, m in job.sub_groups]
    meta: Doc = {"name": job.name, "namespace": "default", "creationTimestamp": stamp(created)}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": meta, "spec": spec}


def pods(job: Job) -> list[Doc]:
    docs = []
    created = stamp(NOW - timedelta(minutes=job.age_minutes))
    for i in range(job.pods):
        requests: Doc = {"cpu": f"{job.cpu}m", "memory": str(job.memory)}
        annotations: Doc = {"pod-group-name": job.name}
        labels: Doc = {"kai.scheduler/queue": job.queue}
        container: Doc = {"name": "main", "image": "busybox", "resources": {"requests": requests}}
        if job.gpus:
            requests["nvidia.com/gpu"] = str(job.gpus)
            container["resources"]["limits"] = {"nvidia.com/gpu": str(job.gpus)}
        if job.fraction is not None:
            annotations["gpu-fraction"] = str(job.fraction)
        if job.gpu_memory_mib is not None:
            annotations["gpu-memory"] = str(job.gpu_memory_mib)
        if job.sub_groups:
            labels["kai.scheduler/subgroup-name"] = job.sub_groups[i % len(job.sub_groups)][0]
        spec: Doc = {"schedulerName": "kai-scheduler", "containers": [container]}
        if job.node_selector:
            spec["nodeSelector"] = dict(job.node_selector)
        if job.affinity_pool:
            term = {"matchExpressions": [{"key": "pool", "operator": "In", "values": [job.affinity_pool]}]}
            spec["affinity"] = {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
            }
        meta: Doc = {"name": f"{job.name}-{i}", "namespace": "default", "creationTimestamp": created}
        status: Doc = {"phase": "Pending"}
        if i < len(job.placed):
            node_name, group = job.placed[i]
            spec["nodeName"] = node_name
            status = {"phase": "Running"}
            if group:
                labels["runai-gpu-group"] = group
            if i >= job.running:
                meta["deletionTimestamp"] = stamp(NOW - timedelta(seconds=5))
        meta["labels"] = labels
        meta["annotations"] = annotations
        docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status})
    return docs
