"""Which PodGroup each pod the cache holds is scheduled in, and the pod grouper's work list.

A pod that names a PodGroup belongs to it; a pod of ours that names none belongs to the group
KAI's pod grouper would make for it (an implicit group, resolved from the pod until the object
exists), and waits on the grouper's list for that object; a pod of a distributed workload waits
for the grouper without a group. A bare pod annotated with its own group's name
(``pg-<pod>-<uid>``, the binding writes it before the object exists, or the object was deleted)
is grouped as if it named none: the same rule a snapshot of the same objects follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from k8s_adapter.api import JSON
from kai_ray import labels as L
from kai_ray.model import Pod
from pod_grouper.group_index import GroupIndex
from pod_grouper.grouping import (
    ImplicitGroup,
    OwnerRef,
    awaits_own_group,
    implicit_group,
    needs_pod_grouper,
    own_group_name,
)
from pod_grouper.pod_groups import RawPodGroup


class PodMembership:
    def __init__(self, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        self.index = GroupIndex()
        self.owners: dict[str, tuple[OwnerRef, ...]] = {}
        # A bare pod's implicit group as ``place`` worked it out, so resolving the group does not
        # work it out again (for the pod as it was placed, with the owners it had then).
        self._specs: dict[str, ImplicitGroup] = {}
        self._ungrouped: dict[str, JSON] = {}  # raw objects: the grouper needs owners, labels, priority class
        self._dirty = False
        self.ungrouped_view: tuple[JSON, ...] = ()  # for readers on the event loop, replaced whole

    def place(
        self, key: str, pod: Pod, obj: JSON, owners: tuple[OwnerRef, ...], groups: Mapping[str, RawPodGroup]
    ) -> Pod:
        """Record the pod's group (and whether the grouper must make it); returns the pod with
        the implicit group's name where it belongs to one."""
        self.owners[key] = owners
        self._specs.pop(key, None)
        ours = pod.scheduler_name == self.scheduler_name
        awaits_object = ours and awaits_own_group(pod, owners, groups)
        if pod.pod_group and not awaits_object:
            self.index.place(key, f"{pod.namespace}/{pod.pod_group}", False)
        elif ours and not needs_pod_grouper(owners):
            if not pod.pod_group:
                spec = self._specs[key] = implicit_group(pod, owners)
                pod = replace(pod, pod_group=spec.name)
            self.index.place(key, f"{pod.namespace}/{pod.pod_group}", True)
        else:
            self.index.place(key, None, False)
        # A pod of a Workload API gang is grouped by that API: the grouper makes no KAI PodGroup for it.
        annotated = pod.workload_gang or bool(
            ((obj.get("metadata") or {}).get("annotations") or {}).get(L.POD_GROUP_ANNOTATION)
        )
        if ours and (awaits_object or not annotated) and pod.state.value in ("Pending", "Running"):
            self._ungrouped[key] = obj
            self._dirty = True
        elif self._ungrouped.pop(key, None) is not None:
            self._dirty = True
        return pod

    def forget(self, key: str) -> None:
        """The pod is gone."""
        self.owners.pop(key, None)
        self._specs.pop(key, None)
        if self._ungrouped.pop(key, None) is not None:
            self._dirty = True
        self.index.place(key, None, False)

    def object_came(self, group: str) -> None:
        """PodGroup ``group`` exists now: its pods that already name it leave the grouper's list."""
        for pod in self.index.implicit_members.get(group, ()):
            obj = self._ungrouped.get(pod)
            if obj is not None and ((obj.get("metadata") or {}).get("annotations") or {}).get(L.POD_GROUP_ANNOTATION):
                del self._ungrouped[pod]
                self._dirty = True

    def object_gone(self, group: str, pods: Mapping[str, Pod]) -> None:
        """The PodGroup object ``group`` was deleted: a bare pod of ours that names it as its own
        group is grouped as if it named none (as ``place`` groups such a pod read afresh), not left
        in a group that no longer exists."""
        for member in list(self.index.members.get(group, ())):
            pod = pods.get(member)
            if (
                pod is not None
                and pod.scheduler_name == self.scheduler_name
                and pod.pod_group == own_group_name(pod, self.owners.get(member, ()))
            ):
                self.index.place(member, group, True)

    def implicit_spec(self, pod: Pod) -> ImplicitGroup:
        """The group KAI's pod grouper would make for ``pod``, a pod of ours that names none."""
        spec = self._specs.get(pod.key)
        return spec if spec is not None else implicit_group(pod, self.owners.get(pod.key, ()))

    def own_group(self, key: str, pod: Pod | None) -> str | None:
        """The PodGroup name a bind of pod ``key`` may annotate it with: its own group's, for a bare
        pod of ours grouped alone that names no other group (None otherwise)."""
        if pod is None or pod.scheduler_name != self.scheduler_name:
            return None
        name = own_group_name(pod, self.owners.get(key, ()))
        return name if name is not None and pod.pod_group == name else None

    def members(self, group: str) -> list[str]:
        """Pods of ``group`` as of the last deltas."""
        return sorted({*self.index.members.get(group, ()), *self.index.implicit_members.get(group, ())})

    def refresh_view(self) -> None:
        if self._dirty:
            self._dirty = False
            self.ungrouped_view = tuple(self._ungrouped.values())
