"""One face for the two clusters the adapter's end-to-end tests run against.

``dev``: the embedded dev cluster (devcluster/), in this process.
``real``: etcd + kube-apiserver + kube-controller-manager + kwok built from their Go modules
(realcluster/), shared by the session and emptied between tests.

Tests talk to both only through the API (the admin's KubeApi) and these few helpers, so the
same test body checks that the dev cluster behaves like the real one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from devcluster import DevCluster
from k8s_adapter.api import KubeApi, KubeError, connect
from k8s_adapter.cache import ClusterCache
from k8s_adapter.leader import Leadership
from k8s_adapter.runner import SchedulerLoop
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.app.sim.cluster import synthetic_nodes
from kai_ray.config import SchedulerConfig
from realcluster.cluster import RealCluster
from tests.adapter.conftest import until as until_true

PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
GROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
NODE_COUNT = 4
# Namespaced collections a test may leave objects in, emptied before the next test on the real cluster.
NAMESPACED = (PODS, GROUPS, PDBS, LEASES, "/api/v1/namespaces/default/events", "/api/v1/namespaces/default/configmaps")


@dataclass
class Backend:
    name: str
    api: KubeApi  # the admin's
    kubeconfig: Path
    dev: DevCluster | None = None
    real: RealCluster | None = None
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    # ------------------------------------------------------------------ the scheduler under test
    def loop(self, **kwargs: Any) -> SchedulerLoop:
        config = SchedulerConfig.model_validate({"kValue": 0})
        registry = self.registry if not kwargs.pop("own_registry", False) else CollectorRegistry()
        return SchedulerLoop(
            kwargs.pop("api", self.api),
            ClusterCache(),
            lambda _: in_process_coordinator(config),
            registry,
            kwargs.pop("leadership", Leadership(enabled=False)),
            period=0.05,
            **kwargs,
        )

    # ------------------------------------------------------------------ API helpers
    async def create(self, path: str, obj: dict[str, Any], **query: Any) -> dict[str, Any]:
        return (await self.api.request("POST", path, query=query or None, body=obj)).body

    async def get(self, path: str) -> dict[str, Any]:
        return (await self.api.request("GET", path)).body

    async def items(self, path: str) -> list[dict[str, Any]]:
        return list((await self.get(path)).get("items") or [])

    async def placements(self) -> dict[str, str | None]:
        """Pod name -> node (None while unbound) in the default namespace."""
        return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") for p in await self.items(PODS)}

    async def phases(self) -> dict[str, str]:
        return {p["metadata"]["name"]: (p.get("status") or {}).get("phase", "") for p in await self.items(PODS)}

    async def expire_versions(self) -> None:
        """Make every version a client holds now too old: resuming a watch from it gets 410 Gone.

        dev: the change history is dropped and the streams end (cleanly, so clients re-watch).
        real: writes move etcd's revision on, and the apiserver's compaction passes it; with the
        watch cache off (``real-etcd``) the next watch from an older version is refused by etcd.
        """
        if self.dev is not None:
            self.dev.expire_history()
            self.dev.drop_watches(abrupt=False)
        elif self.real is not None:
            interval = self.real.options.compaction_seconds
            for tick in range(3):
                body = {"metadata": {"generateName": "clock-"}, "data": {"tick": str(tick)}}
                await self.api.request("POST", "/api/v1/namespaces/default/configmaps", body=body)
                await asyncio.sleep(interval)
            await asyncio.sleep(interval)

    async def close(self) -> None:
        await self.api.close()


# ---------------------------------------------------------------------- the two clusters


async def dev_backend(tmp_path: Path) -> Backend:
    cluster = DevCluster(nodes=synthetic_nodes(NODE_COUNT), start_delay=0.05, max_grace=0.2, bookmark_seconds=0.5)
    await cluster.start()
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    return Backend("dev", await connect(str(kubeconfig)), kubeconfig, dev=cluster)


async def real_backend(cluster: RealCluster) -> Backend:
    kubeconfig = cluster.kubeconfig("admin")
    backend = Backend("real", await connect(str(kubeconfig)), kubeconfig, real=cluster)
    await empty(backend)
    return backend


async def seed_real(cluster: RealCluster, crds: list[dict[str, Any]]) -> None:
    """What the dev cluster starts with: KAI's CRDs (the chart's), four GPU nodes, namespaces."""
    api = await connect(str(cluster.kubeconfig("admin")))
    try:
        for crd in crds:
            await api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
        for namespace in ("kai-system", "kai-resource-reservation"):
            await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
        for node in synthetic_nodes(NODE_COUNT):
            await api.request("POST", "/api/v1/nodes", body=node)
        await until_true(lambda: _crds_established(api, crds), timeout=60)
        # The controller manager's service-account controller makes `default`; pods need it to be admitted.
        await until_true(lambda: _exists(api, "/api/v1/namespaces/default/serviceaccounts/default"), timeout=60)
    finally:
        await api.close()


async def _exists(api: KubeApi, path: str) -> bool:
    try:
        await api.request("GET", path)
    except KubeError as error:
        if error.status == 404:
            return False
        raise
    return True


async def _crds_established(api: KubeApi, crds: list[dict[str, Any]]) -> bool:
    for crd in crds:
        found = (
            await api.request(
                "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
            )
        ).body
        conditions = {c["type"]: c["status"] for c in (found.get("status") or {}).get("conditions") or []}
        if conditions.get("Established") != "True":
            return False
    return True


async def empty(backend: Backend) -> None:
    """Remove what earlier tests left: the default namespace's objects (pods at once) and queues."""
    api = backend.api
    for path in (*NAMESPACED, QUEUES):
        await api.request("DELETE", path, body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})

    async def gone() -> bool:
        return not await backend.items(PODS) and not await backend.items(QUEUES)

    await until_true(gone, timeout=60)
