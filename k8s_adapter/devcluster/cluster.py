"""The dev cluster as one object: API server, node simulator, synthetic nodes, kubeconfig."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from k8s_adapter.devcluster.catalog import Catalog
from k8s_adapter.devcluster.faults import Faults
from k8s_adapter.devcluster.kubelet import Kubelet
from k8s_adapter.devcluster.nodes import synthetic_nodes
from k8s_adapter.devcluster.server import ApiServer
from k8s_adapter.devcluster.store import ApiError, Store

NAMESPACES = ("default", "kube-system", "kai-resource-reservation")


class DevCluster:
    def __init__(self, nodes: int = 0, taint_nodes: bool = False, speed: float = 1.0, start_delay: float = 0.2,
                 max_grace: float = 2.0, bookmark_seconds: float = 5.0, history: int = 5000) -> None:
        self.store = Store(history)
        self.catalog = Catalog()
        self.faults = Faults()
        self.server = ApiServer(self.store, self.catalog, self.faults, bookmark_seconds)
        self.kubelet = Kubelet(self.store, self.catalog, start_delay, max_grace, speed)
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._kubelet_task: asyncio.Task[None] | None = None
        self._seed(nodes, taint_nodes)

    def _seed(self, nodes: int, taint: bool) -> None:
        namespaces = self.catalog.find("", "v1", "namespaces")
        node_resource = self.catalog.find("", "v1", "nodes")
        assert namespaces is not None and node_resource is not None
        for name in NAMESPACES:
            self.store.create(namespaces, {"metadata": {"name": name}, "status": {"phase": "Active"}})
        for node in synthetic_nodes(nodes, taint):
            self.store.create(node_resource, node)

    def create(self, group: str, version: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Add an object directly (test set-up), as if created through the API."""
        resource = self.catalog.find(group, version, plural)
        if resource is None:
            raise ApiError(404, "NotFound", f"{plural} is not served")
        return self.store.create(resource, obj)

    async def start(self, port: int = 0, host: str = "127.0.0.1") -> str:
        self._runner = web.AppRunner(self.server.app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound = self._runner.addresses[0][1] if self._runner.addresses else port
        self.url = f"http://{host}:{bound}"
        self._kubelet_task = asyncio.create_task(self.kubelet.run())
        return self.url

    async def stop(self) -> None:
        self.store.drop_watches()
        if self._kubelet_task is not None:
            self._kubelet_task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()

    def write_kubeconfig(self, path: str | Path) -> Path:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "kai-ray-dev",
            "clusters": [{"name": "kai-ray-dev", "cluster": {"server": self.url}}],
            "users": [{"name": "developer", "user": {}}],
            "contexts": [{"name": "kai-ray-dev", "context": {"cluster": "kai-ray-dev", "user": "developer",
                                                             "namespace": "default"}}],
        }
        target = Path(path)
        target.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return target


class DevClusterThread:
    """A dev cluster on its own event loop thread, for synchronous callers (tests, the CLI)."""

    def __init__(self, cluster: DevCluster) -> None:
        self.cluster = cluster
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="devcluster", daemon=True)

    def start(self, port: int = 0) -> str:
        self._thread.start()
        return asyncio.run_coroutine_threadsafe(self.cluster.start(port), self.loop).result(timeout=30)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.cluster.stop(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
