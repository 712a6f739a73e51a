"""KAI Scheduler itself, deployed on a real cluster (realcluster/kai.py), schedules as KAI does.

A cluster of its own (etcd, kube-apiserver, kube-controller-manager, kwok) with two kwok nodes
of 8 GPUs, and KAI's scheduler, binder, podgrouper, podgroupcontroller and queuecontroller,
built from KAI's module, started as KAI's chart and operator configure them. No kai-ray code
schedules here: the assertions are about KAI's behaviour on our cluster, there to prove the
deployment works (the BindRequest flow, PodGroups made and given status, gangs, reclaim), and
one that records where KAI v0.12 differs from kai-ray (a queue without a parent).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from k8s_adapter.api import KubeApi, connect
from kai_ray.app.sim.cluster import synthetic_nodes
from realcluster.cluster import ClusterOptions, RealCluster
from realcluster.kai import NAMESPACE, SCHEDULER_NAME, KaiDeployment
from tests.adapter.conftest import pod, pod_group, queue
from tests.e2e.backends import GROUPS, PODS, QUEUES, until_true
from tests.e2e.conftest import alive

BIND_REQUESTS = "/apis/scheduling.run.ai/v1alpha2/namespaces/default/bindrequests"
NODES = 2  # kwok-node-0 and kwok-node-1, 8 GPUs each
PARENT = "research"
DEFAULT_QUEUES = {"default-parent-queue", "default-queue"}  # the chart's, installed with KAI
TIMEOUT = 60.0  # KAI schedules every second; generous for a loaded 2-core machine


@dataclass
class Kai:
    api: KubeApi
    cluster: RealCluster
    deployment: KaiDeployment

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        return (await self.api.request("POST", path, body=obj)).body

    async def get(self, path: str) -> dict[str, Any]:
        return (await self.api.request("GET", path)).body

    async def items(self, path: str) -> list[dict[str, Any]]:
        return list((await self.get(path)).get("items") or [])

    async def pods(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in await self.items(PODS)}

    async def bound(self, prefix: str = "") -> dict[str, str]:
        """Pod name -> node of the bound pods whose name starts with ``prefix``."""
        return {
            name: p["spec"]["nodeName"]
            for name, p in (await self.pods()).items()
            if name.startswith(prefix) and (p.get("spec") or {}).get("nodeName")
        }

    async def until(self, check: Any, what: str, timeout: float = TIMEOUT) -> float:
        """Poll ``check`` until true; fail with KAI's log tails if not in time. Returns the seconds it took."""
        started = time.monotonic()
        try:
            await until_true(check, timeout=timeout, every=0.25)
        except AssertionError:
            pytest.fail(f"{what}: not in {timeout:.0f}s\n{self.deployment.tails()}", pytrace=False)
        self.deployment.check()
        return time.monotonic() - started


def kai_queues(owed_quota: int, greedy_quota: int) -> list[dict[str, Any]]:
    parent = queue(PARENT, gpu_quota=owed_quota + greedy_quota)
    return [
        parent,
        queue("greedy", gpu_quota=greedy_quota, parent=PARENT),
        queue("owed", gpu_quota=owed_quota, parent=PARENT),
    ]


