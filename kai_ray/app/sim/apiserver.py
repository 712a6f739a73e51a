"""The simulator's API server: its objects as Kubernetes manifests, every write a watch event.

``kai-ray run`` learns the cluster from watch events that the adapter's ``ClusterCache`` turns
into deltas; the simulator feeds the same cache the same way, in process and without HTTP, so
the main job exercises the decoding, grouping and delta path production runs on. Manifests are
written the way the API server stores them (requests defaulted from limits, nodeName and phase
set on binding, deletionTimestamp while terminating), from the simulator's own records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kai_ray import labels as L
from kai_ray.model import GPU_RESOURCE, Node, Pod, PodGroup, PodState, Queue, QueueResource, ResourceVector

JSON = dict[str, Any]
Sink = Callable[[str, str, JSON], None]  # kind name, event type, object
MEMORY_UNIT = 1_000_000  # Queue memory is written in 10^6 bytes


def timestamp(seconds: float) -> str:
    """Simulated seconds as an RFC 3339 time (second 0 is the epoch)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _duration(seconds: float) -> str:
    """Seconds as a Go duration, in seconds and without an exponent ("1140s", "4500.5s")."""
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


def _amounts(vector: ResourceVector, with_pods: bool) -> dict[str, str]:
    amounts = {"cpu": f"{vector.cpu:.0f}m", "memory": f"{vector.memory:.0f}"}
    if vector.gpu:
        amounts[GPU_RESOURCE] = f"{vector.gpu:g}"
    if with_pods:
        amounts["pods"] = f"{vector.pods:g}"
    amounts.update({name: f"{amount:g}" for name, amount in vector.scalars.items()})
    return amounts


def node_manifest(node: Node) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": dict(node.labels)},
        "spec": {
            "unschedulable": node.unschedulable,
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints],
        },
        "status": {
            "allocatable": _amounts(node.allocatable, with_pods=True),
            "conditions": [{"type": "Ready", "status": "True" if node.ready else "False"}],
        },
    }


def _queue_resource(resource: QueueResource, scale: float) -> JSON:
    def amount(value: float) -> float:
        return value if value == -1 else value / scale

    return {
        "quota": amount(resource.quota),
        "overQuotaWeight": resource.over_quota_weight,
        "limit": amount(resource.limit),
    }


def queue_manifest(queue: Queue) -> JSON:
    spec: JSON = {
        "priority": queue.priority,
        "resources": {
            "gpu": _queue_resource(queue.gpu, 1),
            "cpu": _queue_resource(queue.cpu, 1),
            "memory": _queue_resource(queue.memory, MEMORY_UNIT),
        },
    }
    if queue.parent:
        spec["parentQueue"] = queue.parent
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": queue.name, "creationTimestamp": timestamp(queue.created)},
        "spec": spec,
    }


def priority_class_manifest(name: str, value: int) -> JSON:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def pod_group_manifest(group: PodGroup) -> JSON:
    spec: JSON = {"minMember": group.min_member, "queue": group.queue}
    if group.priority_class_name:
        spec["priorityClassName"] = group.priority_class_name
    if group.preemptible != (group.priority < L.PREEMPTIBLE_BELOW):  # set apart from what its priority says
        spec["preemptibility"] = "preemptible" if group.preemptible else "non-preemptible"
    metadata: JSON = {
        "name": group.name,
        "namespace": group.namespace,
        "uid": group.uid,
        "creationTimestamp": timestamp(group.created),
    }
    if group.expected_runtime_seconds:  # what reservations, backfill and expectedRuntimeExceeded read
        metadata["annotations"] = {L.EXPECTED_RUNTIME_ANNOTATION: _duration(group.expected_runtime_seconds)}
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": metadata, "spec": spec}


def pod_manifest(pod: Pod, now: float) -> JSON:
    annotations: dict[str, str] = dict(pod.annotations)
    labels: dict[str, str] = dict(pod.labels)
    if pod.pod_group:
        annotations[L.POD_GROUP_ANNOTATION] = pod.pod_group
    if pod.queue_label:
        labels[L.QUEUE_LABEL] = pod.queue_label
    if pod.gpu_share is not None and pod.gpu_share.fraction is not None:
        annotations[L.GPU_FRACTION_ANNOTATION] = f"{pod.gpu_share.fraction:g}"
    for i, group in enumerate(pod.gpu_groups):  # the binder labels a placed fraction with its GPUs
        labels[L.GPU_GROUP_LABEL if i == 0 else f"{L.GPU_GROUP_LABEL}/{group}"] = group
    requests = _amounts(pod.requests, with_pods=False)
    limits = {GPU_RESOURCE: requests[GPU_RESOURCE]} if GPU_RESOURCE in requests else {}
    spec: JSON = {
        "schedulerName": pod.scheduler_name,
        "containers": [{"name": "main", "image": "sim", "resources": {"requests": requests, "limits": limits}}],
        "tolerations": [
            {"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect} for t in pod.tolerations
        ],
    }
    if pod.priority_class_name:
        spec["priorityClassName"] = pod.priority_class_name
    if pod.resource_claims:
        spec["resourceClaims"] = [{"name": c.name, "resourceClaimName": c.claim} for c in pod.resource_claims]
        spec["containers"][0]["resources"]["claims"] = [{"name": c.name} for c in pod.resource_claims]
    meta: JSON = {
        "name": pod.name,
        "namespace": pod.namespace,
        "uid": pod.uid,
        "creationTimestamp": timestamp(pod.created),
        "labels": labels,
        "annotations": annotations,
    }
    if pod.node is not None and pod.state is not PodState.PIPELINED:
        spec["nodeName"] = pod.node
    if pod.state is PodState.RELEASING:
        meta["deletionTimestamp"] = timestamp(now)
    phase = {PodState.SUCCEEDED: "Succeeded", PodState.FAILED: "Failed"}.get(pod.state)
    running = pod.state in (PodState.RUNNING, PodState.RELEASING)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase or ("Running" if running else "Pending")},
    }


class SimApiServer:
    """Objects by kind and key, one resourceVersion counter, each write an event to ``sink``."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.version = 0
        self.objects: dict[str, dict[str, JSON]] = {}
        self.writes = 0  # since the last ``take_writes``

    def put(self, kind: str, key: str, obj: JSON) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        store = self.objects.setdefault(kind, {})
        event = "MODIFIED" if key in store else "ADDED"
        store[key] = obj
        self.writes += 1
        self.sink(kind, event, obj)

    def delete(self, kind: str, key: str) -> None:
        obj = self.objects.get(kind, {}).pop(key, None)
        if obj is None:
            return
        self.version += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
        self.writes += 1
        self.sink(kind, "DELETED", obj)

    def take_writes(self) -> int:
        writes, self.writes = self.writes, 0
        return writes

    def items(self, kind: str) -> Mapping[str, JSON]:
        return self.objects.get(kind, {})
