"""The adapter end to end, the same tests against the dev cluster and the real control plane:
informers, binding, pod lifecycle, PodGroup status, eviction with a budget, watch resumption."""

from __future__ import annotations

import asyncio

import pytest

from k8s_adapter.evictor import EvictRequest
from tests.adapter.conftest import pod, pod_group, queue, running
from tests.e2e.backends import GROUPS, PDBS, PODS, QUEUES, Backend, until_true


async def all_bound(cluster: Backend, names: list[str]) -> bool:
    placed = await cluster.placements()
    return all(placed.get(n) for n in names)


async def test_informers_see_the_cluster_and_a_pod_that_fits_nowhere_says_why(cluster: Backend) -> None:
    await cluster.create(QUEUES, queue("q"))
    await cluster.create(PODS, pod("huge", gpus=16, queue_name="q"))
    loop = cluster.loop()
    async with running(loop):
        await until_true(lambda: bool(loop.status.last), timeout=30)
    [reason] = loop.status.last.values()
    assert "no nodes with enough resources were found: 4 node(s) didn't have enough resources: GPUs." in reason
    assert reason.endswith("Max GPU resources available in a single node is topped at 8.")
    assert len(loop.cache.nodes) == 4 and loop.state.synced


async def test_gangs_bind_whole_and_the_waiting_one_says_why_in_its_status(cluster: Backend) -> None:
    await cluster.create(QUEUES, queue("research"))
    await cluster.create(QUEUES, queue("team", gpu_quota=8, gpu_limit=8, parent="research"))
    for group in ("first", "second"):  # two 8-GPU gangs; the queue's limit admits only one
        await cluster.create(GROUPS, pod_group(group, "team", 2))
        for i in range(2):
            await cluster.create(PODS, pod(f"{group}-{i}", gpus=4, group=group))
    loop = cluster.loop()
    async with running(loop):
        await until_true(lambda: len(loop.status.last) == 1, timeout=30)
        [waiting] = [key.split("/")[-1] for key in loop.status.last]

        async def explained() -> bool:
            status = (await cluster.get(f"{GROUPS}/{waiting}")).get("status") or {}
            return bool(status.get("schedulingConditions"))

        await until_true(explained, timeout=30)
    placed = await cluster.placements()
    bound = {name.rsplit("-", 1)[0] for name, node in placed.items() if node}
    assert bound == {"first", "second"} - {waiting}  # one gang, whole
    assert placed[f"{waiting}-0"] is None and placed[f"{waiting}-1"] is None
    [condition] = (await cluster.get(f"{GROUPS}/{waiting}"))["status"]["schedulingConditions"]
    assert condition["type"] == "UnschedulableOnNodePool"
    assert condition["reasons"][0]["reason"] == "OverLimit"


async def test_bound_pods_run_finish_and_free_their_gpus_for_the_next(cluster: Backend) -> None:
    """The node side (kwok, or the dev cluster's kubelet) runs what was bound; finished pods free GPUs."""
    await cluster.create(QUEUES, queue("q"))
    first = [pod(f"short-{i}", gpus=8, queue_name="q", **{"kai-ray.dev/run-seconds": "2"}) for i in range(2)]
    first[1]["metadata"]["annotations"]["kai-ray.dev/exit-code"] = "3"
    for manifest in first:
        await cluster.create(PODS, manifest)
    for i in range(3):  # two 8-GPU nodes are busy with short-*; these need whole nodes too
        await cluster.create(PODS, pod(f"next-{i}", gpus=8, queue_name="q"))
    loop = cluster.loop()
    async with running(loop):
        await until_true(lambda: all_bound(cluster, ["short-0", "short-1", "next-0", "next-1", "next-2"]), timeout=60)
        await until_true(
            lambda: _phases_are(cluster, {"short-0": "Succeeded", "short-1": "Failed", "next-0": "Running"}), timeout=60
        )
    pods = {p["metadata"]["name"]: p for p in await cluster.items(PODS)}
    [state] = [s["state"] for s in pods["short-1"]["status"]["containerStatuses"]]
    assert state["terminated"]["exitCode"] == 3
    assert pods["next-0"]["status"]["phase"] == "Running"


