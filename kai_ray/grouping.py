"""Which PodGroup a pod belongs to when it names none (KAI's pod grouper rules).

Kept free of Kubernetes I/O so that the snapshot loader and the adapter share it:
the caller passes the pod and the chain of its owners, nearest first.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_ray import labels as L
from kai_ray.model import Pod

# Owners whose pods each get a PodGroup of their own (serving workloads).
_PER_POD_KINDS = {"Deployment", "ReplicaSet", "StatefulSet", "Service"}
# Distributed workloads: their gang size comes from the owner's spec, which only the pod
# grouper (with API access) can read, so they are not grouped implicitly.
GANG_KINDS = {
    "PyTorchJob",
    "MPIJob",
    "TFJob",
    "XGBoostJob",
    "JAXJob",
    "JobSet",
    "RayCluster",
    "RayJob",
    "LeaderWorkerSet",
}


def needs_pod_grouper(owners: tuple[OwnerRef, ...]) -> bool:
    """True when the pod belongs to a distributed workload whose PodGroup must come from the grouper."""
    return bool(owners) and owners[-1].kind in GANG_KINDS


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str
    min_member: int | None = None  # a gang size the owner asks for, if any


@dataclass(frozen=True, slots=True)
class ImplicitGroup:
    name: str
    min_member: int
    queue: str
    priority_class_name: str | None
    preemptibility: str | None = None  # the pod's label as written; the caller validates it


def implicit_group(pod: Pod, owners: tuple[OwnerRef, ...]) -> ImplicitGroup:
    """The PodGroup KAI's pod grouper would create for ``pod``: ``pg-<top owner>-<uid>``."""
    top = owners[-1] if owners else None
    queue = pod.queue_label or _project_queue(pod) or L.DEFAULT_QUEUE
    preemptibility = pod.labels.get(L.PREEMPTIBILITY_LABEL) or None
    if top is None or top.kind in _PER_POD_KINDS:
        return ImplicitGroup(_name(pod.name, pod.uid), 1, queue, pod.priority_class_name, preemptibility)
    return ImplicitGroup(_name(top.name, top.uid), top.min_member or 1, queue, pod.priority_class_name, preemptibility)


def _project_queue(pod: Pod) -> str | None:
    """KAI's fallback when no queue label is set: the ``project`` label, suffixed with the pod's
    node pool when it has one (``<project>-<pool>``)."""
    project = pod.labels.get(L.PROJECT_LABEL)
    if not project:
        return None
    pool = pod.labels.get(L.NODE_POOL_LABEL)
    return f"{project}-{pool}" if pool else project


def _name(owner: str, uid: str) -> str:
    return f"pg-{owner}-{uid}" if uid else f"pg-{owner}"
