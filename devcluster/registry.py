"""Generic REST semantics over the store: what every kind gets, and hooks for the few that differ.

- create: server-owned metadata (uid, creationTimestamp, generation, resourceVersion) is set by
  the server; the namespace must exist; an existing name is 409 AlreadyExists.
- update (PUT) and patch: a resourceVersion in the body (or patch) is a precondition, so a stale
  one is 409 Conflict; the main resource never changes ``status`` and ``/status`` changes nothing
  else, for kinds with a status subresource; ``generation`` grows when the spec changes; a write
  that changes nothing is not stored and sends no watch event, as upstream.
- delete: uid/resourceVersion preconditions; objects with finalizers only get a
  deletionTimestamp and go when the last finalizer is removed; pods go gracefully (pods.py).
- list: selectors, ``limit``/``continue`` pages served from a snapshot taken at the first page,
  so a paged list is consistent at its resourceVersion like an etcd list.
Per-kind rules live in ``Strategy`` subclasses registered by storage key.
"""

from __future__ import annotations

import base64
import itertools
import random
import re
from collections import OrderedDict
from typing import Any

import orjson

from devcluster import errors
from devcluster.catalog import Catalog, ResourceType
from devcluster.clock import Clock
from devcluster.patch import apply_patch
from devcluster.selectors import Predicate, everything
from devcluster.store import Store

Obj = dict[str, Any]
Causes = list[tuple[str, str]]
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SERVER_OWNED = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "managedFields",
)
_NAME_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet generateName draws from upstream


def clone(obj: Any) -> Any:
    """A deep copy of JSON data; faster than copy.deepcopy for API objects."""
    return orjson.loads(orjson.dumps(obj))


def check_name(name: str, label: bool = False) -> str | None:
    """Why ``name`` is not a valid object name, or None."""
    if label and (len(name) > 63 or not DNS_LABEL.match(name)):
        return (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
            "start and end with an alphanumeric character"
        )
    if len(name) > 253 or not SUBDOMAIN.match(name):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


class Strategy:
    """The default per-kind rules; subclasses override what their kind does differently."""

    keep_status_on_create = False  # kinds with a status subresource drop status on create, except nodes
    name_is_label = False

    def prepare_create(self, reg: Registry, rt: ResourceType, obj: Obj) -> None:
        """Fill defaults on a new object (owned by the caller, may be changed in place)."""

    def validate(self, reg: Registry, rt: ResourceType, obj: Obj, old: Obj | None) -> Causes:
        """Field errors that make the write 422 Invalid."""
        return []

    def prepare_update(self, reg: Registry, rt: ResourceType, new: Obj, old: Obj, subresource: str) -> None:
        """Adjust an update (``new`` may be changed in place) or raise ApiError."""

    def delete(self, reg: Registry, rt: ResourceType, obj: Obj, options: Obj) -> Obj | None:
        """Handle a delete specially (graceful pods); None means the generic path applies."""
        return None

    def deleted(self, reg: Registry, rt: ResourceType, obj: Obj) -> None:
        """Clean up after an object has left the store."""


