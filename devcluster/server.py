"""The HTTP face of the dev cluster: Kubernetes API paths and verbs mapped onto the registry.

URLs are read the way the API server's RequestInfo reads them: ``/api/v1`` or
``/apis/<group>/<version>``, an optional ``namespaces/<ns>`` prefix (except for a namespace's
own ``status``/``finalize``), then ``<plural>[/<name>[/<subresource>]]``, with the old
``/watch/`` prefix accepted too. The request's verb (get, list, watch, create, update, patch,
delete, deletecollection) is what fault injection matches on. Every failure is answered with
a ``kind: Status`` body carrying the code and reason clients branch on.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import yaml
from aiohttp import web

from devcluster import discovery, errors, openapi, tables
from devcluster.catalog import ResourceType
from devcluster.errors import ApiError
from devcluster.eviction import evict
from devcluster.faults import FaultRule, Faults
from devcluster.pods import bind
from devcluster.registry import Registry
from devcluster.selectors import both, parse_field_selector, parse_label_selector
from devcluster.watch import Watcher, encode, serve

log = logging.getLogger(__name__)
Obj = dict[str, Any]
NOT_FOUND = ApiError(404, "NotFound", "the server could not find the requested resource")
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def respond(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json", headers=headers)


def failure(exc: ApiError) -> web.Response:
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
    return respond(exc.status(), exc.code, headers)


@dataclass(frozen=True, slots=True)
class Target:
    """What a resource URL names."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str
    watch_path: bool


@dataclass(slots=True)
class Settings:
    bookmark_interval: float = 60.0  # how often a quiet watch that allows bookmarks gets one
    watch_timeout: tuple[float, float] = (1800.0, 3600.0)  # server's pick when the client sets none


