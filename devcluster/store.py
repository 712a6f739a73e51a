"""The dev cluster's etcd: versioned objects, a bounded change history, and watch fan-out.

Invariants:
- One resourceVersion counter for every object of every kind; each write takes the next value,
  so versions are unique and increase in write order across the whole store.
- Stored objects are never changed in place. A write stores a new dict; readers, lists, paged
  snapshots and watchers may hold on to old ones safely, and no write copies the world.
- Each table (one per group+plural) keeps its last ``history`` changes. A watch may resume
  from any version at or after the table's ``floor``; older versions are 410 Expired, as the
  real watch cache answers once it has dropped the events in between.
- Every change is offered to the table's watchers synchronously, in version order, inside the
  write; watchers only queue, so a write costs O(watchers) and never waits on a client.

Everything runs on one event loop thread; the store takes no locks.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from devcluster.catalog import ResourceType
from devcluster.errors import expired

Obj = dict[str, Any]
StorageKey = tuple[str, str]


@dataclass(slots=True)
class Change:
    """One write: the object after it (for DELETED, its last state) and before it."""

    rv: int
    type: str  # ADDED, MODIFIED or DELETED
    obj: Obj
    prev: Obj | None
    lines: dict[tuple[str, str], bytes] = field(default_factory=dict)  # serialised once, shared by watchers


class Subscriber(Protocol):
    namespace: str | None

    def deliver(self, change: Change) -> None: ...

    def close(self, abrupt: bool = False) -> None: ...


Listener = Callable[[ResourceType, Change], None]


@dataclass(slots=True)
class Table:
    rt: ResourceType  # the type the table was first written through (any served version will do)
    history_size: int
    objects: dict[str, dict[str, Obj]] = field(default_factory=dict)  # namespace ("" if none) -> name -> obj
    history: deque[Change] = field(default_factory=deque)
    floor: int = 0  # the oldest version a watch can resume from without missing a change
    watchers: set[Subscriber] = field(default_factory=set)
    _order: dict[str, list[str]] = field(default_factory=dict)  # sorted names per namespace, rebuilt lazily

    def record(self, change: Change) -> None:
        if len(self.history) >= self.history_size:
            self.floor = self.history.popleft().rv
        self.history.append(change)
        for watcher in tuple(self.watchers):
            ns = watcher.namespace
            if ns is None or ns == change.obj["metadata"].get("namespace", ""):
                watcher.deliver(change)

    def names(self, namespace: str) -> list[str]:
        order = self._order.get(namespace)
        if order is None:
            order = self._order[namespace] = sorted(self.objects.get(namespace, ()))
        return order


class Store:
    def __init__(self, history: int = 10_000) -> None:
        self.version = 0
        self.history_size = history
        self._tables: dict[StorageKey, Table] = {}
        self.listeners: list[Listener] = []

    def table(self, rt: ResourceType) -> Table:
        table = self._tables.get(rt.storage_key)
        if table is None:
            table = self._tables[rt.storage_key] = Table(rt, self.history_size)
        return table

    # ------------------------------------------------------------------ reads
    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        return self.table(rt).objects.get(namespace if rt.namespaced else "", {}).get(name)

    def items(self, rt: ResourceType, namespace: str | None = None) -> Iterator[Obj]:
        """Objects in key order (namespace, then name), optionally of one namespace only."""
        table = self.table(rt)
        spaces = [namespace] if namespace is not None and rt.namespaced else sorted(table.objects)
        for ns in spaces:
            bucket = table.objects.get(ns, {})
            for name in table.names(ns):
                yield bucket[name]

    # ------------------------------------------------------------------ writes
    def insert(self, rt: ResourceType, obj: Obj) -> Obj:
        """Store a new object (the caller checked it does not exist); stamps uid and version."""
        meta = obj["metadata"]
        meta.setdefault("uid", str(uuid.uuid4()))
        ns = meta.get("namespace", "") if rt.namespaced else ""
        table = self.table(rt)
        bucket = table.objects.setdefault(ns, {})
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        bucket[meta["name"]] = obj
        table._order.pop(ns, None)
        self._changed(rt, table, Change(self.version, "ADDED", obj, None))
        return obj

    def replace(self, rt: ResourceType, obj: Obj) -> Obj:
        """Store a new version of an existing object; ``obj`` must be a fresh dict."""
        meta = obj["metadata"]
        ns = meta.get("namespace", "") if rt.namespaced else ""
        table = self.table(rt)
        prev = table.objects[ns][meta["name"]]
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        table.objects[ns][meta["name"]] = obj
        self._changed(rt, table, Change(self.version, "MODIFIED", obj, prev))
        return obj

    def remove(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        """Delete an existing object; returns its last state stamped with the deletion's version."""
        ns = namespace if rt.namespaced else ""
        table = self.table(rt)
        prev = table.objects[ns].pop(name)
        if not table.objects[ns]:
            del table.objects[ns]
        table._order.pop(ns, None)
        self.version += 1
        gone = {**prev, "metadata": {**prev["metadata"], "resourceVersion": str(self.version)}}
        self._changed(rt, table, Change(self.version, "DELETED", gone, prev))
        return gone

    def _changed(self, rt: ResourceType, table: Table, change: Change) -> None:
        table.record(change)
        for listener in self.listeners:
            listener(rt, change)

    def drop_table(self, rt: ResourceType) -> int:
        """Delete every object of a kind (its CRD went away); watchers see DELETED events."""
        table = self.table(rt)
        names = [(ns, name) for ns, bucket in table.objects.items() for name in bucket]
        for ns, name in names:
            self.remove(rt, ns, name)
        for watcher in tuple(table.watchers):
            watcher.close()
        table.watchers.clear()
        return len(names)

    def purge_namespace(self, namespace: str) -> int:
        """Delete every namespaced object in ``namespace`` (the namespace itself is gone)."""
        removed = 0
        for table in tuple(self._tables.values()):
            if table.rt.namespaced:
                for name in list(table.objects.get(namespace, {})):
                    self.remove(table.rt, namespace, name)
                    removed += 1
        return removed

    # ------------------------------------------------------------------ watches
    def watch(self, rt: ResourceType, watcher: Subscriber, since: int | None) -> None:
        """Register ``watcher``; with ``since``, first replay the retained changes after it.

        Raises 410 Expired when changes after ``since`` have already left the history.
        """
        table = self.table(rt)
        if since is not None:
            if since < table.floor:
                raise expired(f"too old resource version: {since} ({table.floor})")
            replay = []
            for change in reversed(table.history):
                if change.rv <= since:
                    break
                replay.append(change)
            for change in reversed(replay):
                ns = watcher.namespace
                if ns is None or ns == change.obj["metadata"].get("namespace", ""):
                    watcher.deliver(change)
        table.watchers.add(watcher)

    def unwatch(self, rt: ResourceType, watcher: Subscriber) -> None:
        self.table(rt).watchers.discard(watcher)

    def watcher_count(self) -> int:
        return sum(len(t.watchers) for t in self._tables.values())

    def drop_watches(self, plural: str | None = None, abrupt: bool = True) -> int:
        """End open watches (of one plural, or all); abrupt drops cut the connection mid-stream."""
        dropped = 0
        for (_, table_plural), table in self._tables.items():
            if plural is not None and table_plural != plural:
                continue
            for watcher in tuple(table.watchers):
                watcher.close(abrupt)
                dropped += 1
            table.watchers.clear()
        return dropped

    def expire_history(self, plural: str | None = None) -> None:
        """Forget retained changes: a watch from any version before now gets 410."""
        for (_, table_plural), table in self._tables.items():
            if plural is None or table_plural == plural:
                table.history.clear()
                table.floor = self.version
