"""The watch side of the cluster cache: what the watches delivered, not yet turned into deltas.

The watch callbacks run on the event loop and do O(1) work per event: an out-of-date event is
dropped by its resourceVersion, the newest raw object per key is kept (an object that changes
five times between cycles is decoded once), a fresh list of a kind is noted so the records can
drop what it no longer holds. ``take`` hands everything over to ``ClusterCache.take_deltas``,
which runs off the event loop; a lock keeps the two sides apart. DRA kinds are decoded by their
own records, in the order the watches delivered them, so their lists are kept whole.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from k8s_adapter.api import JSON
from k8s_adapter.kinds import DRA_WATCHED, Kind, resource_version

Entry = tuple[Kind, str, JSON]  # kind, event type, raw object
Hold = tuple[float, str]  # held back until (time.monotonic), why


def object_key(kind: Kind, obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    return f"{meta.get('namespace') or 'default'}/{name}" if kind.namespaced else name


@dataclass(slots=True)
class Batch:
    """Everything delivered since the last ``take``."""

    events: dict[tuple[str, str], Entry] = field(default_factory=dict)  # (kind, key) -> newest
    relisted: dict[str, tuple[Kind, set[str]]] = field(default_factory=dict)  # kind -> (kind, keys listed)
    dra_lists: dict[str, tuple[Kind, list[JSON]]] = field(default_factory=dict)  # DRA kinds listed afresh
    holds: dict[str, Hold] = field(default_factory=dict)  # pods to keep from the coordinator
    # Evictions, in the order they came: (pod, True) handed out, (pod, False) not sent or not taken.
    evictions: list[tuple[str, bool]] = field(default_factory=list)

    def kinds(self) -> set[str]:
        return {name for name, _ in self.events} | set(self.relisted) | set(self.dra_lists)


class Inbox:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batch = Batch()
        self._versions: dict[tuple[str, str], int] = {}  # the newest version delivered, by (kind, key)
        self._paged: dict[str, set[str]] = {}  # kind -> keys its list in progress delivered in pages

    def page(self, kind: Kind, items: list[JSON]) -> None:
        """A page of a list in progress: its objects are kept like watch events (a newer version
        wins), so they can be decoded while the other pages come; the whole list follows."""
        if kind in DRA_WATCHED:
            return  # their records take the list whole
        for obj in items:
            if self.event(kind, "ADDED", obj):
                with self._lock:
                    self._paged.setdefault(kind.name, set()).add(object_key(kind, obj))

    def listed(self, kind: Kind, items: list[JSON]) -> None:
        """A fresh list replaces everything known of that kind."""
        keys = {object_key(kind, obj) for obj in items}
        with self._lock:
            paged = self._paged.pop(kind.name, set())
            batch = self._batch
            for obj in items:
                version = resource_version(obj)
                if version is not None:
                    self._versions[(kind.name, object_key(kind, obj))] = version
            for name, key in [k for k in self._versions if k[0] == kind.name and k[1] not in keys]:
                del self._versions[(name, key)]
            if kind in DRA_WATCHED:  # the DRA records take the list whole; earlier events are moot
                batch.dra_lists[kind.name] = (kind, items)
                for entry in [k for k in batch.events if k[0] == kind.name]:
                    del batch.events[entry]
                return
            for obj in items:
                key = object_key(kind, obj)
                if key in paged:  # delivered by a page of this list: taken or waiting, not twice
                    continue
                batch.events[(kind.name, key)] = (kind, "ADDED", obj)
            for (name, key), (_, _, obj) in list(batch.events.items()):
                if name == kind.name and key not in keys:
                    batch.events[(name, key)] = (kind, "DELETED", obj)
            batch.relisted[kind.name] = (kind, keys)

    def event(self, kind: Kind, event: str, obj: JSON) -> bool:
        """Keep a watch event; False (and nothing kept) when it is a duplicate or out of date."""
        key = object_key(kind, obj)
        version = resource_version(obj)
        with self._lock:
            last = self._versions.get((kind.name, key))
            if last is not None and version is not None and version <= last and event != "DELETED":
                return False
            self._batch.events[(kind.name, key)] = (kind, event, obj)
            if event == "DELETED":
                self._versions.pop((kind.name, key), None)
            elif version is not None:
                self._versions[(kind.name, key)] = version
        return True

    def hold(self, pod: str, until: float, why: str) -> None:
        with self._lock:
            self._batch.holds[pod] = (until, why)

    def evictions(self, pods: list[str], sent: bool) -> None:
        with self._lock:
            self._batch.evictions.extend((pod, sent) for pod in pods)

    def versions(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._versions)

    def pending(self) -> int:
        """Events, lists, holds and evictions not yet taken."""
        with self._lock:
            batch = self._batch
            parts = (batch.events, batch.relisted, batch.dra_lists, batch.holds, batch.evictions)
            return sum(len(part) for part in parts)

    def newest(self, kind: Kind, key: str) -> Entry | None:
        """The newest event of an object not yet taken, if there is one."""
        with self._lock:
            return self._batch.events.get((kind.name, key))

    def take(self) -> Batch:
        with self._lock:
            batch, self._batch = self._batch, Batch()
        return batch