class ApiServer:
    def __init__(self, registry: Registry, faults: Faults, settings: Settings | None = None) -> None:
        self.registry = registry
        self.faults = faults
        self.settings = settings or Settings()
        self.requests = 0
        self.logs: Callable[[Obj, str | None], str] | None = None  # a pod's output (the node simulator's)
        self.app = web.Application(client_max_size=256 * 2**20)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        try:
            return await self._route(request)
        except ApiError as exc:
            return failure(exc)
        except (orjson.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as exc:
            return failure(errors.bad_request(f"the body of the request could not be decoded: {exc}"))
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug in the fake must still look like a server error to the client
            log.exception("dev cluster failed on %s %s", request.method, request.path_qs)
            return failure(ApiError(500, "InternalError", f"dev cluster error: {exc!r}"))

    async def _route(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        catalog = self.registry.catalog
        if not parts:
            return respond(
                {
                    "paths": [
                        "/api",
                        "/api/v1",
                        "/apis",
                        "/healthz",
                        "/livez",
                        "/openapi/v2",
                        "/openapi/v3",
                        "/readyz",
                        "/version",
                    ]
                }
            )
        head = parts[0]
        if head == "version":
            return respond(discovery.VERSION)
        if head in ("healthz", "livez", "readyz"):
            return web.Response(text="ok")
        if head == "openapi" and parts[1:] == ["v2"]:
            if any(kind in request.headers.get("Accept", "") for kind in openapi.V2_PROTOBUF_ACCEPTED):
                return web.Response(body=openapi.v2_protobuf(), content_type=openapi.V2_PROTOBUF)
            return respond(openapi.v2_document())
        if head == "openapi" and parts[1:2] == ["v3"]:
            doc = openapi.index(catalog) if len(parts) == 2 else openapi.document(catalog, "/".join(parts[2:]))
            return respond(doc or _raise(NOT_FOUND))
        if head == "_devcluster":
            return await self._admin(request, parts[1:])
        if head == "api" and len(parts) == 1:
            return respond(discovery.api_versions(request.host))
        if head == "apis" and len(parts) == 1:
            return respond(discovery.group_list(catalog))
        if head == "apis" and len(parts) == 2:
            return respond(discovery.group(catalog, parts[1]) or _raise(NOT_FOUND))
        if head == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif head == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise NOT_FOUND
        if not rest:
            return respond(discovery.resource_list(catalog, group, version) or _raise(NOT_FOUND))
        target = self._target(group, version, rest)
        return await self._serve(request, target)

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        watch_path = rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise NOT_FOUND
        rt = self.registry.catalog.find(group, version, rest[0])
        if rt is None or (namespace is not None and not rt.namespaced):
            raise NOT_FOUND
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if sub and rt.subresource(sub) is None:
            raise NOT_FOUND
        if rt.namespaced and name is not None and namespace is None:
            raise NOT_FOUND
        return Target(rt, namespace, name, sub, watch_path)

    async def _serve(self, request: web.Request, t: Target) -> web.StreamResponse:
        query = request.query
        method = request.method
        watching = t.watch_path or (method == "GET" and _flag(query.get("watch")))
        verb = _verb(method, t.name is not None, watching)
        sub = t.rt.subresource(t.subresource) if t.subresource else None
        misplaced = (t.name is None and verb in ("update", "patch")) or (verb == "create" and t.name and sub is None)
        if verb not in (sub.verbs if sub else t.rt.verbs) or misplaced:
            raise errors.method_not_allowed(
                f"the server does not allow this method on the requested resource: {method}"
            )
        delay, injected = self.faults.check(verb, t.rt.plural, t.subresource, t.name or "")
        if delay:
            await asyncio.sleep(delay)
        if injected is not None:
            if verb == "watch" and injected.code == 410:
                return await _error_stream(request, injected)
            raise injected
        reg, rt, ns = self.registry, t.rt, t.namespace or ""
        dry_run = query.get("dryRun") == "All"
        if verb == "get" and t.subresource == "log":
            pod = reg.get(rt, ns, t.name or "")
            return web.Response(text=self.logs(pod, query.get("container")) if self.logs else "")
        if verb == "get":
            obj = reg.get(rt, ns, t.name or "")
            return self._answer(request, rt, obj)
        if verb in ("list", "watch"):
            return await self._list_or_watch(request, t, verb == "watch")
        body = await _body(request)
        if (verb == "create" and t.subresource in ("binding", "eviction")) or rt.plural == "bindings":
            pods = reg.catalog.require("", "v1", "pods")
            if t.subresource == "eviction":
                evict(reg, pods, ns, t.name or "", body)
            else:
                bind(reg, pods, ns, t.name or (body.get("metadata") or {}).get("name", ""), body)
            return respond(SUCCESS, 201)
        if verb == "create":
            return self._answer(request, rt, reg.create(rt, t.namespace, body, dry_run), 201)
        if verb == "update":
            return self._answer(request, rt, reg.update(rt, ns, t.name or "", body, t.subresource, dry_run))
        if verb == "patch":
            content_type = request.content_type
            if content_type == "application/apply-patch+yaml" and reg.store.get(rt, ns, t.name or "") is None:
                return self._answer(request, rt, reg.create(rt, t.namespace, body, dry_run), 201)  # apply creates
            return self._answer(
                request, rt, reg.patch(rt, ns, t.name or "", body, content_type, t.subresource, dry_run)
            )
        options = _delete_options(body, query)
        if verb == "delete":
            return self._answer(request, rt, reg.delete(rt, ns, t.name or "", options, dry_run))
        predicate = both(
            parse_label_selector(query.get("labelSelector")),
            parse_field_selector(query.get("fieldSelector"), rt.fields, _resource_name(rt)),
        )
        return respond(reg.delete_collection(rt, t.namespace, predicate, options, dry_run))

    def _answer(self, request: web.Request, rt: ResourceType, obj: Obj, status: int = 200) -> web.Response:
        if rt.custom and obj.get("apiVersion") != rt.api_version:
            obj = {**obj, "apiVersion": rt.api_version}
        if tables.wants_table(request.headers.get("Accept", "")):
            obj = tables.table(rt, [obj], self.registry.clock, request.query.get("includeObject", "Metadata"))
        return respond(obj, status)

    async def _list_or_watch(self, request: web.Request, t: Target, watching: bool) -> web.StreamResponse:
        query, rt, reg = request.query, t.rt, self.registry
        predicate = both(
            parse_label_selector(query.get("labelSelector")),
            parse_field_selector(query.get("fieldSelector"), rt.fields, _resource_name(rt)),
        )
        if t.name is not None:  # GET /watch/<plural>/<name>: a watch of one object
            predicate = both(predicate, parse_field_selector(f"metadata.name={t.name}", rt.fields, rt.plural))
        as_table = tables.wants_table(request.headers.get("Accept", ""))
        include = query.get("includeObject", "Metadata")
        if not watching:
            filtered = bool(query.get("labelSelector") or query.get("fieldSelector"))
            body = reg.list(
                rt, t.namespace, predicate, _int(query.get("limit"), "limit"), query.get("continue"), filtered
            )
            if as_table:
                body = tables.table(rt, body["items"], reg.clock, include, body["metadata"])
            return respond(body)
        render = None
        if as_table:

            def render(kind: str, obj: Obj) -> bytes:
                return encode(kind, tables.table(rt, [obj], reg.clock, include))

        watcher = Watcher(rt, t.namespace, predicate, render)
        version = query.get("resourceVersion", "")
        initial = _flag(query.get("sendInitialEvents"))
        bookmarks = _flag(query.get("allowWatchBookmarks"))
        if initial and not bookmarks:
            why = "Required value: allowWatchBookmarks required when sendInitialEvents is true"
            raise errors.invalid("ListOptions", "", [("allowWatchBookmarks", why)])
        if initial or version in ("", "0"):
            for obj in reg.store.items(rt, t.namespace):
                if predicate(obj):
                    watcher.send(
                        "ADDED",
                        obj
                        if not rt.custom or obj.get("apiVersion") == rt.api_version
                        else {**obj, "apiVersion": rt.api_version},
                    )
            if initial:
                watcher.bookmark(reg.store.version, initial_end=True)
            reg.store.watch(rt, watcher, None)
        else:
            try:
                reg.store.watch(rt, watcher, _int(version, "resourceVersion"))
            except ApiError as exc:
                if exc.code != 410:
                    raise
                return await _error_stream(request, exc)  # the watch cache answers "too old" as an event
        low, high = self.settings.watch_timeout
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else random.uniform(low, high)
        try:
            return await serve(
                request,
                watcher,
                timeout=timeout,
                bookmark_interval=self.settings.bookmark_interval if bookmarks else None,
                version=lambda: reg.store.version,
            )
        finally:
            reg.store.unwatch(rt, watcher)

    # ------------------------------------------------------------------ test hooks over HTTP
    async def _admin(self, request: web.Request, parts: list[str]) -> web.Response:
        store = self.registry.store
        if parts == ["faults"]:
            if request.method == "DELETE":
                self.faults.clear()
            elif request.method == "POST":
                spec = await _body(request)
                if not isinstance(spec, dict):
                    raise errors.bad_request("expected a JSON object")
                return respond(self.apply_faults(spec))
            return respond({"rules": [r.describe() for r in self.faults.rules], "injected": self.faults.injected})
        if parts == ["stats"]:
            return respond(
                {
                    "resourceVersion": str(store.version),
                    "watches": store.watcher_count(),
                    "requests": self.requests,
                    "injected": self.faults.injected,
                }
            )
        raise NOT_FOUND

    def apply_faults(self, spec: Obj) -> Obj:
        """The JSON fault API: {clear, fail: [rule...], latency, dropWatches, expireHistory}."""
        store = self.registry.store
        if spec.get("clear"):
            self.faults.clear()
        added = []
        try:
            for rule in spec.get("fail") or []:
                added.append(self.faults.add(FaultRule(**rule)).describe())
            if spec.get("latency"):
                added.append(self.faults.delay(float(spec["latency"])).describe())
        except (TypeError, ValueError) as exc:
            raise errors.bad_request(f"bad fault rule: {exc}") from None
        dropped = 0
        if spec.get("dropWatches"):
            dropped = store.drop_watches(spec.get("resource"), abrupt=spec.get("abrupt", True))
        if spec.get("expireHistory"):
            store.expire_history(spec.get("resource"))
            self.registry.forget_snapshots()
        return {"added": added, "droppedWatches": dropped, "resourceVersion": str(store.version)}


def _flag(value: str | None) -> bool:
    """A boolean query parameter, read as Go's strconv.ParseBool reads it (clients send "True" too)."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def _raise(exc: ApiError) -> Obj:
    raise exc


def _verb(method: str, named: bool, watching: bool) -> str:
    if method == "GET":
        return "watch" if watching else "get" if named else "list"
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete" if named else "deletecollection"}
    if method not in verbs:
        raise errors.method_not_allowed(f"the server does not allow this method on the requested resource: {method}")
    return verbs[method]


def _resource_name(rt: ResourceType) -> str:
    return f"{rt.api_version}, Resource={rt.plural}" if rt.group else f"/{rt.version}, Resource={rt.plural}"


def _int(value: str | None, name: str) -> int:
    if not value:
        return 0
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f"invalid {name}: {value!r}") from None


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return {}
    if request.content_type.endswith("yaml"):
        return yaml.safe_load(raw) or {}
    if "protobuf" in request.content_type:
        raise errors.unsupported_media_type("the dev cluster speaks JSON (and YAML for apply) only")
    return orjson.loads(raw)


def _delete_options(body: Any, query: Any) -> Obj:
    options = dict(body) if isinstance(body, dict) else {}
    if query.get("gracePeriodSeconds") is not None:
        options["gracePeriodSeconds"] = _int(query["gracePeriodSeconds"], "gracePeriodSeconds")
    return options


async def _error_stream(request: web.Request, exc: ApiError) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    await response.write(encode("ERROR", exc.status()))
    await response.write_eof()
    return response
