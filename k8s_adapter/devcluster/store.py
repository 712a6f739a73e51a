"""A versioned object store with watch history, the dev cluster's etcd.

One resourceVersion counter for everything, as in Kubernetes. Each resource keeps a
bounded history of its changes so a watch can resume from an older version; asking for
a version older than the history holds is answered with 410 Gone. Stored objects are
never changed in place: every write stores a new dict, so what a watcher was sent
stays what it was.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from k8s_adapter.devcluster.catalog import Resource

Obj = dict[str, Any]
Key = tuple[str, str]  # namespace ("" for cluster-scoped), name


class ApiError(Exception):
    """An answer other than success, in Kubernetes' Status shape."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message

    def status(self) -> Obj:
        return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(eq=False, slots=True)
class Watcher:
    resource: Resource
    namespace: str | None
    matches: Callable[[Obj], bool]
    queue: asyncio.Queue[tuple[str, Obj] | None]
    loop: asyncio.AbstractEventLoop
    closed: bool = False

    def offer(self, kind: str, obj: Obj) -> None:
        if self.closed:
            return
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        if self.namespace and namespace != self.namespace:
            return
        if self.matches(obj):
            self.loop.call_soon_threadsafe(self.queue.put_nowait, (kind, obj))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.loop.call_soon_threadsafe(self.queue.put_nowait, None)


@dataclass(slots=True)
class _Table:
    objects: dict[Key, Obj] = field(default_factory=dict)
    history: deque[tuple[int, str, Obj]] = field(default_factory=lambda: deque(maxlen=5000))
    floor: int = 0  # the oldest version a watch may resume from
    watchers: set[Watcher] = field(default_factory=set)


class Store:
    def __init__(self, history: int = 5000) -> None:
        self.version = 1
        self.history_size = history
        self._tables: dict[tuple[str, str], _Table] = {}  # (group, plural): one table across versions
        self._lock = threading.RLock()

    def _table(self, resource: Resource) -> _Table:
        key = (resource.group, resource.plural)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = _Table(history=deque(maxlen=self.history_size), floor=self.version)
        return table

    # ------------------------------------------------------------------ reads
    def get(self, resource: Resource, namespace: str, name: str) -> Obj:
        with self._lock:
            obj = self._table(resource).objects.get((namespace if resource.namespaced else "", name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{resource.plural} "{name}" not found')
            return obj

    def list(self, resource: Resource, namespace: str | None = None) -> tuple[list[Obj], int]:
        with self._lock:
            table = self._table(resource)
            items = [o for (ns, _), o in sorted(table.objects.items())
                     if not namespace or not resource.namespaced or ns == namespace]
            return items, self.version

    # ------------------------------------------------------------------ writes
    def create(self, resource: Resource, obj: Obj) -> Obj:
        with self._lock:
            meta = obj.setdefault("metadata", {})
            if not meta.get("name"):
                if meta.get("generateName"):
                    meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
                else:
                    raise ApiError(422, "Invalid", "metadata.name: Required value: name or generateName is required")
            key = (meta.get("namespace", "") if resource.namespaced else "", meta["name"])
            table = self._table(resource)
            if key in table.objects:
                raise ApiError(409, "AlreadyExists", f'{resource.plural} "{meta["name"]}" already exists')
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", now_rfc3339())
            meta["generation"] = 1
            obj.setdefault("apiVersion", resource.api_version)
            obj.setdefault("kind", resource.kind)
            return self._write(resource, table, key, obj, "ADDED")

    def replace(self, resource: Resource, obj: Obj, expect_version: str | None = None) -> Obj:
        """Store a new version of an existing object; 409 if ``expect_version`` is stale."""
        with self._lock:
            meta = obj["metadata"]
            key = (meta.get("namespace", "") if resource.namespaced else "", meta["name"])
            table = self._table(resource)
            current = table.objects.get(key)
            if current is None:
                raise ApiError(404, "NotFound", f'{resource.plural} "{meta["name"]}" not found')
            if expect_version and expect_version != current["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {resource.plural} "{meta["name"]}": '
                                                "the object has been modified; please apply your changes to the "
                                                "latest version and try again")
            for immutable in ("uid", "creationTimestamp"):
                meta[immutable] = current["metadata"][immutable]
            if obj.get("spec") != current.get("spec"):
                meta["generation"] = current["metadata"].get("generation", 1) + 1
            else:
                meta["generation"] = current["metadata"].get("generation", 1)
            return self._write(resource, table, key, obj, "MODIFIED")

    def delete(self, resource: Resource, namespace: str, name: str) -> Obj:
        with self._lock:
            key = (namespace if resource.namespaced else "", name)
            table = self._table(resource)
            current = table.objects.pop(key, None)
            if current is None:
                raise ApiError(404, "NotFound", f'{resource.plural} "{name}" not found')
            self.version += 1
            gone = copy.copy(current)
            gone["metadata"] = {**current["metadata"], "resourceVersion": str(self.version)}
            self._record(table, "DELETED", gone)
            return gone

    def _write(self, resource: Resource, table: _Table, key: Key, obj: Obj, kind: str) -> Obj:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        table.objects[key] = obj
        self._record(table, kind, obj)
        return obj

    def _record(self, table: _Table, kind: str, obj: Obj) -> None:
        if len(table.history) == table.history.maxlen:
            table.floor = table.history[0][0]
        table.history.append((self.version, kind, obj))
        for watcher in list(table.watchers):
            watcher.offer(kind, obj)

    # ------------------------------------------------------------------ watches
    def watch(self, resource: Resource, namespace: str | None, since: str | None, matches: Callable[[Obj], bool],
              loop: asyncio.AbstractEventLoop) -> Watcher:
        """Start a watch; replays changes after ``since`` (or every object as ADDED when empty/0)."""
        with self._lock:
            table = self._table(resource)
            watcher = Watcher(resource, namespace, matches, asyncio.Queue(), loop)
            if not since or since == "0":
                for obj in self.list(resource, namespace)[0]:
                    watcher.offer("ADDED", obj)
            else:
                try:
                    start = int(since)
                except ValueError:
                    raise ApiError(400, "BadRequest", f"invalid resourceVersion {since!r}") from None
                if start < table.floor:
                    raise ApiError(410, "Expired", f"too old resource version: {start} ({table.floor})")
                for version, kind, obj in table.history:
                    if version > start:
                        watcher.offer(kind, obj)
            table.watchers.add(watcher)
            return watcher

    def unwatch(self, watcher: Watcher) -> None:
        with self._lock:
            self._table(watcher.resource).watchers.discard(watcher)

    def drop_watches(self) -> int:
        with self._lock:
            count = 0
            for table in self._tables.values():
                for watcher in list(table.watchers):
                    watcher.close()
                    count += 1
                table.watchers.clear()
            return count

    def expire_history(self) -> None:
        """Forget all history: any watch resuming from an earlier version gets 410."""
        with self._lock:
            for table in self._tables.values():
                table.history.clear()
                table.floor = self.version
