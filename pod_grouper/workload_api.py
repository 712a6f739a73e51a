"""Gangs of the Kubernetes Workload API (scheduling.k8s.io, KEP-4671) as KAI PodGroups.

A pod joins a gang by naming a scheduling.k8s.io PodGroup in ``spec.schedulingGroup.podGroupName``;
that PodGroup carries the gang policy (``gang.minCount``, or ``basic``) and may point at the
template of a Workload it was made from. KAI's design for the API maps each such group to a KAI
PodGroup: the gang's ``minCount`` is the minMember (``basic``: 1), and the queue, priority class
and preemptibility come from the group, then its Workload, then its pods. That mapping is here,
pure, so the snapshot reader and the running scheduler make the same groups
(docs/workload-api.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kai_ray import labels as L
from pod_grouper.pod_groups import RawPodGroup

API_GROUP = "scheduling.k8s.io"


@dataclass(frozen=True, slots=True)
class GangTemplate:
    """One ``spec.podGroupTemplates`` entry of a Workload."""

    name: str
    min_count: int | None  # None: the basic policy (no gang)
    priority_class_name: str | None = None


@dataclass(frozen=True, slots=True)
class WorkloadObject:
    namespace: str
    name: str
    labels: Mapping[str, str]
    templates: Mapping[str, GangTemplate]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class GangPodGroup:
    """A scheduling.k8s.io PodGroup as written: the runtime instance of a gang."""

    namespace: str
    name: str
    uid: str
    api_version: str
    created: float
    labels: Mapping[str, str]
    min_count: int | None  # None: the basic policy (no gang)
    priority_class_name: str | None
    workload: str | None  # spec.workloadRef (v1beta1, v1alpha3) or podGroupTemplateRef (v1alpha2)
    template: str | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def describe(gang: GangPodGroup) -> str:
    """The gang in words, as pending reasons and ``kai-ray schedule`` name it."""
    policy = f"minCount {gang.min_count}" if gang.min_count is not None else "basic policy"
    made_from = f", Workload {gang.workload} template {gang.template}" if gang.workload else ""
    return f"Workload API gang {gang.key} ({API_GROUP} PodGroup{made_from}, {policy})"


def gang_raw_group(gang: GangPodGroup, workloads: Mapping[str, WorkloadObject]) -> RawPodGroup:
    """The KAI PodGroup the gang is scheduled as. What the group leaves unset its Workload decides
    (its labels, its template's priority class); a queue neither names is its pods' (resolved
    with the members, as for a KAI PodGroup without ``spec.queue``)."""
    workload = workloads.get(f"{gang.namespace}/{gang.workload}") if gang.workload else None
    template = workload.templates.get(gang.template or "") if workload is not None else None
    owner_labels: Mapping[str, str] = workload.labels if workload is not None else {}

    def label(key: str) -> str | None:
        return gang.labels.get(key) or owner_labels.get(key) or None

    preemptibility = label(L.PREEMPTIBILITY_LABEL)
    return RawPodGroup(
        namespace=gang.namespace,
        name=gang.name,
        uid=gang.uid,
        queue=label(L.QUEUE_LABEL) or label(L.LEGACY_QUEUE_LABEL),
        priority_class_name=gang.priority_class_name
        or (template.priority_class_name if template is not None else None)
        or label(L.PRIORITY_CLASS_LABEL),
        preemptibility=preemptibility if preemptibility in L.PREEMPTIBILITIES else None,
        min_member=gang.min_count if gang.min_count is not None else 1,
        sub_groups=(),
        created=gang.created,
        staleness_grace_seconds=None,
        stale_since=None,
        last_start=None,
        workload_api=describe(gang),
    )
