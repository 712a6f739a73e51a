"""The DRA objects the watches saw (ResourceSlices, DeviceClasses, ResourceClaims), as records.

Kept apart from ``cache.py``'s kinds: decoded with the snapshot reader's parsers, a malformed
object logged in one line, skipped and kept in ``refused`` (the cache reports it as an Event),
changes handed over as one ``DraChanges`` per loop turn. Fed by the cache's ``take_deltas``,
off the event loop, in the order the watches delivered.
"""

from __future__ import annotations

import logging

from k8s_adapter.api import JSON
from k8s_adapter.kinds import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES, Kind, resource_version
from kai_ray.errors import InputError
from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_dra import parse_device_class, parse_resource_claim, parse_resource_slice
from kai_ray.model import DeviceClass, DraChanges, ResourceClaim, ResourceSlice

log = logging.getLogger(__name__)


class DraCache:
    def __init__(self) -> None:
        self.slices: dict[str, ResourceSlice] = {}
        self.classes: dict[str, DeviceClass] = {}
        self.claims: dict[str, ResourceClaim] = {}
        self.versions: dict[tuple[str, str], int] = {}
        self.decode_errors = 0
        self.refused: dict[tuple[str, str], tuple[JSON, str]] = {}  # (kind, key) -> (object, why): for events
        self._changed: dict[str, set[str]] = {k.name: set() for k in (RESOURCE_SLICES, DEVICE_CLASSES, RESOURCE_CLAIMS)}
        self._removed: dict[str, set[str]] = {k: set() for k in self._changed}

    def _store(self, kind: Kind) -> dict[str, object]:
        stores: dict[str, dict[str, object]] = {
            RESOURCE_SLICES.name: self.slices,  # type: ignore[dict-item]
            DEVICE_CLASSES.name: self.classes,  # type: ignore[dict-item]
            RESOURCE_CLAIMS.name: self.claims,  # type: ignore[dict-item]
        }
        return stores[kind.name]

    def on_list(self, kind: Kind, items: list[JSON]) -> None:
        store = self._store(kind)
        seen = set()
        for obj in items:
            key = _key(kind, obj)
            seen.add(key)
            self.versions.pop((kind.name, key), None)
            self.on_event(kind, "ADDED", obj)
        for key in [k for k in store if k not in seen]:
            self._delete(kind, key)
        for gone in [k for k in self.refused if k[0] == kind.name and k[1] not in seen]:
            del self.refused[gone]

    def on_event(self, kind: Kind, event: str, obj: JSON) -> None:
        key = _key(kind, obj)
        if event == "DELETED":
            self.versions.pop((kind.name, key), None)
            self.refused.pop((kind.name, key), None)
            self._delete(kind, key)
            return
        version = resource_version(obj)
        last = self.versions.get((kind.name, key))
        if last is not None and version is not None and version <= last:
            return
        if version is not None:
            self.versions[(kind.name, key)] = version
        try:
            reader = ObjectReader({**obj, "kind": kind.name}, 0)
            record: object
            if kind is RESOURCE_SLICES:
                record = parse_resource_slice(reader)
            elif kind is DEVICE_CLASSES:
                record = parse_device_class(reader)
            else:
                record = parse_resource_claim(reader)
        except InputError as exc:
            self.decode_errors += 1
            log.warning("skipping malformed object: %s", exc)
            # The last good record stays: an allocated claim that turned unreadable still holds
            # its devices, and forgetting it would give them to someone else.
            self.refused[(kind.name, key)] = (obj, str(exc))
            return
        self.refused.pop((kind.name, key), None)
        self._store(kind)[key] = record
        self._changed[kind.name].add(key)
        self._removed[kind.name].discard(key)

    def _delete(self, kind: Kind, key: str) -> None:
        if self._store(kind).pop(key, None) is not None:
            self._removed[kind.name].add(key)
            self._changed[kind.name].discard(key)

    def take(self) -> DraChanges:
        changed, removed = self._changed, self._removed
        out = DraChanges(
            slices_upserted=tuple(self.slices[k] for k in changed[RESOURCE_SLICES.name] if k in self.slices),
            slices_removed=tuple(removed[RESOURCE_SLICES.name]),
            classes_upserted=tuple(self.classes[k] for k in changed[DEVICE_CLASSES.name] if k in self.classes),
            classes_removed=tuple(removed[DEVICE_CLASSES.name]),
            claims_upserted=tuple(self.claims[k] for k in changed[RESOURCE_CLAIMS.name] if k in self.claims),
            claims_removed=tuple(removed[RESOURCE_CLAIMS.name]),
        )
        for bucket in (*changed.values(), *removed.values()):
            bucket.clear()
        return out


def _key(kind: Kind, obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    return f"{meta.get('namespace') or 'default'}/{name}" if kind.namespaced else name
