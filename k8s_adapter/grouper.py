"""The pod grouper: PodGroups for workloads whose pods name none, as KAI's podgrouper makes them.

For a pod of this scheduler without ``pod-group-name``, the grouper finds the pod's top
owner (following controller references through the API), creates ``pg-<owner>-<uid>``
shaped by KAI's rules for the workload kind (``kai_ray/workloads.py``: the gang size, the
sub-groups of a PyTorchJob and its segments, the topology constraint from the owner's
annotations), and annotates the pod (and labels it with its sub-group). Distributed kinds are
not scheduled before their PodGroup exists; serving kinds get one group per pod.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from k8s_adapter.api import JSON, KubeApi, KubeError
from k8s_adapter.kinds import KNATIVE_REVISION, OWNER_KINDS, POD_GROUPS, PODS, Kind
from kai_ray import labels as L
from kai_ray.workloads import KNATIVE_REVISION_LABEL, WorkloadError, WorkloadGroup, workload_group

log = logging.getLogger(__name__)
GROUPING_CONCURRENCY = 32  # pods grouped at once (each a few API round trips)
PER_POD_KINDS = {"Deployment", "ReplicaSet", "StatefulSet"}
SERVING_KINDS = {"Deployment", "ReplicaSet", "StatefulSet"}
MAX_DEPTH = 5


class PodGrouper:
    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.done: set[str] = set()  # pods annotated by us whose annotation the watch has not shown yet

    async def group(self, pods: Iterable[JSON]) -> int:
        """Create PodGroups for these ungrouped pods and annotate them; how many were handled.
        ``pods`` is the whole current work list: a pod no longer on it (annotated, finished,
        deleted) is forgotten, so ``done`` never outgrows the pods still waiting for the watch."""
        work = []
        for pod in pods:
            meta = pod.get("metadata") or {}
            # By uid too: a pod re-created under the same name is a new pod to annotate.
            work.append((f"{meta.get('namespace') or 'default'}/{meta.get('name')}@{meta.get('uid')}", pod, meta))
        self.done.intersection_update(key for key, _, _ in work)
        # Each pod costs a few round trips (its owners, the PodGroup, its annotation): thousands
        # of new pods one after another take minutes, so a bounded number are grouped at once.
        # Pods of one workload may race to create its PodGroup; the loser's 409 means it exists.
        limit = asyncio.Semaphore(GROUPING_CONCURRENCY)

        async def one(key: str, pod: JSON, meta: JSON) -> bool:
            async with limit:
                try:
                    await self._group_one(pod, meta)
                except KubeError as exc:
                    log.info("could not group %s yet: %s", key, exc)
                    return False
            self.done.add(key)
            return True

        handled = sum(await asyncio.gather(*(one(*item) for item in work if item[0] not in self.done)))
        return handled

    async def _group_one(self, pod: JSON, meta: JSON) -> None:
        namespace = str(meta.get("namespace") or "default")
        top_kind, top = await self._top_owner(pod, namespace)
        per_pod = top is pod or top_kind in PER_POD_KINDS
        named_after = pod if per_pod else top  # serving workloads: one PodGroup per pod
        name = _group_name(named_after.get("metadata") or {})
        top_meta = top.get("metadata") or {}
        labels = {**(meta.get("labels") or {}), **(top_meta.get("labels") or {})}
        serving = top is not pod and top_kind in PER_POD_KINDS
        shape = WorkloadGroup(1) if serving else await self._shape(top_kind, top, pod, namespace)
        if shape.name:
            name = shape.name
        priority_class = (
            labels.get(L.PRIORITY_CLASS_LABEL)
            or (pod.get("spec") or {}).get("priorityClassName")
            or shape.priority_class
            or ("inference" if top_kind in SERVING_KINDS else "train")
        )
        group = {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"kai.scheduler/created-by": "kai-ray"},
                "annotations": _timing_annotations(top_meta, meta),
                "ownerReferences": [_owner_reference(top, top_kind)],
            },
            "spec": {
                "minMember": shape.min_member,
                "queue": labels.get(L.QUEUE_LABEL) or labels.get(L.LEGACY_QUEUE_LABEL) or L.DEFAULT_QUEUE,
                "priorityClassName": priority_class,
                **pod_group_shape(shape),
            },
        }
        try:
            await self.api.request("POST", POD_GROUPS.collection(namespace), body=group)
        except KubeError as exc:
            if exc.status != 409:  # already made by an earlier pod of the same workload
                raise
        await self.api.request(
            "PATCH",
            PODS.item(str(meta.get("name")), namespace),
            body={"metadata": _pod_patch(name, shape.subgroup)},
            content_type="application/merge-patch+json",
        )

    async def _shape(self, kind: str, top: JSON, pod: JSON, namespace: str) -> WorkloadGroup:
        """KAI's rules for the workload kind; a workload they refuse gets a plain group of one,
        with the reason logged, so its pods still wait visibly rather than not at all."""
        related = None
        revision = ((pod.get("metadata") or {}).get("labels") or {}).get(KNATIVE_REVISION_LABEL)
        if kind == "Service" and revision:
            related = await self._get(KNATIVE_REVISION, str(revision), namespace)
        try:
            shape = workload_group(kind, top, pod, related)
        except WorkloadError as exc:
            log.warning(
                "%s %s: %s; grouping its pods with minMember 1", kind, (top.get("metadata") or {}).get("name"), exc
            )
            return WorkloadGroup(1)
        for note in shape.notes:
            log.warning("%s", note)
        return shape

    async def _top_owner(self, obj: JSON, namespace: str) -> tuple[str, JSON]:
        kind, current = "Pod", obj
        for _ in range(MAX_DEPTH):
            ref = _controller(current)
            if ref is None:
                break
            owner_kind = OWNER_KINDS.get((str(ref.get("apiVersion")), str(ref.get("kind"))))
            if owner_kind is None:
                return str(ref.get("kind")), {
                    "metadata": {"name": ref.get("name"), "uid": ref.get("uid")},
                    "apiVersion": ref.get("apiVersion"),
                    "kind": ref.get("kind"),
                }
            fetched = await self._get(owner_kind, str(ref.get("name")), namespace)
            if fetched is None:
                break
            kind, current = owner_kind.name, fetched
            if kind == "Job":  # a CronJob's runs are separate workloads
                break
        return kind, current

    async def _get(self, kind: Kind, name: str, namespace: str) -> JSON | None:
        try:
            return (await self.api.request("GET", kind.item(name, namespace))).body
        except KubeError as exc:
            if exc.status in (403, 404):
                return None
            raise


TIMING_ANNOTATIONS = (L.PREEMPTION_DELAY_ANNOTATION, L.STALENESS_GRACE_ANNOTATION, L.EXPECTED_RUNTIME_ANNOTATION)


def _timing_annotations(owner: JSON, pod: JSON) -> dict[str, str]:
    """The preemption delay, staleness grace and expected runtime a workload sets on its top
    owner (first, as KAI's pod grouper reads them) or its pod, carried onto its PodGroup."""
    found: dict[str, str] = {}
    for source in (owner, pod):
        for key, value in (source.get("annotations") or {}).items():
            if key in TIMING_ANNOTATIONS and key not in found:
                found[key] = str(value)
    return found


def _group_name(meta: JSON) -> str:
    name, uid = meta.get("name"), meta.get("uid")
    return f"pg-{name}-{uid}" if uid else f"pg-{name}"


def _controller(obj: JSON) -> dict[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def _owner_reference(owner: JSON, kind: str) -> JSON:
    meta = owner.get("metadata") or {}
    return {
        "apiVersion": owner.get("apiVersion") or "v1",
        "kind": owner.get("kind") or kind,
        "name": meta.get("name"),
        "uid": meta.get("uid") or "",
        "controller": False,
        "blockOwnerDeletion": False,
    }


def pod_group_shape(shape: WorkloadGroup) -> JSON:
    """The PodGroup spec fields for sub-groups and topology, as KAI's grouper writes them."""
    out: dict[str, Any] = {}
    if shape.topology is not None:
        out["topologyConstraint"] = _constraint(shape.topology)
    if shape.min_sub_group is not None:
        out["minSubGroup"] = shape.min_sub_group
    subs = []
    for sub in shape.sub_groups:
        entry: dict[str, Any] = {"name": sub.name}
        if sub.parent:
            entry["parent"] = sub.parent
        if sub.min_sub_group is not None:
            entry["minSubGroup"] = sub.min_sub_group
        else:
            entry["minMember"] = sub.min_member
        if sub.topology is not None:
            entry["topologyConstraint"] = _constraint(sub.topology)
        subs.append(entry)
    if subs:
        out["subGroups"] = subs
    return out


def _constraint(constraint: Any) -> JSON:
    out = {"topology": constraint.topology}
    if constraint.required:
        out["requiredTopologyLevel"] = constraint.required
    if constraint.preferred:
        out["preferredTopologyLevel"] = constraint.preferred
    return out


def _pod_patch(name: str, subgroup: str | None) -> JSON:
    meta: dict[str, Any] = {"annotations": {L.POD_GROUP_ANNOTATION: name}}
    if subgroup:
        meta["labels"] = {L.SUBGROUP_LABEL: subgroup}
    return meta
