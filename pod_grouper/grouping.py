"""Which PodGroup a pod belongs to when it names none (KAI's pod grouper rules).

Kept free of Kubernetes I/O so that the snapshot loader and the adapter share it:
the caller passes the pod and the chain of its owners, nearest first.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kai_ray import labels as L
from kai_ray.model import Pod, SubGroup, TopologyConstraint
from pod_grouper.workloads import WorkloadError, WorkloadGroup, workload_group

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


def own_group_name(pod: Pod, owners: tuple[OwnerRef, ...]) -> str | None:
    """``pg-<pod>-<uid>`` for a bare pod that KAI's pod grouper gives a PodGroup of its own (no
    controller, not a Spark application's pod sharing its application's group), else None."""
    if owners or not pod.uid:
        return None
    name = _name(pod.name, pod.uid)
    grouped = implicit_group(pod, owners)
    return name if grouped.name == name and grouped.subgroup is None else None


def awaits_own_group(pod: Pod, owners: tuple[OwnerRef, ...], existing: Container[str]) -> bool:
    """Whether the pod names its own group (``own_group_name``: the binding annotated it) whose
    object is not among ``existing`` (not created yet, or deleted). Such a pod is grouped as if it
    named none, by the live cache and the snapshot loader alike."""
    return (
        bool(pod.pod_group)
        and f"{pod.namespace}/{pod.pod_group}" not in existing
        and pod.pod_group == own_group_name(pod, owners)
    )


def needs_pod_grouper(owners: tuple[OwnerRef, ...]) -> bool:
    """True when the pod belongs to a distributed workload whose PodGroup must come from the grouper."""
    return bool(owners) and owners[-1].kind in GANG_KINDS


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str
    min_member: int | None = None  # a gang size the owner asks for, if any


def controller_refs(references: Iterable[object]) -> tuple[OwnerRef, ...]:
    """The controllers among an object's ``metadata.ownerReferences``; an entry that is not a
    mapping, or names no kind or no name, is passed over."""
    return tuple(
        OwnerRef(str(ref["kind"]), str(ref["name"]), str(ref.get("uid") or ""))
        for ref in references
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("kind") and ref.get("name")
    )


@dataclass(frozen=True, slots=True)
class ImplicitGroup:
    name: str
    min_member: int
    queue: str
    priority_class_name: str | None
    preemptibility: str | None = None  # the pod's label as written; the caller validates it
    sub_groups: tuple[SubGroup, ...] = ()
    min_sub_group: int | None = None
    topology: TopologyConstraint | None = None
    subgroup: str | None = None  # the sub-group this pod joins
    note: str = ""  # why KAI's rules for the workload could not be applied


JSON = Mapping[str, Any]


def implicit_group(
    pod: Pod, owners: tuple[OwnerRef, ...], top_doc: JSON | None = None, related: JSON | None = None
) -> ImplicitGroup:
    """The PodGroup KAI's pod grouper would create for ``pod``: ``pg-<top owner>-<uid>``, shaped by
    KAI's rules for the top owner's kind when its object (``top_doc``) is at hand."""
    top = owners[-1] if owners else None
    queue = pod.queue_label or _project_queue(pod) or L.DEFAULT_QUEUE
    # KAI's grouper: the top owner's label first, then the pod's.
    owner_labels = ((top_doc or {}).get("metadata") or {}).get("labels") or {}
    preemptibility = owner_labels.get(L.PREEMPTIBILITY_LABEL) or pod.labels.get(L.PREEMPTIBILITY_LABEL) or None
    if top is not None and top.kind in _PER_POD_KINDS:
        return ImplicitGroup(_name(pod.name, pod.uid), 1, queue, pod.priority_class_name, preemptibility)
    me = pod_json(pod)
    kind, doc = ("Pod", me) if top is None else (top.kind, top_doc)
    name = _name(pod.name, pod.uid) if top is None else _name(top.name, top.uid)
    if doc is None:
        shape, note = WorkloadGroup(top.min_member or 1 if top else 1), ""
    else:
        try:
            shape = workload_group(kind, doc, me, related)
            note = "; ".join(shape.notes)
        except WorkloadError as exc:
            shape, note = WorkloadGroup(1), f"{kind} {name}: {exc}; its pods are grouped with minMember 1"
    return ImplicitGroup(
        shape.name or name,
        shape.min_member,
        queue,
        pod.priority_class_name or shape.priority_class,
        preemptibility,
        shape.sub_groups,
        shape.min_sub_group,
        shape.topology,
        shape.subgroup,
        note,
    )


def pod_json(pod: Pod) -> JSON:
    """The parts of a pod's manifest the workload rules read."""
    return {
        "metadata": {"name": pod.name, "uid": pod.uid, "labels": dict(pod.labels), "annotations": dict(pod.annotations)}
    }


def top_owner(
    namespace: str, refs: tuple[OwnerRef, ...], docs: Mapping[tuple[str, str, str], JSON]
) -> tuple[tuple[OwnerRef, ...], JSON | None]:
    """The pod's owner chain followed through the owner objects at hand (``docs`` by namespace,
    kind, name), and the top owner's object if it is among them. Like KAI's grouper, the walk
    stops at a batch Job: a CronJob's runs are separate workloads."""
    chain = list(refs)
    doc = docs.get((namespace, chain[-1].kind, chain[-1].name)) if chain else None
    for _ in range(MAX_OWNER_DEPTH):
        if doc is None or chain[-1].kind == "Job":
            break
        ref = next((r for r in (doc.get("metadata") or {}).get("ownerReferences") or [] if r.get("controller")), None)
        if ref is None or not ref.get("kind") or not ref.get("name"):
            break
        chain.append(OwnerRef(str(ref["kind"]), str(ref["name"]), str(ref.get("uid") or "")))
        doc = docs.get((namespace, chain[-1].kind, chain[-1].name))
    return tuple(chain), doc


MAX_OWNER_DEPTH = 5
# Owner objects a snapshot may hold whose kind decides the PodGroup (and those between a pod and
# them, to walk up to the top owner).
WORKLOAD_DOC_KINDS = frozenset(
    {
        "Job",
        "PyTorchJob",
        "TFJob",
        "XGBoostJob",
        "JAXJob",
        "MPIJob",
        "Notebook",
        "JobSet",
        "LeaderWorkerSet",
        "RayCluster",
        "RayJob",
        "Service",
        "Configuration",
        "Revision",
        "ReplicaSet",
        "Deployment",
        "StatefulSet",
    }
)


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
