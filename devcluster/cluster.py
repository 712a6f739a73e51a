"""The dev cluster as one object: store, API server, node simulator, seed objects, kubeconfig.

``DevCluster`` runs on the caller's event loop (``await start()`` / ``await stop()``);
``DevClusterThread`` runs one on a private loop in a background thread for synchronous
callers. Objects can also be read and written in-process (``create``, ``get``, ``objects``,
``patch``, ``delete``) with the API's semantics but no HTTP and no injected faults, which is
what test set-up and assertions want. In-process calls must run on the cluster's loop; from
another thread go through ``DevClusterThread.call``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from aiohttp import web

from devcluster import strategies
from devcluster.catalog import WORKLOAD_API, Catalog, ResourceType
from devcluster.clock import Clock
from devcluster.crds import KAI_CRDS, follow_crds
from devcluster.event_ttl import EVENT_TTL_SECONDS, EventExpiry
from devcluster.faults import Faults
from devcluster.kubelet import NodeSimulator
from devcluster.registry import Registry
from devcluster.server import ApiServer, Settings
from devcluster.store import Store

Obj = dict[str, Any]
T = TypeVar("T")
CLUSTER_NAME = "kai-ray-dev"
NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "kai-resource-reservation")
SYSTEM_PRIORITY_CLASSES = (("system-cluster-critical", 2000000000), ("system-node-critical", 2000001000))


class DevCluster:
    """An in-process Kubernetes API server with synthetic nodes and a simulated kubelet.

    Args:
        nodes: Node objects to create at start (the caller chooses them; ``kai-ray dev-cluster``
            passes the simulator's synthetic GPU pools).
        speed: simulated seconds per real second for the node simulator (ignored with ``clock``).
        start_delay: simulated seconds from binding to Running.
        max_grace: cap on the grace period before a terminating pod is removed.
        bookmark_seconds: interval of BOOKMARK events on watches that allow them.
        history: changes kept per kind for resuming watches; older versions get 410.
        simulate: run the node simulator (pods never start without it).
        workload_api: serve the Kubernetes Workload API (scheduling.k8s.io/v1beta1 Workload and
            PodGroup), as 1.37 does with its GenericWorkload feature gate on; without it a pod's
            spec.schedulingGroup is dropped, as a server without the gate drops it.
        event_ttl: seconds an Event lives after its last write (kube-apiserver's --event-ttl);
            None keeps Events for good.
    """

    def __init__(
        self,
        nodes: Sequence[Obj] = (),
        *,
        speed: float = 1.0,
        clock: Clock | None = None,
        start_delay: float = 0.5,
        max_grace: float = 2.0,
        bookmark_seconds: float = 60.0,
        history: int = 10_000,
        simulate: bool = True,
        workload_api: bool = False,
        event_ttl: float | None = EVENT_TTL_SECONDS,
    ) -> None:
        self.clock = clock or Clock(speed)
        self.catalog = Catalog.with_builtins()
        if workload_api:
            self.catalog.add(WORKLOAD_API)
        self.store = Store(history)
        follow_crds(self.store, self.catalog)
        self.registry = Registry(self.store, self.catalog, self.clock)
        strategies.install(self.registry)
        self.faults = Faults()
        self.server = ApiServer(self.registry, self.faults, Settings(bookmark_interval=bookmark_seconds))
        self.simulator = NodeSimulator(self.registry, self.clock, start_delay, max_grace) if simulate else None
        if self.simulator is not None:
            self.server.logs = self.simulator.log_of
        self.event_expiry = (
            None if event_ttl is None else EventExpiry(self.registry, self.catalog, self.clock, event_ttl)
        )
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._simulating: asyncio.Task[None] | None = None
        self._expiring: asyncio.Task[None] | None = None
        self._seed(nodes)

    def _seed(self, nodes: Sequence[Obj]) -> None:
        for name in NAMESPACES:
            self.create("", "v1", "namespaces", {"metadata": {"name": name}})
        for name, value in SYSTEM_PRIORITY_CLASSES:
            self.create("scheduling.k8s.io", "v1", "priorityclasses", {"metadata": {"name": name}, "value": value})
        for crd in KAI_CRDS:
            self.create("apiextensions.k8s.io", "v1", "customresourcedefinitions", crd)
        for node in nodes:
            self.create("", "v1", "nodes", node)

    # ------------------------------------------------------------------ lifecycle
    async def start(self, port: int = 0, host: str = "127.0.0.1") -> str:
        """Serve on ``host:port`` (0: a free port); returns the base URL."""
        self._runner = web.AppRunner(self.server.app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, reuse_address=True)
        await site.start()
        bound = self._runner.addresses[0][1]
        self.url = f"http://{host}:{bound}"
        if self.simulator is not None:
            self._simulating = asyncio.create_task(self.simulator.run(), name="devcluster-node-simulator")
        if self.event_expiry is not None:
            self._expiring = asyncio.create_task(self.event_expiry.run(), name="devcluster-event-expiry")
        return self.url

    async def stop(self) -> None:
        self.store.drop_watches(abrupt=False)  # end watch streams cleanly so clients see a normal close
        for task in (self._simulating, self._expiring):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._simulating = self._expiring = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> DevCluster:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        """A kubeconfig for kubectl and kubernetes-asyncio: one cluster, a user without credentials."""
        if not self.url:
            raise RuntimeError("start the dev cluster before writing its kubeconfig")
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "current-context": CLUSTER_NAME,
            "clusters": [{"name": CLUSTER_NAME, "cluster": {"server": self.url}}],
            "users": [{"name": CLUSTER_NAME, "user": {}}],
            "contexts": [
                {
                    "name": CLUSTER_NAME,
                    "context": {"cluster": CLUSTER_NAME, "user": CLUSTER_NAME, "namespace": namespace},
                }
            ],
        }
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return target

    # ------------------------------------------------------------------ in-process access
    def resource(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.catalog.find(group, version, plural)
        if rt is None:
            raise KeyError(f"{plural} in {group or 'core'}/{version} is not served")
        return rt

    def create(self, group: str, version: str, plural: str, obj: Obj, namespace: str | None = None) -> Obj:
        """Create as a client would (defaults, validation, 409 on a duplicate), without HTTP or faults."""
        return self.registry.create(self.resource(group, version, plural), namespace, obj)

    def get(self, group: str, version: str, plural: str, name: str, namespace: str = "") -> Obj | None:
        return self.store.get(self.resource(group, version, plural), namespace, name)

    def objects(self, group: str, version: str, plural: str, namespace: str | None = None) -> list[Obj]:
        return list(self.store.items(self.resource(group, version, plural), namespace))

    def patch(
        self, group: str, version: str, plural: str, name: str, patch: Obj, namespace: str = "", subresource: str = ""
    ) -> Obj:
        """A JSON merge patch, e.g. ``subresource="status"`` to set a pod's phase."""
        return self.registry.patch(
            self.resource(group, version, plural), namespace, name, patch, "application/merge-patch+json", subresource
        )

    def delete(
        self, group: str, version: str, plural: str, name: str, namespace: str = "", grace_seconds: int | None = None
    ) -> Obj:
        options = {} if grace_seconds is None else {"gracePeriodSeconds": grace_seconds}
        return self.registry.delete(self.resource(group, version, plural), namespace, name, options)

    @property
    def resource_version(self) -> int:
        return self.store.version

    # ------------------------------------------------------------------ faults
    def drop_watches(self, resource: str | None = None, abrupt: bool = True) -> int:
        """End open watches (of one plural, or all): abrupt cuts the connection mid-stream."""
        return self.store.drop_watches(resource, abrupt)

    def expire_history(self, resource: str | None = None) -> None:
        """Forget retained changes: watches from an older resourceVersion, and continue tokens, get 410."""
        self.store.expire_history(resource)
        self.registry.forget_snapshots()


class DevClusterThread:
    """A DevCluster on its own event loop in a daemon thread, for synchronous callers."""

    def __init__(self, cluster: DevCluster | None = None, **options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="devcluster", daemon=True)
        self._thread.start()
        # Built on its own loop: asyncio primitives created in the constructor belong to that loop.
        self.cluster = cluster if cluster is not None else self.call(lambda: DevCluster(**options))

    def start(self, port: int = 0, host: str = "127.0.0.1") -> str:
        return asyncio.run_coroutine_threadsafe(self.cluster.start(port, host), self.loop).result(timeout=30)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self.cluster.stop(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` on the cluster's loop and return its result (e.g. ``call(cluster.drop_watches)``)."""
        return asyncio.run_coroutine_threadsafe(_call(fn, args, kwargs), self.loop).result(timeout=30)

    @property
    def url(self) -> str:
        return self.cluster.url

    def write_kubeconfig(self, path: str | Path) -> Path:
        return self.cluster.write_kubeconfig(path)

    def __enter__(self) -> DevClusterThread:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


async def _call(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    return fn(*args, **kwargs)
