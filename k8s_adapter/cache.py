"""What the watches saw, as model records, handed to the coordinator as batched deltas.

Two sides, so that the event loop never does the work of a delta:

- The watch callbacks (``on_list``, ``on_event``, on the event loop) only drop out-of-date
  events and keep the latest raw object per key in an inbox (``inbox.py``): O(1) per event,
  and an object that changes five times between cycles is decoded once.
- ``take_deltas`` (run off the event loop, one call at a time) decodes the inbox with the
  snapshot loader's parsers, updates the records, and resolves only the PodGroups the batch
  touched (``group_index``), so its cost follows the changes, not the cluster's size.

Nothing malformed stops the loop: an object that cannot be read is left out and recorded as
a ``Problem`` naming the object, the field and the value (the status writer posts it as an
Event);
a pod that holds its node is always counted, its unreadable annotations ignored. Readers on
the event loop get views that ``take_deltas`` replaces, never mutates.
"""

from __future__ import annotations

import logging
from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from k8s_adapter.api import JSON
from k8s_adapter.dra_cache import DraCache
from k8s_adapter.expected_evictions import ExpectedEvictions
from k8s_adapter.inbox import Batch, Hold, Inbox
from k8s_adapter.kinds import (
    DEVICE_CLASSES,
    DRA_WATCHED,
    GANG_POD_GROUPS,
    NODES,
    POD_GROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    TOPOLOGIES,
    WORKLOADS,
    Kind,
)
from k8s_adapter.pod_membership import PodMembership
from k8s_adapter.problems import ObjectKey, Problem
from k8s_adapter.queue_forest import QueueForest
from k8s_adapter.workload_gangs import WorkloadGangs
from kai_ray import labels as L
from kai_ray.deltas import ClusterDeltas
from kai_ray.errors import InputError
from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_core import parse_node, parse_pod, pod_state
from kai_ray.io.parse_kai import parse_pod_group, parse_priority_class, parse_queue
from kai_ray.io.parse_topology import parse_topology
from kai_ray.io.parse_workload import parse_gang_pod_group, parse_workload
from kai_ray.model import Node, Pod, PodGroup, PodState, PriorityClass, Queue, Topology
from pod_grouper.grouping import controller_refs
from pod_grouper.pod_groups import RawPodGroup

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PodNow:
    """The newest known state of a pod, for decisions that must not act on an old one."""

    uid: str
    state: PodState
    node: str | None


