"""The HTTP face of the dev cluster: Kubernetes API paths, verbs, watches and discovery."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from k8s_adapter.devcluster.catalog import Catalog, Resource
from k8s_adapter.devcluster.faults import REASONS, FailRule, Faults
from k8s_adapter.devcluster.patching import PatchError, apply_patch
from k8s_adapter.devcluster.pods import PodRules
from k8s_adapter.devcluster.selectors import SelectorError, field_matcher, label_matcher
from k8s_adapter.devcluster.store import ApiError, Obj, Store
from k8s_adapter.devcluster.tables import table, wants_table

log = logging.getLogger(__name__)
VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-kai-ray-dev", "platform": "linux/amd64"}


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


class ApiServer:
    def __init__(self, store: Store, catalog: Catalog, faults: Faults, bookmark_seconds: float = 5.0) -> None:
        self.store = store
        self.catalog = catalog
        self.faults = faults
        self.pods = PodRules(store, catalog)
        self.bookmark_seconds = bookmark_seconds
        self.app = web.Application(client_max_size=64 * 2**20)
        self.app.router.add_route("*", "/{tail:.*}", self.dispatch)

    # ------------------------------------------------------------------ routing
    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._dispatch(request)
        except ApiError as exc:
            return _json(exc.status(), exc.code)
        except (PatchError, SelectorError) as exc:
            return _json(ApiError(400, "BadRequest", str(exc)).status(), 400)
        except orjson.JSONDecodeError:
            return _json(ApiError(400, "BadRequest", "the body is not valid JSON").status(), 400)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/")
        if path == "/_devcluster/faults":
            return await self._faults(request)
        if path in ("/version", "/healthz", "/readyz", "/livez"):
            return _json(VERSION) if path == "/version" else web.Response(text="ok")
        if path.startswith("/openapi/v3"):
            return _json(self.openapi_v3(path.removeprefix("/openapi/v3").strip("/")))
        if path.startswith("/openapi"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if path == "/api":
            return _json({"kind": "APIVersions", "versions": ["v1"],
                          "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}]})
        if path == "/apis":
            return _json(self._group_list())
        parts = path.split("/")[1:]
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 2:
            if len(parts) == 2:
                return _json(self._group(parts[1]))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return _json(self._resource_list(group, version))
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        resource = self.catalog.find(group, version, rest[0])
        if resource is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        watch = request.query.get("watch") in ("1", "true") or (len(rest) > 1 and rest[0] == "watch")
        await self._maybe_fail(request.method, resource.plural, sub, watch)
        if request.method == "GET":
            if name is None:
                return await (self._watch(request, resource, namespace) if watch
                              else self._list(request, resource, namespace))
            return _json(self.store.get(resource, namespace or "", name))
        body = orjson.loads(await request.read() or b"{}")
        if request.method == "POST":
            if name is None:
                return self._create(resource, namespace, body)
            return await self._post_subresource(resource, namespace or "", name, sub, body)
        if name is None:
            raise ApiError(405, "MethodNotAllowed", "collection updates are not supported")
        if request.method == "PUT":
            return _json(self._update(resource, namespace or "", name, sub, body))
        if request.method == "PATCH":
            current = self.store.get(resource, namespace or "", name)
            patched = apply_patch(copy.deepcopy(current), body, request.content_type)
            return _json(self._update(resource, namespace or "", name, sub, patched, check_version=False))
        if request.method == "DELETE":
            return _json(self._delete(resource, namespace or "", name, body))
        raise ApiError(405, "MethodNotAllowed", f"{request.method} is not supported")

    async def _maybe_fail(self, method: str, plural: str, sub: str, watch: bool) -> None:
        if self.faults.latency:
            await asyncio.sleep(self.faults.latency)
        rule = self.faults.take(method, plural, sub, watch)
        if rule is not None:
            raise ApiError(rule.code, REASONS.get(rule.code, "InternalError"), f"injected failure ({rule.code})")

    # ------------------------------------------------------------------ discovery
    def openapi_v3(self, group_version_path: str) -> Obj:
        """Just enough OpenAPI v3 for kubectl to see that the server validates fields itself
        (``fieldValidation``), so ``kubectl create -f`` needs no schemas from us."""
        by_path: dict[str, list[Resource]] = {}
        for resource in self.catalog.resources.values():
            prefix = f"api/{resource.version}" if not resource.group else f"apis/{resource.group}/{resource.version}"
            by_path.setdefault(prefix, []).append(resource)
        if not group_version_path:
            return {"paths": {p: {"serverRelativeURL": f"/openapi/v3/{p}?hash=dev"} for p in by_path}}
        resources = by_path.get(group_version_path)
        if resources is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        parameter = {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        paths: Obj = {}
        for resource in resources:
            gvk = {"group": resource.group, "version": resource.version, "kind": resource.kind}
            operation = {"parameters": [parameter], "responses": {"200": {"description": "OK"}},
                         "x-kubernetes-group-version-kind": gvk}
            base = f"/{group_version_path}" + ("/namespaces/{namespace}" if resource.namespaced else "")
            paths[f"{base}/{resource.plural}"] = {"post": operation}
            paths[f"{base}/{resource.plural}/{{name}}"] = {"put": operation, "patch": operation}
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]},
                "paths": paths, "components": {"schemas": {}}}

    def _group_list(self) -> Obj:
        groups = []
        for group, versions in sorted(self.catalog.group_versions().items()):
            entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
            groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _group(self, group: str) -> Obj:
        versions = self.catalog.group_versions().get(group)
        if not versions:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries,
                "preferredVersion": entries[0]}

    def _resource_list(self, group: str, version: str) -> Obj:
        resources = self.catalog.in_group_version(group, version)
        if not resources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        entries = [entry for r in resources for entry in r.discovery()]
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": entries}

    # ------------------------------------------------------------------ verbs
    async def _list(self, request: web.Request, resource: Resource, namespace: str | None) -> web.Response:
        labels = label_matcher(request.query.get("labelSelector"))
        fields = field_matcher(request.query.get("fieldSelector"))
        items, version = self.store.list(resource, namespace)
        items = [o for o in items if labels(o) and fields(o)]
        start = int(request.query.get("continue") or 0)
        limit = int(request.query.get("limit") or 0)
        page = items[start:start + limit] if limit else items[start:]
        more = bool(limit) and start + limit < len(items)
        if wants_table(request.headers.get("Accept", "")):
            return _json(table(resource.kind, page, str(version)))
        meta: Obj = {"resourceVersion": str(version)}
        if more:
            meta["continue"] = str(start + limit)
            meta["remainingItemCount"] = len(items) - start - limit
        return _json({"apiVersion": resource.api_version, "kind": f"{resource.kind}List", "metadata": meta,
                      "items": page})

    async def _watch(self, request: web.Request, resource: Resource, namespace: str | None) -> web.StreamResponse:
        labels = label_matcher(request.query.get("labelSelector"))
        fields = field_matcher(request.query.get("fieldSelector"))
        timeout = float(request.query.get("timeoutSeconds") or 1800)
        bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
        as_table = wants_table(request.headers.get("Accept", ""))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            watcher = self.store.watch(resource, namespace, request.query.get("resourceVersion"),
                                       lambda o: labels(o) and fields(o), asyncio.get_running_loop())
        except ApiError as exc:
            if exc.code != 410:
                raise
            await response.prepare(request)
            await response.write(orjson.dumps({"type": "ERROR", "object": exc.status()}) + b"\n")
            return response
        await response.prepare(request)
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            while True:
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                try:
                    item = await asyncio.wait_for(watcher.queue.get(), min(left, self.bookmark_seconds))
                except TimeoutError:
                    if bookmarks:
                        marker = {"apiVersion": resource.api_version, "kind": resource.kind,
                                  "metadata": {"resourceVersion": str(self.store.version)}}
                        await response.write(orjson.dumps({"type": "BOOKMARK", "object": marker}) + b"\n")
                    continue
                if item is None:  # dropped by fault injection: end the stream abruptly
                    break
                kind, obj = item
                shown = table(resource.kind, [obj], obj["metadata"].get("resourceVersion", "")) if as_table else obj
                await response.write(orjson.dumps({"type": kind, "object": shown}) + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unwatch(watcher)
        return response

    def _create(self, resource: Resource, namespace: str | None, body: Obj) -> web.Response:
        meta = body.setdefault("metadata", {})
        if resource.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
            self._require_namespace(meta["namespace"])
        if resource.kind == "Pod":
            body = self.pods.defaults(body)
        created = self.store.create(resource, body)
        if resource.plural == "customresourcedefinitions":
            self.catalog.add_crd(created)
        return _json(created, 201)

    def _require_namespace(self, namespace: str) -> None:
        namespaces = self.catalog.find("", "v1", "namespaces")
        assert namespaces is not None
        try:
            self.store.get(namespaces, "", namespace)
        except ApiError:
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found') from None

    def _update(self, resource: Resource, namespace: str, name: str, sub: str, body: Obj,
                check_version: bool = True) -> Obj:
        current = self.store.get(resource, namespace, name)
        meta = body.setdefault("metadata", {})
        meta.setdefault("name", name)
        if resource.namespaced:
            meta["namespace"] = namespace
        expected = meta.get("resourceVersion") if check_version else None
        if "status" in resource.subresources:
            if sub == "status":  # only the status changes through /status
                body = {**current, "status": body.get("status", current.get("status"))}
                body["metadata"] = dict(current["metadata"])
            else:  # and the status never changes through the object itself
                body["status"] = current.get("status", body.get("status"))
        body["metadata"] = {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
        return self.store.replace(resource, body, expected)

    def _delete(self, resource: Resource, namespace: str, name: str, body: Obj) -> Obj:
        if resource.kind == "Pod":
            return self.pods.delete(namespace, name, body.get("gracePeriodSeconds"))
        return self.store.delete(resource, namespace, name)

    async def _post_subresource(self, resource: Resource, namespace: str, name: str, sub: str,
                                body: Obj) -> web.Response:
        if resource.kind == "Pod" and sub == "binding":
            self.pods.bind(namespace, name, body)
            return _json({"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201}, 201)
        if resource.kind == "Pod" and sub == "eviction":
            self.pods.evict(namespace, name, body)
            return _json({"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201}, 201)
        raise ApiError(405, "MethodNotAllowed", f"POST is not supported on {resource.plural}/{sub}")

    # ------------------------------------------------------------------ faults over HTTP
    async def _faults(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read() or b"{}")
        if body.get("clear"):
            self.faults.clear()
        for rule in body.get("fail") or []:
            self.faults.fail(FailRule(**rule))
        if "latency" in body:
            self.faults.latency = float(body["latency"])
        dropped = self.store.drop_watches() if body.get("dropWatches") else 0
        if body.get("expireHistory"):
            self.store.expire_history()
        return _json({"dropped": dropped, "injected": self.faults.injected})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
