"""A fresh dev cluster per test, reached through the real kubernetes-asyncio client over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client, config

from devcluster import DevCluster
from kai_ray.app.sim.cluster import synthetic_nodes

# Test modules mark themselves ``asyncio(loop_scope="function")`` and the fixture below says the
# same: the cluster's server and the client must share one loop whatever the project defaults are.
ON_TEST_LOOP = pytest.mark.asyncio(loop_scope="function")


@dataclass
class Kube:
    cluster: DevCluster
    api: client.ApiClient
    kubeconfig: Path

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    @property
    def policy(self) -> client.PolicyV1Api:
        return client.PolicyV1Api(self.api)

    async def raw(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        """One request through the client's HTTP layer; returns (status, decoded body)."""
        response = await self.api.call_api(
            path,
            method,
            query_params=query or [],
            body=body,
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            _preload_content=False,
        )
        data = await response.json(content_type=None)
        return response.status, data


@pytest_asyncio.fixture(loop_scope="function")
async def kube(tmp_path: Path) -> AsyncIterator[Kube]:
    cluster = DevCluster(nodes=synthetic_nodes(4), start_delay=0.05, max_grace=0.2, bookmark_seconds=0.3)
    await cluster.start()
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    api = client.ApiClient(configuration)
    try:
        yield Kube(cluster, api, kubeconfig)
    finally:
        await api.close()
        await cluster.stop()


def pod(name: str, node: str | None = None, labels: dict[str, str] | None = None, **annotations: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "kai-scheduler",
        "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations},
        "spec": spec,
    }


def queue(name: str, gpu_quota: float = 4) -> dict[str, Any]:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "resources": {
                "gpu": {"quota": gpu_quota, "limit": -1, "overQuotaWeight": 1},
                "cpu": unlimited,
                "memory": unlimited,
            }
        },
    }


def pod_group(name: str, queue_name: str, min_member: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "queue": queue_name},
    }


async def eventually(check: Callable[[], Awaitable[bool] | bool], timeout: float = 5.0) -> None:
    """Wait until ``check`` holds; fail the test if it does not within ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        outcome = check()
        if isinstance(outcome, Awaitable):
            outcome = await outcome
        if outcome:
            return
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.02)