class Registry:
    def __init__(self, store: Store, catalog: Catalog, clock: Clock, snapshots: int = 64) -> None:
        self.store = store
        self.catalog = catalog
        self.clock = clock
        self.strategies: dict[tuple[str, str], Strategy] = {}
        self._default = Strategy()
        self._snapshots: OrderedDict[int, list[Obj]] = OrderedDict()
        self._snapshot_limit = snapshots
        self._snapshot_ids = itertools.count(1)

    def strategy(self, rt: ResourceType) -> Strategy:
        return self.strategies.get(rt.storage_key, self._default)

    # ------------------------------------------------------------------ reads
    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(rt, namespace, name)
        if obj is None:
            raise errors.not_found(rt.plural, name, rt.group)
        return obj

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        predicate: Predicate = everything,
        limit: int = 0,
        token: str | None = None,
        filtered: bool = False,
    ) -> Obj:
        """A ``<Kind>List`` body; with ``limit``, one page and a ``continue`` token for the rest."""
        if token:
            snapshot_id, offset, version = _read_token(token)
            items = self._snapshots.get(snapshot_id)
            if items is None:
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."
                )
        else:
            version = self.store.version
            offset = 0
            items = [o for o in self.store.items(rt, namespace) if predicate is everything or predicate(o)]
        meta: Obj = {"resourceVersion": str(version)}
        page = items
        if limit and len(items) - offset > limit:
            page = items[offset : offset + limit]
            if not token:
                snapshot_id = next(self._snapshot_ids)
                self._snapshots[snapshot_id] = items
                while len(self._snapshots) > self._snapshot_limit:
                    self._snapshots.popitem(last=False)
            meta["continue"] = _make_token(snapshot_id, offset + limit, version)
            if not filtered:
                meta["remainingItemCount"] = len(items) - offset - limit
        elif offset:
            page = items[offset:]
        if rt.custom:
            page = [o if o.get("apiVersion") == rt.api_version else {**o, "apiVersion": rt.api_version} for o in page]
        return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta, "items": page}

    def forget_snapshots(self) -> None:
        self._snapshots.clear()

    # ------------------------------------------------------------------ create
    def create(self, rt: ResourceType, namespace: str | None, body: Any, dry_run: bool = False) -> Obj:
        obj = self._decode(rt, body)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if namespace and body_ns and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace or body_ns or "default"
        else:
            meta.pop("namespace", None)
        for key in SERVER_OWNED:
            meta.pop(key, None)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise errors.invalid(
                    rt.kind, "", [("metadata.name", "Required value: name or generateName is required")], rt.group
                )
            meta["name"] = meta["generateName"] + "".join(random.choices(_NAME_SUFFIX, k=5))
        strategy = self.strategy(rt)
        if rt.has_status and not strategy.keep_status_on_create:
            obj.pop("status", None)
        causes = self._name_causes(rt, strategy, meta["name"])
        if (
            rt.namespaced
            and self.store.get(self.catalog.require("", "v1", "namespaces"), "", meta["namespace"]) is None
        ):
            raise errors.not_found("namespaces", meta["namespace"])
        strategy.prepare_create(self, rt, obj)
        causes += strategy.validate(self, rt, obj, None)
        if causes:
            raise errors.invalid(rt.kind, meta["name"], causes, rt.group)
        if self.store.get(rt, meta.get("namespace", ""), meta["name"]) is not None:
            raise errors.already_exists(rt.plural, meta["name"], rt.group)
        meta["creationTimestamp"] = self.clock.timestamp()
        meta["generation"] = 1
        if dry_run:
            return obj
        return self.store.insert(rt, obj)

    def _decode(self, rt: ResourceType, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        obj: Obj = clone(body)
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != rt.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rt.api_version})"
            )
        if kind and kind != rt.kind:
            raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        return obj

    def _name_causes(self, rt: ResourceType, strategy: Strategy, name: str) -> Causes:
        why = check_name(name, strategy.name_is_label)
        return [("metadata.name", f'Invalid value: "{name}": {why}')] if why else []

    # ------------------------------------------------------------------ update and patch
    def update(
        self, rt: ResourceType, namespace: str, name: str, body: Any, subresource: str = "", dry_run: bool = False
    ) -> Obj:
        old = self.get(rt, namespace, name)
        new = self._decode(rt, body)
        meta = new.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and meta.get("namespace", namespace) != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        return self._write(rt, old, new, subresource, dry_run)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        content_type: str,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Obj:
        old = self.get(rt, namespace, name)
        patched = apply_patch(clone(old), body, content_type, rt.custom)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        meta = patched.setdefault("metadata", {})
        if meta.get("name") != name or (rt.namespaced and meta.get("namespace") != namespace):
            raise errors.invalid(
                rt.kind, name, [("metadata.name", "the patch may not change the name or namespace")], rt.group
            )
        return self._write(rt, old, patched, subresource, dry_run)

    def _write(self, rt: ResourceType, old: Obj, new: Obj, subresource: str, dry_run: bool) -> Obj:
        old_meta, meta = old["metadata"], new.setdefault("metadata", {})
        wanted = meta.get("resourceVersion")
        if wanted and wanted != old_meta["resourceVersion"]:
            raise errors.conflict(rt.plural, old_meta["name"], errors.STALE, rt.group)
        if subresource == "status":
            if not rt.has_status:
                raise errors.not_found(f"{rt.plural}/status", old_meta["name"], rt.group)
            new = {**old, "status": new.get("status")}
            if new["status"] is None:
                del new["status"]
            meta = new["metadata"] = dict(old_meta)
        elif subresource:
            raise errors.method_not_allowed(f"{rt.plural}/{subresource} cannot be updated")
        else:
            for key in SERVER_OWNED:
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            if rt.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
        strategy = self.strategy(rt)
        strategy.prepare_update(self, rt, new, old, subresource)
        causes = strategy.validate(self, rt, new, old)
        if causes:
            raise errors.invalid(rt.kind, old_meta["name"], causes, rt.group)
        if _content(new, rt.has_status) != _content(old, rt.has_status):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if new == old:
            return old  # nothing changed: no new version, no watch event
        if dry_run:
            return new
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and meta.get("deletionGracePeriodSeconds") in (0, None)
        ):
            return self._remove(rt, new)  # the last finalizer went: the pending delete completes
        return self.store.replace(rt, new)

    # ------------------------------------------------------------------ delete
    def delete(
        self, rt: ResourceType, namespace: str, name: str, options: Obj | None = None, dry_run: bool = False
    ) -> Obj:
        options = options or {}
        obj = self.get(rt, namespace, name)
        meta = obj["metadata"]
        preconditions = options.get("preconditions") or {}
        if preconditions.get("uid") and preconditions["uid"] != meta["uid"]:
            raise errors.conflict(
                rt.plural,
                name,
                f"Precondition failed: UID in precondition: {preconditions['uid']}, UID in object meta: {meta['uid']}",
                rt.group,
            )
        if preconditions.get("resourceVersion") and preconditions["resourceVersion"] != meta["resourceVersion"]:
            raise errors.conflict(
                rt.plural,
                name,
                "Precondition failed: ResourceVersion in precondition: "
                f"{preconditions['resourceVersion']}, ResourceVersion in object meta: "
                f"{meta['resourceVersion']}",
                rt.group,
            )
        if dry_run:
            return obj
        handled = self.strategy(rt).delete(self, rt, obj, options)
        if handled is not None:
            return handled
        return self.finish_delete(rt, obj)

    def finish_delete(self, rt: ResourceType, obj: Obj) -> Obj:
        """Remove ``obj`` now, or mark it deleted and leave it to its finalizers."""
        meta = obj["metadata"]
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds") == 0:
                return obj
            marked = {
                **obj,
                "metadata": {
                    **meta,
                    "deletionTimestamp": meta.get("deletionTimestamp") or self.clock.timestamp(),
                    "deletionGracePeriodSeconds": 0,
                },
            }
            return self.store.replace(rt, marked)
        return self._remove(rt, obj)

    def _remove(self, rt: ResourceType, obj: Obj) -> Obj:
        meta = obj["metadata"]
        gone = self.store.remove(rt, meta.get("namespace", ""), meta["name"])
        self.strategy(rt).deleted(self, rt, gone)
        return gone

    def delete_collection(
        self,
        rt: ResourceType,
        namespace: str | None,
        predicate: Predicate,
        options: Obj | None = None,
        dry_run: bool = False,
    ) -> Obj:
        chosen = [o for o in self.store.items(rt, namespace) if predicate(o)]
        done = [
            self.delete(rt, o["metadata"].get("namespace", ""), o["metadata"]["name"], options, dry_run) for o in chosen
        ]
        return {
            "kind": f"{rt.kind}List",
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(self.store.version)},
            "items": done,
        }


def _content(obj: Obj, has_status: bool) -> Obj:
    """What ``generation`` tracks: everything but metadata (and status when it has its own endpoint)."""
    skip = ("metadata", "status") if has_status else ("metadata",)
    return {k: v for k, v in obj.items() if k not in skip}


def _make_token(snapshot: int, offset: int, version: int) -> str:
    raw = orjson.dumps({"v": "devcluster/v1", "rv": version, "snapshot": snapshot, "offset": offset})
    return base64.urlsafe_b64encode(raw).decode()


def _read_token(token: str) -> tuple[int, int, int]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["snapshot"]), int(data["offset"]), int(data["rv"])
    except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        raise errors.bad_request(f"continue key is not valid: {token!r}") from None
