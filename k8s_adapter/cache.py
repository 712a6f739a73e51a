"""What the watches saw, as model records, handed to the coordinator as batched deltas.

Raw objects are decoded once, on arrival, with the snapshot loader's parsers (so the API
and `kai-ray schedule` read manifests the same way). A malformed object is logged in one
line and skipped; it never stops the loop. Changes accumulate until ``take_deltas``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from k8s_adapter.api import JSON
from k8s_adapter.dra_cache import DraCache
from k8s_adapter.kinds import (
    DRA_WATCHED,
    NODES,
    POD_GROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    TOPOLOGIES,
    Kind,
    resource_version,
)
from kai_ray import labels as L
from kai_ray.deltas import ClusterDeltas
from kai_ray.errors import InputError
from kai_ray.grouping import OwnerRef, implicit_group, needs_pod_grouper
from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_core import parse_node, parse_pod
from kai_ray.io.parse_kai import RawPodGroup, parse_pod_group, parse_priority_class, parse_queue
from kai_ray.io.parse_topology import parse_topology
from kai_ray.model import Node, Pod, PodGroup, PriorityClass, Queue, Topology

log = logging.getLogger(__name__)


class ClusterCache:
    def __init__(self, scheduler_name: str = L.DEFAULT_SCHEDULER_NAME) -> None:
        self.scheduler_name = scheduler_name
        self.versions: dict[tuple[str, str], int] = {}
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, Pod] = {}
        self.raw_groups: dict[str, RawPodGroup] = {}
        self.queues: dict[str, Queue] = {}
        self.classes: dict[str, PriorityClass] = {}
        self.owners: dict[str, tuple[OwnerRef, ...]] = {}
        self.raw_ungrouped: dict[str, JSON] = {}
        self.decode_errors = 0
        self.topologies: dict[str, Topology] = {}
        kinds = ("Node", "Pod", "Queue", "PodGroup", "Topology")
        self._changed: dict[str, set[str]] = {k: set() for k in kinds}
        self._removed: dict[str, set[str]] = {k: set() for k in kinds}
        self._classes_changed = False
        self._sent_groups: dict[str, PodGroup] = {}
        self._sent_queues: set[str] = set()
        self.listeners: list[Callable[[Kind, str, JSON], None]] = []
        self.dra = DraCache()  # ResourceSlices, DeviceClasses, ResourceClaims (with `run --dra`)

    # ------------------------------------------------------------------ input
    def on_list(self, kind: Kind, items: list[JSON]) -> None:
        """A fresh list replaces everything known of that kind."""
        if kind in DRA_WATCHED:
            self.dra.on_list(kind, items)
            return
        seen = set()
        for obj in items:
            key = self._key(kind, obj)
            seen.add(key)
            self.versions.pop((kind.name, key), None)
            self._upsert(kind, obj, key)
        store = self._store(kind)
        for key in list(store):
            if key not in seen:
                self._delete(kind, key)

    def on_event(self, kind: Kind, event: str, obj: JSON) -> None:
        if kind in DRA_WATCHED:
            self.dra.on_event(kind, event, obj)
            return
        key = self._key(kind, obj)
        version = resource_version(obj)
        last = self.versions.get((kind.name, key))
        if last is not None and version is not None and version <= last and event != "DELETED":
            return  # a duplicate or out-of-date event
        for listener in self.listeners:
            listener(kind, event, obj)
        if event == "DELETED":
            self.versions.pop((kind.name, key), None)
            self._delete(kind, key)
        else:
            self._upsert(kind, obj, key)

    def _key(self, kind: Kind, obj: JSON) -> str:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        return f"{meta.get('namespace') or 'default'}/{name}" if kind.namespaced else name

    def _store(self, kind: Kind) -> dict[str, object]:
        # The stores hold different record types; callers only add, look up and remove by key.
        stores: dict[str, Any] = {
            NODES.name: self.nodes,
            PODS.name: self.pods,
            QUEUES.name: self.queues,
            POD_GROUPS.name: self.raw_groups,
            PRIORITY_CLASSES.name: self.classes,
            TOPOLOGIES.name: self.topologies,
        }
        store: dict[str, object] = stores[kind.name]
        return store

    def _upsert(self, kind: Kind, obj: JSON, key: str) -> None:
        version = resource_version(obj)
        if version is not None:
            self.versions[(kind.name, key)] = version
        try:
            reader = ObjectReader({**obj, "kind": kind.name}, 0)
            if kind is NODES:
                self.nodes[key] = parse_node(reader)
            elif kind is PODS:
                if L.is_reservation_pod((obj.get("metadata") or {}).get("labels") or {}):
                    return  # its GPU is counted through the shared group it reserves
                pod = self.pods[key] = parse_pod(reader)
                self.owners[key] = _owner_refs(obj)
                if (
                    not pod.pod_group
                    and pod.scheduler_name == self.scheduler_name
                    and pod.state.value in ("Pending", "Running")
                ):
                    self.raw_ungrouped[key] = obj  # the pod grouper needs owners, labels, priority class
                else:
                    self.raw_ungrouped.pop(key, None)
            elif kind is QUEUES:
                warnings: list[str] = []
                self.queues[key] = parse_queue(reader, warnings)
            elif kind is POD_GROUPS:
                notes: list[str] = []
                self.raw_groups[key] = parse_pod_group(reader, notes)
                for note in notes:
                    log.warning("%s", note)
            elif kind is TOPOLOGIES:
                self.topologies[key] = parse_topology(reader)
            elif kind is PRIORITY_CLASSES:
                self.classes[key] = parse_priority_class(reader)
                self._classes_changed = True
                return
        except InputError as exc:
            self.decode_errors += 1
            log.warning("skipping malformed object: %s", exc)
            return
        self._changed[kind.name].add(key)
        self._removed[kind.name].discard(key)

    def _delete(self, kind: Kind, key: str) -> None:
        store = self._store(kind)
        if store.pop(key, None) is None:
            return
        if kind is PRIORITY_CLASSES:
            self._classes_changed = True
            return
        if kind is PODS:
            self.owners.pop(key, None)
            self.raw_ungrouped.pop(key, None)
        self._removed[kind.name].add(key)
        self._changed[kind.name].discard(key)

    # ------------------------------------------------------------------ output
    def take_deltas(self) -> ClusterDeltas:
        """Everything that changed since the last call, as model records."""
        pods = [self.pods[k] for k in self._changed["Pod"] if k in self.pods]
        groups = self._resolved_groups()
        queues_up, queues_down = self._queue_changes()
        deltas = ClusterDeltas(
            nodes_upserted=tuple(self.nodes[k] for k in self._changed["Node"] if k in self.nodes),
            nodes_removed=tuple(self._removed["Node"]),
            pods_upserted=tuple(self._with_group(p) for p in pods),
            pods_removed=tuple(self._removed["Pod"]),
            queues_upserted=queues_up,
            queues_removed=queues_down,
            pod_groups_upserted=groups[0],
            pod_groups_removed=groups[1],
            topologies_upserted=tuple(self.topologies[k] for k in self._changed["Topology"] if k in self.topologies),
            topologies_removed=tuple(self._removed["Topology"]),
            dra=self.dra.take(),
        )
        for bucket in (*self._changed.values(), *self._removed.values()):
            bucket.clear()
        self._classes_changed = False
        return deltas

    def _with_group(self, pod: Pod) -> Pod:
        owners = self.owners.get(pod.key, ())
        if pod.pod_group or pod.scheduler_name != self.scheduler_name or needs_pod_grouper(owners):
            return pod
        return replace(pod, pod_group=implicit_group(pod, owners).name)

    def ungrouped(self) -> list[JSON]:
        """Our live pods that name no PodGroup yet (raw objects): the pod grouper's work list."""
        return list(self.raw_ungrouped.values())

    def implicit_groups(self) -> dict[str, PodGroup]:
        """PodGroups for our pods that name none (KAI's pod grouper would create them)."""
        out: dict[str, PodGroup] = {}
        for key, pod in self.pods.items():
            owners = self.owners.get(key, ())
            if pod.pod_group or pod.scheduler_name != self.scheduler_name or needs_pod_grouper(owners):
                continue
            spec = implicit_group(pod, owners)
            group_key = f"{pod.namespace}/{spec.name}"
            if group_key in self.raw_groups or group_key in out:
                continue
            priority = self._priority(spec.priority_class_name)
            out[group_key] = PodGroup(
                pod.namespace,
                spec.name,
                spec.queue,
                priority,
                priority < L.PREEMPTIBLE_BELOW,
                min_member=spec.min_member,
                priority_class_name=spec.priority_class_name,
                created=pod.created,
            )
        return out

    def _priority(self, name: str | None) -> int:
        if name and name in self.classes:
            return self.classes[name].value
        default = next((c.value for c in self.classes.values() if c.global_default), None)
        return default if default is not None else L.DEFAULT_JOB_PRIORITY

    def _resolved_groups(self) -> tuple[tuple[PodGroup, ...], tuple[str, ...]]:
        if not (
            self._changed["PodGroup"]
            or self._removed["PodGroup"]
            or self._changed["Pod"]
            or self._removed["Pod"]
            or self._classes_changed
        ):
            return (), ()
        wanted: dict[str, PodGroup] = {}
        for key, raw in self.raw_groups.items():
            priority = self._priority(raw.priority_class_name)
            preemptible = (
                priority < L.PREEMPTIBLE_BELOW if raw.preemptibility is None else (raw.preemptibility == "preemptible")
            )
            wanted[key] = PodGroup(
                raw.namespace,
                raw.name,
                raw.queue or L.DEFAULT_QUEUE,
                priority,
                preemptible,
                min_member=raw.min_member,
                sub_groups=raw.sub_groups,
                priority_class_name=raw.priority_class_name,
                created=raw.created,
                staleness_grace_seconds=raw.staleness_grace_seconds,
                stale_since=raw.stale_since,
                last_start=raw.last_start,
                last_eviction=raw.last_eviction,
                preemption_delay_seconds=raw.preemption_delay_seconds,
                expected_runtime_seconds=raw.expected_runtime_seconds,
                uid=raw.uid,
                min_sub_group=raw.min_sub_group,
                topology=raw.topology,
            )
        wanted.update(self.implicit_groups())
        upserted = tuple(g for k, g in wanted.items() if self._sent_groups.get(k) != g)
        removed = tuple(k for k in self._sent_groups if k not in wanted)
        self._sent_groups = wanted
        return upserted, removed

    def _queue_changes(self) -> tuple[tuple[Queue, ...], tuple[str, ...]]:
        """Queues whose ancestry reaches the top (KAI drops orphans and their subtrees)."""
        valid: set[str] = set()
        for name, queue in self.queues.items():
            seen = {name}
            parent = queue.parent
            while parent is not None and parent in self.queues and parent not in seen:
                seen.add(parent)
                parent = self.queues[parent].parent
            if parent is None:
                valid.add(name)
        upserted = tuple(self.queues[n] for n in valid if n in self._changed["Queue"] or n not in self._sent_queues)
        removed = tuple(n for n in self._sent_queues if n not in valid)
        self._sent_queues = valid
        return upserted, removed

    @property
    def pod_groups(self) -> dict[str, PodGroup]:
        """Every PodGroup as last handed to the coordinator, explicit and implicit, by key (for status)."""
        return self._sent_groups


def _owner_refs(obj: JSON) -> tuple[OwnerRef, ...]:
    refs = []
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") and ref.get("name"):
            refs.append(OwnerRef(str(ref["kind"]), str(ref["name"]), str(ref.get("uid") or "")))
    return tuple(refs)
