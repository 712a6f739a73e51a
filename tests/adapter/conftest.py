"""A dev cluster per test, and a scheduler loop driven step by step against it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from devcluster import DevCluster
from k8s_adapter.api import KubeApi, connect
from k8s_adapter.cache import ClusterCache
from k8s_adapter.leader import Leadership
from k8s_adapter.metrics import new_registry
from k8s_adapter.runner import SchedulerLoop
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.app.sim.cluster import synthetic_nodes
from kai_ray.config import SchedulerConfig

UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}


@dataclass
class Env:
    cluster: DevCluster
    api: KubeApi
    kubeconfig: Path
    registry: CollectorRegistry

    def loop(self, **kwargs: Any) -> SchedulerLoop:
        config = SchedulerConfig.model_validate({"kValue": 0})
        registry = self.registry if not kwargs.pop("own_registry", False) else CollectorRegistry()
        return SchedulerLoop(
            self.api,
            ClusterCache(),
            lambda _: in_process_coordinator(config),
            registry,
            kwargs.pop("leadership", Leadership(enabled=False)),
            period=kwargs.pop("period", 0.05),
            **kwargs,
        )

    def node_of(self, pod: str, namespace: str = "default") -> str | None:
        """The node the API server has the pod bound to (None: unbound or gone)."""
        found = self.cluster.get("", "v1", "pods", pod, namespace)
        return None if found is None else (found.get("spec") or {}).get("nodeName")

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        return (await self.api.request("POST", path, body=obj)).body

    async def get(self, path: str) -> dict[str, Any]:
        return (await self.api.request("GET", path)).body


@contextlib.asynccontextmanager
async def dev_env(tmp_path: Path, nodes: int, workload_api: bool = False) -> AsyncIterator[Env]:
    """A started dev cluster of ``nodes`` synthetic GPU nodes and a client for it."""
    cluster = DevCluster(
        nodes=synthetic_nodes(nodes),
        start_delay=0.05,
        max_grace=0.2,
        bookmark_seconds=0.5,
        workload_api=workload_api,
    )
    await cluster.start()
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    api = await connect(str(kubeconfig))
    try:
        yield Env(cluster, api, kubeconfig, new_registry())
    finally:
        await api.close()
        await cluster.stop()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with dev_env(tmp_path, 4) as made:
        yield made


def budget(name: str, app: str, min_available: int = 1) -> dict[str, Any]:
    """A PodDisruptionBudget over the pods labelled ``app``."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
    }


def queue(name: str, gpu_quota: float = -1, gpu_limit: float = -1, parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resources": {
            "gpu": {"quota": gpu_quota, "limit": gpu_limit, "overQuotaWeight": 1},
            "cpu": UNLIMITED,
            "memory": UNLIMITED,
        }
    }
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def pod_group(name: str, queue_name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "queue": queue_name},
    }


def pod(
    name: str, gpus: int = 1, group: str | None = None, queue_name: str | None = None, **annotations: str
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "annotations": dict(annotations), "labels": {}}
    if group:
        meta["annotations"]["pod-group-name"] = group
    if queue_name:
        meta["labels"]["kai.scheduler/queue"] = queue_name
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {"requests": {"cpu": "1"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x", "resources": resources}]},
    }


async def until(check: Any, timeout: float = 10.0, every: float = 0.05) -> None:
    """Wait until ``check()`` (sync or async) is true, asking every ``every`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(every)


@contextlib.asynccontextmanager
async def running(loop: SchedulerLoop) -> AsyncIterator[SchedulerLoop]:
    task = asyncio.create_task(loop.run())
    try:
        yield loop
    finally:
        loop.stop()
        await asyncio.wait_for(task, 15)
