"""The pod grouper: PodGroups for workloads whose pods name none, as KAI's podgrouper makes them.

For a pod of this scheduler without ``pod-group-name``, the grouper finds the pod's top
owner (following controller references through the API), creates ``pg-<owner>-<uid>``
sized for the workload kind, and annotates the pod. Distributed kinds (PyTorchJob,
MPIJob, JobSet, Ray, LeaderWorkerSet) get their whole gang as ``minMember`` and are not
scheduled before their PodGroup exists; batch Jobs get 1; serving kinds one group per pod.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from k8s_adapter.api import JSON, KubeApi, KubeError
from k8s_adapter.kinds import OWNER_KINDS, POD_GROUPS, PODS, Kind
from kai_ray import labels as L

log = logging.getLogger(__name__)
PER_POD_KINDS = {"Deployment", "ReplicaSet", "StatefulSet"}
SERVING_KINDS = {"Deployment", "ReplicaSet", "StatefulSet"}
MAX_DEPTH = 5


def gang_size(kind: str, owner: JSON) -> int:
    """How many pods the workload needs together (KAI's per-kind podgrouper rules)."""
    spec = owner.get("spec") or {}
    override = ((owner.get("metadata") or {}).get("annotations") or {}).get("kai.scheduler/batch-min-member")
    if override and str(override).isdigit():
        return max(1, int(override))
    if kind == "PyTorchJob":
        return sum(int((r or {}).get("replicas") or 1) for r in (spec.get("pytorchReplicaSpecs") or {}).values())
    if kind == "MPIJob":
        return sum(int((r or {}).get("replicas") or 1) for r in (spec.get("mpiReplicaSpecs") or {}).values())
    if kind in ("RayCluster", "RayJob"):
        cluster = spec.get("rayClusterSpec") if kind == "RayJob" else spec
        workers = (cluster or {}).get("workerGroupSpecs") or []
        return 1 + sum(int(w.get("minReplicas") or w.get("replicas") or 0) for w in workers)
    if kind == "JobSet":
        total = 0
        for job in spec.get("replicatedJobs") or []:
            parallelism = ((job.get("template") or {}).get("spec") or {}).get("parallelism") or 1
            total += int(job.get("replicas") or 1) * int(parallelism)
        return max(total, 1)
    if kind == "LeaderWorkerSet":
        return int(((spec.get("leaderWorkerTemplate") or {}).get("size")) or 1)
    return 1


class PodGrouper:
    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.done: set[str] = set()  # pods already annotated by us

    async def group(self, pods: Iterable[JSON]) -> int:
        """Create PodGroups for these ungrouped pods and annotate them; how many were handled."""
        handled = 0
        for pod in pods:
            meta = pod.get("metadata") or {}
            key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
            if key in self.done:
                continue
            try:
                await self._group_one(pod, meta)
                self.done.add(key)
                handled += 1
            except KubeError as exc:
                log.info("could not group %s yet: %s", key, exc)
        return handled

    async def _group_one(self, pod: JSON, meta: JSON) -> None:
        namespace = str(meta.get("namespace") or "default")
        top_kind, top = await self._top_owner(pod, namespace)
        per_pod = top is pod or top_kind in PER_POD_KINDS
        named_after = pod if per_pod else top  # serving workloads: one PodGroup per pod
        name = _group_name(named_after.get("metadata") or {})
        top_meta = top.get("metadata") or {}
        labels = {**(meta.get("labels") or {}), **(top_meta.get("labels") or {})}
        priority_class = (
            labels.get(L.PRIORITY_CLASS_LABEL)
            or (pod.get("spec") or {}).get("priorityClassName")
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
                "minMember": 1 if per_pod else gang_size(top_kind, top),
                "queue": labels.get(L.QUEUE_LABEL) or labels.get(L.LEGACY_QUEUE_LABEL) or L.DEFAULT_QUEUE,
                "priorityClassName": priority_class,
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
            body={"metadata": {"annotations": {L.POD_GROUP_ANNOTATION: name}}},
            content_type="application/merge-patch+json",
        )

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