def train(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod in KAI's chart's ``train`` priority class (50: preemptible)."""
    obj["spec"]["priorityClassName"] = "train"
    return obj


async def _seed(cluster: RealCluster) -> None:
    api = await connect(str(cluster.kubeconfig("admin")))
    try:
        for node in synthetic_nodes(NODES):
            await api.request("POST", "/api/v1/nodes", body=node)

        async def ready() -> bool:
            accounts = await api.request("GET", "/api/v1/namespaces/default/serviceaccounts")
            return any(a["metadata"]["name"] == "default" for a in accounts.body.get("items") or [])

        await until_true(ready, timeout=60)
    finally:
        await api.close()


@pytest.fixture(scope="module")
def kai_cluster(binaries: Path, kai_binaries: Path) -> Iterator[tuple[RealCluster, KaiDeployment]]:
    """A cluster of its own with KAI running on it, for this module's tests."""
    cluster = RealCluster(
        ClusterOptions(controllers=True, kwok=True, node_lease_seconds=40),
        keep=bool(os.environ.get("KAI_RAY_E2E_KEEP")),
    )
    started = time.monotonic()
    cluster.start()
    kai = KaiDeployment(cluster)
    pids: list[int] = []
    try:
        with ThreadPoolExecutor(1) as pool:  # fixtures may be set up while an event loop runs
            pool.submit(asyncio.run, _seed(cluster)).result()
        kai.start()
        pids = [*cluster.pids().values(), *kai.pids().values()]
        print(f"\nKAI {kai.versions} up on a real cluster in {time.monotonic() - started:.1f}s; logs in {kai.dir}")
        yield cluster, kai
    finally:
        try:
            kai.stop()
        finally:
            cluster.stop()
        left = [pid for pid in pids if alive(pid)]
        assert not left, f"processes left behind: {left}"


@pytest.fixture
async def kai(kai_cluster: tuple[RealCluster, KaiDeployment]) -> AsyncIterator[Kai]:
    """KAI's cluster with no pods, PodGroups, BindRequests or queues but the chart's defaults."""
    cluster, deployment = kai_cluster
    deployment.check()
    api = await connect(str(cluster.kubeconfig("admin")))
    handle = Kai(api, cluster, deployment)
    try:
        delete_all = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        for path in (PODS, GROUPS, BIND_REQUESTS):
            await api.request("DELETE", path, body=delete_all)
        for found in await handle.items(QUEUES):
            if found["metadata"]["name"] not in DEFAULT_QUEUES:
                await api.request("DELETE", f"{QUEUES}/{found['metadata']['name']}")

        async def empty() -> bool:
            queues = {q["metadata"]["name"] for q in await handle.items(QUEUES)}
            return not await handle.items(PODS) and not await handle.items(GROUPS) and queues == DEFAULT_QUEUES

        await until_true(empty, timeout=60, every=0.25)
        yield handle
        deployment.check()
    finally:
        await api.close()


async def test_every_kai_component_runs_with_the_charts_objects(kai: Kai) -> None:
    assert kai.deployment.alive() == dict.fromkeys(
        ("podgrouper", "podgroupcontroller", "queuecontroller", "binder", "scheduler"), True
    )
    assert kai.deployment.versions["github.com/NVIDIA/KAI-scheduler"] == "v0.12.0"
    crds = {c["metadata"]["name"] for c in await kai.items("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")}
    assert {"queues.scheduling.run.ai", "podgroups.scheduling.run.ai", "bindrequests.scheduling.run.ai"} <= crds
    classes = {c["metadata"]["name"]: c["value"] for c in await kai.items("/apis/scheduling.k8s.io/v1/priorityclasses")}
    assert {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}.items() <= classes.items()
    namespaces = {n["metadata"]["name"] for n in await kai.items("/api/v1/namespaces")}
    assert {NAMESPACE, "kai-resource-reservation"} <= namespaces


async def test_a_plain_pod_in_a_queue_is_grouped_bound_through_a_bindrequest_and_accounted(kai: Kai) -> None:
    for obj in kai_queues(owed_quota=8, greedy_quota=8):
        await kai.create(QUEUES, obj)
    await kai.create(PODS, pod("plain", gpus=1, queue_name="owed"))

    took = await kai.until(lambda: _bound_count(kai, "plain", 1), "the plain pod bound")
    print(f"plain pod bound {took:.1f}s after its create")
    node = (await kai.bound("plain"))["plain"]
    created = await kai.pods()
    assert created["plain"]["spec"]["schedulerName"] == SCHEDULER_NAME
    # The podgrouper made its PodGroup (one member, the pod's queue) and annotated the pod.
    group_name = created["plain"]["metadata"]["annotations"]["pod-group-name"]
    group = await kai.get(f"{GROUPS}/{group_name}")
    assert group["spec"]["queue"] == "owed" and group["spec"]["minMember"] == 1
    # The scheduler asked for the bind with a BindRequest; the binder bound the pod and said so.
    [request] = [r for r in await kai.items(BIND_REQUESTS) if r["spec"]["podName"] == "plain"]
    assert request["spec"]["selectedNode"] == node

    async def succeeded() -> bool:
        found = [r for r in await kai.items(BIND_REQUESTS) if r["spec"]["podName"] == "plain"]
        return bool(found) and (found[0].get("status") or {}).get("phase") == "Succeeded"

    await kai.until(succeeded, "the BindRequest Succeeded")
    # kwok runs it; the podgroupcontroller and the queuecontroller account for its GPU.
    await kai.until(lambda: _phase(kai, "plain", "Running"), "the pod Running")

    async def accounted() -> bool:
        status = (await kai.get(f"{GROUPS}/{group_name}")).get("status") or {}
        allocated = (status.get("resourcesStatus") or {}).get("allocated") or {}
        queue_status = (await kai.get(f"{QUEUES}/owed")).get("status") or {}
        return _gpus(allocated) == 1 and _gpus(queue_status.get("allocated") or {}) == 1

    await kai.until(accounted, "the PodGroup's and the queue's allocated GPUs")


async def test_a_gang_binds_whole(kai: Kai) -> None:
    for obj in kai_queues(owed_quota=8, greedy_quota=8):
        await kai.create(QUEUES, obj)
    await kai.create(GROUPS, pod_group("gang", "owed", 3))
    for i in range(3):
        await kai.create(PODS, pod(f"gang-{i}", gpus=4, group="gang", queue_name="owed"))

    took = await kai.until(lambda: _bound_count(kai, "gang-", 3), "the gang of three bound")
    print(f"gang of 3 x 4 GPUs bound {took:.1f}s after its creates")
    placed = await kai.bound("gang-")
    assert sorted(placed) == ["gang-0", "gang-1", "gang-2"]
    assert max(list(placed.values()).count(node) for node in set(placed.values())) == 2  # 8 GPUs a node


async def test_a_gang_that_cannot_fit_stays_pending_whole_while_others_bind(kai: Kai) -> None:
    for obj in kai_queues(owed_quota=8, greedy_quota=8):
        await kai.create(QUEUES, obj)
    # Three pods of 8 GPUs on two nodes of 8: two would fit, the gang of three does not.
    await kai.create(GROUPS, pod_group("too-big", "owed", 3))
    for i in range(3):
        await kai.create(PODS, pod(f"too-big-{i}", gpus=8, group="too-big", queue_name="owed"))

    async def explained() -> bool:
        status = (await kai.get(f"{GROUPS}/too-big")).get("status") or {}
        return bool(status.get("schedulingConditions"))

    took = await kai.until(explained, "KAI's scheduling condition on the PodGroup that cannot fit")
    print(f"unfittable gang explained {took:.1f}s after its creates")
    # KAI keeps scheduling (a later pod binds), and the gang still has no pod bound.
    await kai.create(PODS, pod("later", gpus=1, queue_name="owed"))
    await kai.until(lambda: _bound_count(kai, "later", 1), "a later pod bound past the waiting gang")
    assert await kai.bound("too-big-") == {}
    assert not [r for r in await kai.items(BIND_REQUESTS) if r["spec"]["podName"].startswith("too-big-")]


async def test_a_queue_owed_its_quota_reclaims_from_one_over_its_own(kai: Kai) -> None:
    for obj in kai_queues(owed_quota=8, greedy_quota=8):
        await kai.create(QUEUES, obj)
    # greedy fills the cluster: 16 GPUs, twice its quota (it borrows owed's unused 8).
    for i in range(4):
        await kai.create(PODS, train(pod(f"greedy-{i}", gpus=4, queue_name="greedy")))
    took = await kai.until(lambda: _bound_count(kai, "greedy-", 4), "greedy's four pods bound")
    print(f"greedy filled the cluster in {took:.1f}s")
    await kai.until(lambda: _all_running(kai, "greedy-", 4), "greedy's pods Running")

    # owed asks for its quota: KAI evicts greedy's pods over greedy's quota to make room.
    for i in range(2):
        await kai.create(PODS, train(pod(f"owed-{i}", gpus=4, queue_name="owed")))
    took = await kai.until(lambda: _bound_count(kai, "owed-", 2), "owed's pods bound after a reclaim", timeout=120)
    print(f"owed's pods bound {took:.1f}s after their creates (greedy reclaimed)")
    left = await kai.bound("greedy-")
    assert len(left) == 2, left  # greedy keeps its quota, 8 GPUs
    gone = {f"greedy-{i}" for i in range(4)} - set(left)
    pods = await kai.pods()
    assert all(name not in pods or pods[name]["metadata"].get("deletionTimestamp") for name in gone)


async def test_a_pod_in_a_queue_without_a_parent_is_never_scheduled(kai: Kai) -> None:
    """KAI v0.12 schedules jobs of queues with a parent only (its job order skips a queue whose
    parent is not in the session): a pod of a top-level queue is reported Unschedulable with no
    reason given, however much room there is. kai-ray binds it; recorded here as KAI's
    behaviour, so that a new pin that changes it is noticed."""
    await kai.create(QUEUES, queue("alone", gpu_quota=16))
    await kai.create(PODS, pod("orphan", gpus=1, queue_name="alone"))

    async def reported() -> bool:
        conditions = ((await kai.pods())["orphan"].get("status") or {}).get("conditions") or []
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions)

    await kai.until(reported, "the pod of a top-level queue reported Unschedulable")
    await kai.create(QUEUES, queue("with-parent", gpu_quota=16, parent=PARENT))
    await kai.create(QUEUES, queue(PARENT, gpu_quota=16))
    await kai.create(PODS, pod("sibling", gpus=1, queue_name="with-parent"))
    await kai.until(lambda: _bound_count(kai, "sibling", 1), "a pod of a queue with a parent bound")
    assert await kai.bound("orphan") == {}
    [group] = [g for g in await kai.items(GROUPS) if g["spec"]["queue"] == "alone"]
    [condition] = (group.get("status") or {}).get("schedulingConditions") or []
    assert (condition["reason"], condition["message"]) == ("Unschedulable", "Unable to schedule podgroup")


async def _bound_count(kai: Kai, prefix: str, count: int) -> bool:
    return len(await kai.bound(prefix)) == count


async def _phase(kai: Kai, name: str, phase: str) -> bool:
    return ((await kai.pods()).get(name, {}).get("status") or {}).get("phase") == phase


async def _all_running(kai: Kai, prefix: str, count: int) -> bool:
    phases = [(p.get("status") or {}).get("phase") for n, p in (await kai.pods()).items() if n.startswith(prefix)]
    return phases.count("Running") == count


def _gpus(resources: dict[str, Any]) -> float:
    """GPUs in a KAI resource list (``nvidia.com/gpu``, or ``gpu`` as KAI's statuses may name it)."""
    for key in ("nvidia.com/gpu", "gpu"):
        if key in resources:
            return float(resources[key])
    return 0.0
