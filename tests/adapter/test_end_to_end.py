"""The adapter against the dev cluster over real HTTP: gangs, quotas, reasons, faults."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from k8s_adapter.runner import SchedulerLoop
from tests.adapter.conftest import Env, pod, pod_group, queue, until

PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
GROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"


@contextlib.asynccontextmanager
async def running(loop: SchedulerLoop) -> AsyncIterator[SchedulerLoop]:
    task = asyncio.create_task(loop.run())
    try:
        yield loop
    finally:
        loop.stop()
        await asyncio.wait_for(task, 10)


async def nodes_of(env: Env) -> dict[str, str | None]:
    """Read straight from the store, so the test's own reads never meet injected faults."""
    items = env.cluster.objects("", "v1", "pods", "default")
    return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") for p in items}


async def test_gangs_bind_whole_and_quota_limits_hold(env: Env) -> None:
    await env.create(QUEUES, queue("research"))
    await env.create(QUEUES, queue("team", gpu_quota=8, gpu_limit=8, parent="research"))
    for group in ("first", "second"):  # two 8-GPU gangs; the queue's limit admits only one
        await env.create(GROUPS, pod_group(group, "team", 2))
        for i in range(2):
            await env.create(PODS, pod(f"{group}-{i}", gpus=4, group=group))
    loop = env.loop()
    async with running(loop):
        await until(lambda: len(loop.status.last) == 1)
        await asyncio.sleep(0.3)
    placed = await nodes_of(env)
    bound = {name.rsplit("-", 1)[0] for name, node in placed.items() if node}
    assert len(bound) == 1  # one gang, whole
    [waiting] = {"first", "second"} - bound
    assert placed[f"{waiting}-0"] is None and placed[f"{waiting}-1"] is None
    group = await env.get(f"{GROUPS}/{waiting}")
    [condition] = group["status"]["schedulingConditions"]
    assert condition["type"] == "UnschedulableOnNodePool"
    assert condition["reasons"][0]["reason"] == "OverLimit"


async def _all_bound(env: Env, names: list[str]) -> bool:
    placed = await nodes_of(env)
    return all(placed.get(n) for n in names)


async def test_a_pod_that_fits_nowhere_says_why_in_cluster_terms(env: Env) -> None:
    await env.create(QUEUES, queue("q"))
    await env.create(PODS, pod("huge", gpus=16, queue_name="q"))
    loop = env.loop()
    async with running(loop):
        await until(lambda: bool(loop.status.last))
    [reason] = loop.status.last.values()
    assert "no nodes with enough resources were found: 4 node(s) didn't have enough resources: GPUs." in reason
    assert reason.endswith("Max GPU resources available in a single node is topped at 8.")


async def test_faults_lose_no_pod_and_bind_none_twice(env: Env) -> None:
    await env.create(QUEUES, queue("q"))
    faults = env.cluster.faults
    faults.fail("create", "pods", 409, subresource="binding", times=1)
    faults.fail("create", "pods", 500, subresource="binding", times=3)
    faults.fail("list", "pods", 500, times=2)
    loop = env.loop()
    async with running(loop):
        for i in range(6):
            await env.create(PODS, pod(f"job-{i}", gpus=1, queue_name="q"))
            if i == 2:
                env.cluster.drop_watches(abrupt=False)
            if i == 4:
                env.cluster.expire_history()
                env.cluster.drop_watches(abrupt=False)
        await until(lambda: _all_bound(env, [f"job-{i}" for i in range(6)]), timeout=20)
        gone = sum(r.stats.gone for r in loop.reflectors)
    assert gone >= 1  # at least one watch had to list again after the history expired
    placed = await nodes_of(env)
    assert len(placed) == 6 and all(placed.values())
    assert env.cluster.faults.injected == 6  # every injected failure was met and survived


async def test_evictions_blocked_by_a_budget_are_retried_not_dropped(env: Env) -> None:
    await env.create(QUEUES, queue("q", gpu_quota=0))
    await env.create(
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "keep"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "keep"}}},
        },
    )
    victim = pod("victim", gpus=1, queue_name="q")
    victim["metadata"]["labels"]["app"] = "keep"
    victim["spec"]["nodeName"] = "kwok-node-0"  # only a running pod is protected: Pending ones are always evictable
    env.cluster.create("", "v1", "pods", {**victim, "metadata": {**victim["metadata"], "namespace": "default"}})
    await until(lambda: env.cluster.get("", "v1", "pods", "victim", "default")["status"]["phase"] == "Running")
    loop = env.loop()
    from k8s_adapter.evictor import EvictRequest

    report = await loop.evictor.evict_all([EvictRequest("default/victim", "reclaim", "default/other")])
    assert report.blocked == ["default/victim"] and "default/victim" in loop.evictor.waiting


async def test_kubectl_sees_what_the_scheduler_did(env: Env) -> None:
    import shutil
    import subprocess

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    await env.create(QUEUES, queue("q"))

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "--kubeconfig", str(env.kubeconfig), *args], capture_output=True, text=True, timeout=30
        )

    manifest = env.kubeconfig.parent / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: demo, labels: {kai.scheduler/queue: q}}\n"
        "spec:\n  schedulerName: kai-scheduler\n  containers: [{name: c, image: x, resources: "
        "{limits: {nvidia.com/gpu: '1'}}}]\n"
    )
    created = await asyncio.to_thread(kubectl, "create", "-f", str(manifest))
    assert created.returncode == 0, created.stderr
    async with running(env.loop()):
        await until(lambda: _all_bound(env, ["demo"]))
    shown = await asyncio.to_thread(kubectl, "get", "pods", "-o", "wide")  # the NODE column is a wide one
    assert "demo" in shown.stdout and "kwok-node" in shown.stdout
    assert (await asyncio.to_thread(kubectl, "delete", "pod", "demo")).returncode == 0