async def _phases_are(cluster: Backend, wanted: dict[str, str]) -> bool:
    phases = await cluster.phases()
    return all(phases.get(name) == phase for name, phase in wanted.items())


async def test_an_eviction_a_budget_forbids_is_refused_with_429_and_retried(cluster: Backend) -> None:
    """minAvailable 1 over two running pods: the first eviction goes through, the second is a 429."""
    await cluster.create(
        PDBS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "keep"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "keep"}}},
        },
    )
    for name in ("a", "b"):
        manifest = pod(name, gpus=1)
        manifest["metadata"]["labels"]["app"] = "keep"
        manifest["spec"]["nodeName"] = "kwok-node-0"  # bound at creation: a budget protects running pods only
        await cluster.create(PODS, manifest)
    await until_true(lambda: _phases_are(cluster, {"a": "Running", "b": "Running"}), timeout=60)

    async def allows_one() -> bool:  # the disruption controller (or the dev cluster) has counted both
        status = (await cluster.get(f"{PDBS}/keep")).get("status") or {}
        return status.get("currentHealthy") == 2 and status.get("disruptionsAllowed") == 1

    await until_true(allows_one, timeout=60)
    loop = cluster.loop()
    first = await loop.evictor.evict_all([EvictRequest("default/a", "reclaim", "default/other")])
    assert first.evicted == ["default/a"]
    second = await loop.evictor.evict_all([EvictRequest("default/b", "reclaim", "default/other")])
    assert second.blocked == ["default/b"] and "default/b" in loop.evictor.waiting
    marked = await cluster.get(f"{PODS}/b")
    conditions = {c["type"]: c for c in marked["status"].get("conditions") or []}
    assert conditions["DisruptionTarget"]["message"] == "kai-ray reclaim for default/other"


@pytest.mark.parametrize("cluster", ["dev", "real-etcd"], indirect=True)
async def test_watches_resume_after_410_gone_without_losing_a_pod(cluster: Backend) -> None:
    await cluster.create(QUEUES, queue("q"))
    loop = cluster.loop()
    for reflector in loop.reflectors:
        reflector.watch_seconds = 2  # watches end (cleanly) and resume often, from the version held
    async with running(loop):
        await cluster.create(PODS, pod("before", gpus=1, queue_name="q"))
        await until_true(lambda: all_bound(cluster, ["before"]), timeout=30)
        await cluster.expire_versions()
        for i in range(3):
            await cluster.create(PODS, pod(f"after-{i}", gpus=1, queue_name="q"))
        await until_true(lambda: all_bound(cluster, [f"after-{i}" for i in range(3)]), timeout=60)
        gone = {r.kind.plural: r.stats.gone for r in loop.reflectors}
    assert sum(gone.values()) >= 1, gone  # a reflector was told 410 and listed again
    assert loop.state.binds == 4


async def test_the_loop_survives_an_apiserver_restart(real: Backend) -> None:
    """Watches are cut mid-stream when kube-apiserver stops; the informers list again once it is back."""
    assert real.real is not None
    await real.create(QUEUES, queue("q"))
    loop = real.loop()
    async with running(loop):
        await real.create(PODS, pod("before", gpus=1, queue_name="q"))
        await until_true(lambda: all_bound(real, ["before"]), timeout=30)
        lists = sum(r.stats.lists for r in loop.reflectors)
        await asyncio.to_thread(real.real.restart_apiserver)
        for i in range(3):
            await real.create(PODS, pod(f"after-{i}", gpus=1, queue_name="q"))
        await until_true(lambda: all_bound(real, [f"after-{i}" for i in range(3)]), timeout=60)
    assert sum(r.stats.lists for r in loop.reflectors) > lists
    assert loop.state.binds == 4