class ClusterCache:
    def __init__(
        self, scheduler_name: str = L.DEFAULT_SCHEDULER_NAME, mig_label_key: str = L.MIG_ENABLED_NODE_LABEL
    ) -> None:
        self.scheduler_name = scheduler_name
        self.mig_label_key = mig_label_key  # the config's migWorkerNodeLabelKey
        self.listeners: list[Callable[[Kind, str, JSON], None]] = []
        self._inbox = Inbox()  # event-loop side: what the watches delivered, not yet taken
        self._holds_read: dict[str, Hold] = {}  # holds taken by read_ahead, applied by take_deltas
        # Records: changed only by take_deltas and read_ahead.
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, Pod] = {}  # with the PodGroup they are scheduled in
        self.raw_groups: dict[str, RawPodGroup] = {}
        self.queues: dict[str, Queue] = {}
        self.classes: dict[str, PriorityClass] = {}
        self.topologies: dict[str, Topology] = {}
        self.gangs = WorkloadGangs()  # the Workload API's, where the server serves it
        self.dra = DraCache()  # ResourceSlices, DeviceClasses, ResourceClaims (with `run --dra`)
        self.decode_errors = 0
        self._problems: dict[ObjectKey, Problem] = {}
        self.membership = PodMembership(scheduler_name)
        self._held: dict[str, tuple[float, str]] = {}  # pods kept from the coordinator for now
        self.expected = ExpectedEvictions()  # evicted pods the watch has not shown leaving yet
        self._changed: dict[str, set[str]] = {"Node": set(), "Pod": set(), "Queue": set(), "Topology": set()}
        self._removed: dict[str, set[str]] = {"Node": set(), "Pod": set(), "Topology": set()}
        self.queue_forest = QueueForest()
        # Views for readers on the event loop: replaced as a whole, never changed in place.
        self.problems_view: Mapping[ObjectKey, Problem] = {}
        self.held_view: Mapping[str, tuple[float, str]] = {}

    # ------------------------------------------------------------------ watch side (event loop)
    def on_list(self, kind: Kind, items: list[JSON]) -> None:
        """A fresh list replaces everything known of that kind."""
        self._inbox.listed(kind, items)

    def on_page(self, kind: Kind, items: list[JSON]) -> None:
        """A page of a list still coming: decoded with the next deltas, the whole list after it."""
        self._inbox.page(kind, items)

    def on_event(self, kind: Kind, event: str, obj: JSON) -> None:
        if self._inbox.event(kind, event, obj):
            for listener in self.listeners:
                listener(kind, event, obj)

    def evicting(self, pods: list[str], sent: bool = True) -> None:
        """These pods' evictions were handed out (``sent``), or turned out not sent or not taken: from
        the next deltas on they read as releasing until the watch shows them leaving, or again as
        the watch says (``expected_evictions``)."""
        self._inbox.evictions(pods, sent)

    def hold_back(self, pod: str, until: float, why: str) -> None:
        """Keep ``pod`` from the coordinator until ``until`` (time.monotonic) unless it gets bound
        meanwhile: a pod whose bind keeps failing is not placed again at once."""
        self._inbox.hold(pod, until, why)

    # ------------------------------------------------------------------ readers (event loop)
    def versions_seen(self) -> dict[tuple[str, str], int]:
        """The resourceVersion of every object the watches delivered, by (kind, key)."""
        return self._inbox.versions()

    def pending_events(self) -> int:
        """Watch events and holds not yet turned into deltas."""
        return self._inbox.pending()

    def ungrouped(self) -> list[JSON]:
        """Our live pods that name no PodGroup yet (raw objects): the pod grouper's work list."""
        return list(self.membership.ungrouped_view)

    def pod_now(self, key: str) -> PodNow | None:
        """The pod as the newest event says, applied to the records or not; None once it is gone."""
        entry = self._inbox.newest(PODS, key)
        if entry is not None:
            _, event, obj = entry
            if event == "DELETED":
                return None
            reader = ObjectReader({**obj, "kind": "Pod"}, 0)
            state, node = pod_state(reader)
            return PodNow(str(reader.meta.get("uid") or ""), state, node)
        pod = self.expected.truth.get(key) or self.pods.get(key)
        return None if pod is None else PodNow(pod.uid, pod.state, pod.node)

    @property
    def pod_groups(self) -> Mapping[str, PodGroup]:
        """Every PodGroup as last handed to the coordinator, explicit and implicit, by key (for
        status); replaced by each batch that changes one, never changed in place."""
        return self.membership.index.sent

    def members(self, group: str) -> list[str]:
        """Pods of PodGroup ``group`` as of the last deltas."""
        return self.membership.members(group)

    # ------------------------------------------------------------------ deltas (off the event loop)
    def take_deltas(self, now: float | None = None) -> ClusterDeltas:
        """Everything that changed since the last call, as model records. ``now`` (monotonic)
        ends the holds that are due; None ends none."""
        batch = self._inbox.take()
        self._read(batch)
        holds, self._holds_read = {**self._holds_read, **batch.holds}, {}
        self._apply_holds(holds, now)
        deltas = self._deltas()
        self._refresh_views(holds)
        return deltas

    def read_ahead(self) -> None:
        """Read what the watches delivered into records now, and hand it to the coordinator with
        the next ``take_deltas``: at a start, the pods' pages are read while the nodes are still
        listed, before there is a coordinator to feed."""
        batch = self._inbox.take()
        self._read(batch)
        self._holds_read.update(batch.holds)

    def _read(self, batch: Batch) -> None:
        inbox = batch.events
        self._copy_on_write(batch.kinds())
        for kind, items in batch.dra_lists.values():
            self.dra.on_list(kind, items)
        for kind_name, (kind, listed) in batch.relisted.items():
            store = self._store(kind)
            for key in [k for k in store if k not in listed and (kind_name, k) not in inbox]:
                self._delete(kind, key)
            for problem_key in [k for k in self._problems if k[0] == kind_name and k[1] not in listed]:
                self._problems.pop(problem_key, None)
        for (_, key), (kind, event, obj) in inbox.items():
            if kind in DRA_WATCHED:
                self.dra.on_event(kind, event, obj)
            elif event == "DELETED":
                self._delete(kind, key)
                self._problems.pop((kind.name, key), None)
            else:
                self._upsert(kind, obj, key)
        for key, sent in batch.evictions:
            if self.expected.mark(self.pods, key) if sent else self.expected.unmark(self.pods, key):
                self._changed["Pod"].add(key)

    def _copy_on_write(self, kinds: set[str]) -> None:
        """Readers on the event loop (status, metrics, binds) iterate these records while a batch
        is applied here: a kind this batch changes gets a new dict, so no reader sees one change
        size under it. Pods and PodGroup objects are only looked up by key, never iterated there."""
        if NODES.name in kinds:
            self.nodes = dict(self.nodes)
        if QUEUES.name in kinds:
            self.queues = dict(self.queues)
        if TOPOLOGIES.name in kinds:
            self.topologies = dict(self.topologies)
        if DEVICE_CLASSES.name in kinds:
            self.dra.classes = dict(self.dra.classes)

    def _deltas(self) -> ClusterDeltas:
        groups_up, groups_down = self.membership.index.changes(
            ChainMap(self.raw_groups, self.gangs.groups), self.pods, self.membership.implicit_spec, self.classes
        )
        queues_up, queues_down, unusable = self.queue_forest.changes(self.queues, self._changed["Queue"])
        changed, removed = self._changed, self._removed
        deltas = ClusterDeltas(
            nodes_upserted=tuple(self.nodes[k] for k in changed["Node"] if k in self.nodes),
            nodes_removed=tuple(removed["Node"]),
            pods_upserted=tuple(self.pods[k] for k in changed["Pod"] if k in self.pods and k not in self._held),
            pods_removed=tuple(removed["Pod"]),
            queues_upserted=queues_up,
            queues_removed=queues_down,
            pod_groups_upserted=groups_up,
            pod_groups_removed=groups_down,
            unusable_queues=unusable,
            topologies_upserted=tuple(self.topologies[k] for k in changed["Topology"] if k in self.topologies),
            topologies_removed=tuple(removed["Topology"]),
            dra=self.dra.take(),
        )
        for bucket in (*changed.values(), *removed.values()):
            bucket.clear()
        return deltas

    def _apply_holds(self, holds: dict[str, tuple[float, str]], now: float | None) -> None:
        for key, hold in holds.items():
            pod = self.pods.get(key)
            if pod is not None and pod.state is PodState.PENDING:
                self._held[key] = hold
                self._removed["Pod"].add(key)  # the coordinator forgets it until the hold ends
                self._changed["Pod"].discard(key)
        if now is None:
            return
        for key in [k for k, (until, _) in self._held.items() if until <= now]:
            del self._held[key]
            if key in self.pods:
                self._changed["Pod"].add(key)
                self._removed["Pod"].discard(key)

    def _refresh_views(self, holds: Mapping[str, object]) -> None:
        self.membership.refresh_view()
        problems = dict(self._problems)
        for key, warnings in self.membership.index.warnings.items():
            raw = self.raw_groups.get(key)
            if raw is not None:
                meta = {"name": raw.name, "namespace": raw.namespace, "uid": raw.uid}
                own = problems.get((POD_GROUPS.name, key))  # what reading the object itself warned about
                problems[(POD_GROUPS.name, key)] = Problem.of(
                    "PodGroup",
                    POD_GROUPS.api_version,
                    {"metadata": meta},
                    [*(own.messages if own else ()), *warnings],
                    False,
                )
        for (kind, key), (obj, message) in self.dra.refused.items():
            problems[(kind, key)] = Problem.of(kind, _DRA_KINDS[kind].api_version, obj, [message], True)
        if problems != self.problems_view:
            self.problems_view = problems
        if holds or self._held != self.held_view:
            self.held_view = dict(self._held)

    # ------------------------------------------------------------------ records
    def _store(self, kind: Kind) -> dict[str, Any]:
        stores: dict[str, dict[str, Any]] = {
            NODES.name: self.nodes,
            PODS.name: self.pods,
            QUEUES.name: self.queues,
            POD_GROUPS.name: self.raw_groups,
            PRIORITY_CLASSES.name: self.classes,
            TOPOLOGIES.name: self.topologies,
            GANG_KIND: self.gangs.objects,
            WORKLOADS[0].name: self.gangs.workloads,
        }
        return stores[kind.name]

    def _upsert(self, kind: Kind, obj: JSON, key: str) -> None:
        warnings: list[str] = []
        try:
            reader = ObjectReader({**obj, "kind": kind.api_kind}, 0)
            if kind is NODES:
                self.nodes[key] = parse_node(reader, self.mig_label_key)
                self._changed["Node"].add(key)
                self._removed["Node"].discard(key)
            elif kind is PODS:
                self._upsert_pod(reader, obj, key, warnings)
            elif kind is QUEUES:
                self.queues[key] = parse_queue(reader, warnings)
                self.queue_forest.came(key)
                self._changed["Queue"].add(key)
            elif kind is POD_GROUPS:
                self.raw_groups[key] = parse_pod_group(reader, warnings)
                self.membership.index.touch([key])
                self.membership.object_came(key)
            elif kind is TOPOLOGIES:
                self.topologies[key] = parse_topology(reader)
                self._changed["Topology"].add(key)
                self._removed["Topology"].discard(key)
            elif kind is PRIORITY_CLASSES:
                self.classes[key] = parse_priority_class(reader)
                self.membership.index.touch_all(self.raw_groups)
                self.membership.index.touch(self.gangs.groups)
            elif kind in GANG_POD_GROUPS:
                self.gangs.objects[key] = parse_gang_pod_group(reader, kind.api_version, warnings)
                self.membership.index.touch(self.gangs.regroup([key]))
            elif kind in WORKLOADS:
                self.gangs.workloads[key] = parse_workload(reader, warnings)
                self.membership.index.touch(self.gangs.regroup(self.gangs.of_workload(key)))
        except InputError as exc:
            self._refuse(kind, obj, key, str(exc))
            return
        if warnings:
            self._problems[(kind.name, key)] = Problem.of(kind.api_kind, kind.api_version, obj, warnings, False)
        else:
            self._problems.pop((kind.name, key), None)

    def _upsert_pod(self, reader: ObjectReader, obj: JSON, key: str, warnings: list[str]) -> None:
        metadata = obj.get("metadata") or {}
        if L.is_reservation_pod(metadata.get("labels") or {}):
            self._delete(PODS, key)  # its GPU is counted through the shared group it reserves
            return
        pod = parse_pod(reader, warnings)
        owners = controller_refs(metadata.get("ownerReferences") or ())
        pod = self.membership.place(key, pod, obj, owners, self.raw_groups)
        self.pods[key] = pod = self.expected.seen(key, pod)
        if pod.state is not PodState.PENDING and self._held.pop(key, None) is not None:
            self._removed["Pod"].discard(key)  # bound (or finished) after all: it must be counted
        self._changed["Pod"].add(key)
        self._removed["Pod"].discard(key)

    def own_group(self, key: str) -> str | None:
        """The PodGroup name a bind of pod ``key`` may annotate it with (``PodMembership.own_group``)."""
        return self.membership.own_group(key, self.pods.get(key))

    def _refuse(self, kind: Kind, obj: JSON, key: str, message: str) -> None:
        """An object that cannot be read: what was known of it goes, and the problem is recorded
        (for pods only when they are ours or hold a node; others' pending pods are none of ours)."""
        self.decode_errors += 1
        log.warning("left out a malformed object: %s", message)
        self._delete(kind, key)
        if kind is QUEUES:
            self.queue_forest.refused(key, message.split(": ", 1)[-1])
        if kind is PODS:
            reader_spec = obj.get("spec") or {}
            ours = (reader_spec.get("schedulerName") or "default-scheduler") == self.scheduler_name
            if not ours and not reader_spec.get("nodeName"):
                return
        self._problems[(kind.name, key)] = Problem.of(kind.api_kind, kind.api_version, obj, [message], True)

    def _delete(self, kind: Kind, key: str) -> None:
        if kind is QUEUES:
            self.queue_forest.forget_refusal(key)
        if self._store(kind).pop(key, None) is None:
            return
        if kind is PRIORITY_CLASSES:
            self.membership.index.touch_all(self.raw_groups)
        elif kind is POD_GROUPS:
            self.membership.index.touch([key])
            self.membership.object_gone(key, self.pods)
        elif kind is QUEUES:
            self.queue_forest.dirty = True
        elif kind is NODES:
            self._removed["Node"].add(key)
            self._changed["Node"].discard(key)
        elif kind is TOPOLOGIES:
            self._removed["Topology"].add(key)
            self._changed["Topology"].discard(key)
        elif kind in GANG_POD_GROUPS:
            self.membership.index.touch(self.gangs.regroup([key]))
        elif kind in WORKLOADS:
            self.membership.index.touch(self.gangs.regroup(self.gangs.of_workload(key)))
        elif kind is PODS:
            self.membership.forget(key)
            self.expected.gone(key)
            self._held.pop(key, None)
            self._removed["Pod"].add(key)
            self._changed["Pod"].discard(key)


_DRA_KINDS = {kind.name: kind for kind in DRA_WATCHED}


GANG_KIND = GANG_POD_GROUPS[0].name  # the cache's name for the Workload API's PodGroup
