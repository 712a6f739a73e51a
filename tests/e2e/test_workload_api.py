"""Gangs of the Kubernetes Workload API on a real kube-apiserver that serves it (1.37, the
GenericWorkload feature gate on, scheduling.k8s.io/v1beta1 enabled), and on the dev cluster made
to serve it: kai-ray binds a gang that fits whole, and binds nothing of a gang that cannot reach
its minCount. The real apiserver also says what the dev cluster must refuse alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from devcluster import DevCluster
from k8s_adapter.api import KubeError, connect
from kai_ray.app.sim.cluster import synthetic_nodes
from realcluster.cluster import ClusterOptions, RealCluster
from tests.adapter.conftest import running, until
from tests.conftest import WORKLOAD_API_PARAM
from tests.e2e.backends import NODE_COUNT, PODS, QUEUES, Backend
from tests.helm.chart import crds
from tests.manifests import workload
from tests.manifests import workload_gang as gang

DISCOVERY = "/apis/scheduling.k8s.io/v1beta1"
WORKLOADS = f"{DISCOVERY}/namespaces/default/workloads"
GANGS = f"{DISCOVERY}/namespaces/default/podgroups"
UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
# Without kube-controller-manager nobody lifts the taint the apiserver puts on new nodes.
NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def workload_api_cluster(workload_api_binaries: Path) -> Iterator[RealCluster]:
    """etcd, kwok and a 1.37 kube-apiserver serving the Workload API; no controllers (1.34's
    would be three releases behind the apiserver), so the test makes the default ServiceAccount."""
    cluster = RealCluster(ClusterOptions(kwok=True, node_lease_seconds=40, workload_api=True))
    cluster.start()
    try:
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, _seed(cluster)).result()
        yield cluster
    finally:
        cluster.stop()


async def _seed(cluster: RealCluster) -> None:
    api = await connect(str(cluster.kubeconfig("admin")))
    try:
        for crd in crds():
            await api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
        await api.request("POST", "/api/v1/namespaces/default/serviceaccounts", body={"metadata": {"name": "default"}})
        for node in synthetic_nodes(NODE_COUNT):
            await api.request("POST", "/api/v1/nodes", body=node)

        async def queues_served() -> bool:
            try:
                await api.request("GET", QUEUES)
            except KubeError:
                return False
            return True

        await until(queues_served, timeout=60)
    finally:
        await api.close()


@pytest.fixture(params=["dev", WORKLOAD_API_PARAM])
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """The dev cluster made to serve the Workload API, and the real one whose apiserver serves it."""
    if request.param == "dev":
        dev = DevCluster(
            nodes=synthetic_nodes(NODE_COUNT), start_delay=0.05, max_grace=0.2, bookmark_seconds=0.5, workload_api=True
        )
        await dev.start()
        kubeconfig = dev.write_kubeconfig(tmp_path / "kubeconfig")
        backend = Backend("dev", await connect(str(kubeconfig)), kubeconfig, dev=dev)
        try:
            yield backend
        finally:
            await backend.close()
            await dev.stop()
    else:
        real: RealCluster = request.getfixturevalue("workload_api_cluster")
        kubeconfig = real.kubeconfig("admin")
        backend = Backend("real", await connect(str(kubeconfig)), kubeconfig, real=real)
        try:
            yield backend
        finally:
            await backend.close()


def member(name: str, group: str, gpus: int) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "kai-scheduler",
            "schedulingGroup": {"podGroupName": group},
            "tolerations": [NOT_READY],
            "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
        },
    }


async def test_the_api_is_served_and_refuses_a_gang_without_a_minimum(cluster: Backend) -> None:
    resources = {r["name"] for r in (await cluster.get(DISCOVERY)).get("resources") or []}
    assert {"workloads", "podgroups"} <= resources
    broken = gang("broken", "none", 1)
    broken["spec"]["schedulingPolicy"] = {"gang": {"minCount": 0}}
    with pytest.raises(KubeError) as refused:
        await cluster.create(GANGS, broken)
    assert refused.value.status == 422


async def test_a_gang_is_bound_whole_and_one_short_of_its_min_count_gets_nothing(cluster: Backend) -> None:
    queue = {"resources": {"gpu": UNLIMITED, "cpu": UNLIMITED, "memory": UNLIMITED}}
    await cluster.create(
        QUEUES, {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "wl"}, "spec": queue}
    )
    # Four nodes of (8, 8, 8, 8) GPUs: three 4-GPU pods fit, five 8-GPU pods do not.
    for name, count, gpus in (("fits", 3, 4), ("big", 5, 8)):
        await cluster.create(WORKLOADS, workload(name, "wl", count))
        await cluster.create(GANGS, gang(f"{name}-0", name, count))
        for i in range(count):
            created = await cluster.create(PODS, member(f"{name}-{i}", f"{name}-0", gpus))
            assert created["spec"]["schedulingGroup"] == {"podGroupName": f"{name}-0"}  # the gate is on
    async with running(cluster.loop()):
        await until(lambda: _bound(cluster, [f"fits-{i}" for i in range(3)]), timeout=30)
        await asyncio.sleep(1.0)  # more cycles: the big gang must still have no pod bound
        placed = await cluster.placements()
    assert [placed[f"big-{i}"] for i in range(5)] == [None] * 5
    assert await cluster.items("/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups") == []


async def _bound(backend: Backend, names: list[str]) -> bool:
    placed = await backend.placements()
    return all(placed.get(n) for n in names)
