"""Gangs of the Kubernetes Workload API through the running scheduler on the dev cluster: a gang
that fits is bound whole, one that cannot reach its minCount gets no pod bound, and the pod
grouper makes no KAI PodGroup for their pods. On a dev cluster without the API (as 1.34, or 1.37
with the feature gate off) the field is dropped and the pods are scheduled as before."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.adapter.conftest import Env, dev_env, pod, queue, running, until
from tests.manifests import workload
from tests.manifests import workload_gang as gang

PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
KAI_GROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"
WORKLOADS = "/apis/scheduling.k8s.io/v1beta1/namespaces/default/workloads"
GANGS = "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups"


def member(name: str, group: str, gpus: int) -> dict[str, Any]:
    obj = pod(name, gpus=gpus)  # no queue label: the Workload's names it
    obj["spec"]["schedulingGroup"] = {"podGroupName": group}
    return obj


def placed(env: Env) -> dict[str, str | None]:
    items = env.cluster.objects("", "v1", "pods", "default")
    return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") for p in items}


async def test_a_gang_is_bound_whole_and_one_that_cannot_reach_its_min_count_gets_nothing(tmp_path: Path) -> None:
    async with dev_env(tmp_path, 4, workload_api=True) as env:  # 32 GPUs
        await env.create(QUEUES, queue("q"))
        for name, count, gpus in (("fits", 3, 4), ("big", 5, 8)):
            await env.create(WORKLOADS, workload(name, "q", count))
            await env.create(GANGS, gang(f"{name}-0", name, count))
            for i in range(count):
                await env.create(PODS, member(f"{name}-{i}", f"{name}-0", gpus))
        async with running(env.loop()):
            await until(lambda: all(placed(env)[f"fits-{i}"] for i in range(3)), timeout=20)
            await asyncio.sleep(0.5)  # a few more cycles: the big gang must still have nothing
            now = placed(env)
        assert [now[f"big-{i}"] for i in range(5)] == [None] * 5
        assert env.cluster.objects("scheduling.run.ai", "v2alpha2", "podgroups", "default") == []
        assert not any(
            "pod-group-name" in (p["metadata"].get("annotations") or {})
            for p in env.cluster.objects("", "v1", "pods", "default")
        )


async def test_without_the_api_the_field_is_dropped_and_pods_are_scheduled_as_before(tmp_path: Path) -> None:
    async with dev_env(tmp_path, 4) as env:
        await env.create(QUEUES, queue("q"))
        solo = member("solo", "never-served", 1)
        solo["metadata"]["labels"]["kai.scheduler/queue"] = "q"
        created = await env.create(PODS, solo)
        assert "schedulingGroup" not in created["spec"]
        async with running(env.loop()):
            await until(lambda: placed(env)["solo"] is not None, timeout=20)
