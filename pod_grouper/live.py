"""The pod grouper: PodGroups for workloads whose pods name none, as KAI's podgrouper makes them.

For a pod of this scheduler without ``pod-group-name``, the grouper finds the pod's top
owner (following controller references through the API), creates ``pg-<owner>-<uid>``
shaped by KAI's rules for the workload kind (``pod_grouper/workloads.py``: the gang size, the
sub-groups of a PyTorchJob and its segments, the topology constraint from the owner's
annotations), and annotates the pod (and labels it with its sub-group). Distributed kinds are
not scheduled before their PodGroup exists; serving kinds get one group per pod. A bare pod the
scheduler binds soon is annotated by its binding instead, and its PodGroup made once it is bound
(``PodGrouper``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Container, Iterable
from typing import Any

from k8s_adapter.api import JSON, KubeApi, KubeError
from k8s_adapter.job_clocks import JobClockWriter, annotations_of
from k8s_adapter.kinds import KNATIVE_REVISION, OWNER_KINDS, POD_GROUPS, PODS, Kind
from kai_ray import labels as L
from pod_grouper.workloads import KNATIVE_REVISION_LABEL, WorkloadError, WorkloadGroup, workload_group

log = logging.getLogger(__name__)
GROUPING_CONCURRENCY = 32  # pods grouped at once (each a few API round trips)
PER_POD_KINDS = {"Deployment", "ReplicaSet", "StatefulSet"}
SERVING_KINDS = {"Deployment", "ReplicaSet", "StatefulSet"}
MAX_DEPTH = 5
DEFER_SECONDS = 3.0  # a new bare pod is left this long for its bind to annotate it


class PodGrouper:
    """``binding``: pods whose bind is in flight; ``clocks``: job clocks waiting for their PodGroup.

    A bare pod's bind carries its ``pod-group-name`` annotation (the binding's annotations are
    the pod's once bound), so for a bare pod the scheduler binds soon the grouper only creates
    the PodGroup, once the pod is bound, with the group's clocks already in it: one request where
    a PodGroup, a pod PATCH and a clocks PATCH were three. A bare pod still unbound ``defer``
    seconds after the grouper first saw it (it waits for room) is grouped as before.
    """

    def __init__(
        self,
        api: KubeApi,
        binding: Container[str] = frozenset(),
        clocks: JobClockWriter | None = None,
        defer: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.binding = binding
        self.clocks = clocks
        self.defer = defer
        self.clock = clock
        self.done: set[str] = set()  # pods annotated by us whose annotation the watch has not shown yet
        self.seen: dict[str, float] = {}  # bare pods left for their bind to annotate -> first seen
        self.deferred = 0  # pods left for their bind in the last pass

    async def group(self, pods: Iterable[JSON]) -> int:
        """Create PodGroups for these ungrouped pods and annotate them; how many were handled.
        ``pods`` is the whole current work list: a pod no longer on it (annotated, finished,
        deleted) is forgotten, so ``done`` never outgrows the pods still waiting for the watch."""
        work = []
        now = self.clock()
        left: set[str] = set()
        for pod in pods:
            meta = pod.get("metadata") or {}
            # By uid too: a pod re-created under the same name is a new pod to annotate.
            key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}@{meta.get('uid')}"
            if self._left_to_bind(key, pod, meta, now):
                left.add(key)
                continue
            work.append((key, pod, meta))
        self.deferred = len(left)
        self.done.intersection_update(key for key, _, _ in work)
        for key in [k for k in self.seen if k not in left]:
            del self.seen[key]  # grouped now, or gone from the list
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

    def _left_to_bind(self, key: str, pod: JSON, meta: JSON, now: float) -> bool:
        """Whether this pod's bind, soon, is to annotate it (the grouper then waits for it)."""
        if (pod.get("spec") or {}).get("nodeName") or _controller(pod) is not None:
            return False
        if (meta.get("annotations") or {}).get(L.POD_GROUP_ANNOTATION):
            return False
        pod_key = key.rsplit("@", 1)[0]
        first = self.seen.setdefault(key, now)
        return pod_key in self.binding or now - first < self.defer

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
        key = f"{namespace}/{name}"
        preemptibility = labels.get(L.PREEMPTIBILITY_LABEL)  # the top owner's, else the pod's (KAI)
        if preemptibility and preemptibility not in L.PREEMPTIBILITIES:
            log.warning(
                "PodGroup %s: ignored label %s=%r (must be one of %s)",
                key,
                L.PREEMPTIBILITY_LABEL,
                preemptibility,
                ", ".join(L.PREEMPTIBILITIES),
            )
            preemptibility = None
        annotations = _timing_annotations(top_meta, meta)
        clock = self.clocks.take_waiting(key) if self.clocks is not None else None
        if clock is not None:  # the group's clocks, written with it rather than by a PATCH after
            annotations.update({k: v for k, v in annotations_of(clock).items() if v is not None})
        group = {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"kai.scheduler/created-by": "kai-ray"},
                "annotations": annotations,
                "ownerReferences": [_owner_reference(top, top_kind)],
            },
            "spec": {
                "minMember": shape.min_member,
                "queue": labels.get(L.QUEUE_LABEL) or labels.get(L.LEGACY_QUEUE_LABEL) or L.DEFAULT_QUEUE,
                "priorityClassName": priority_class,
                **({"preemptibility": preemptibility} if preemptibility else {}),
                **pod_group_shape(shape),
            },
        }
        try:
            await self.api.request("POST", POD_GROUPS.collection(namespace), body=group)
        except KubeError as exc:
            if clock is not None and self.clocks is not None:
                self.clocks.restore(key, clock)  # not written: the clock writer patches them
            if exc.status != 409:  # already made by an earlier pod of the same workload
                raise
        subgroup = shape.subgroup
        annotated = (meta.get("annotations") or {}).get(L.POD_GROUP_ANNOTATION) == name
        if annotated and not subgroup:
            return  # its binding annotated it
        await self.api.request(
            "PATCH",
            PODS.item(str(meta.get("name")), namespace),
            body={"metadata": _pod_patch(name, subgroup)},
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
