"""What a KAI operator reads with kubectl, against the dev cluster with the scheduler running:
`kubectl describe pod`, `kubectl describe pg` and `kubectl get queue -o yaml` for a pending gang,
a reclaimed victim and a scheduled job show KAI's conditions, events and status fields, and an
unchanged pending pod has one event, not one per cycle."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import DevCluster
from k8s_adapter.api import KubeApi, connect
from kai_ray.app.sim.cluster import synthetic_nodes
from tests.adapter.conftest import Env, pod, pod_group, queue, until

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
GROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"
GANG = "Resources were found for 4 pods while 5 are required for gang scheduling."


@pytest.fixture
async def slow_env(tmp_path: Path) -> AsyncIterator[Env]:
    """As ``env``, but an evicted pod stays Terminating for a few seconds, so it can be described."""
    from k8s_adapter.metrics import new_registry

    cluster = DevCluster(nodes=synthetic_nodes(4), start_delay=0.05, max_grace=4.0, bookmark_seconds=0.5)
    await cluster.start()
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    api: KubeApi = await connect(str(kubeconfig))
    yield Env(cluster, api, kubeconfig, new_registry())
    await api.close()
    await cluster.stop()


def kubectl(env: Env, *args: str) -> str:
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(env.kubeconfig), *args], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def events_of(env: Env, name: str) -> list[dict[str, Any]]:
    listed = json.loads(kubectl(env, "get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json"))
    items: list[dict[str, Any]] = listed["items"]
    return items


def weightless(name: str) -> dict[str, Any]:
    """A queue with no quota and no share of what is left over: it can never reclaim."""
    spec = queue(name, gpu_quota=0)
    for resource in spec["spec"]["resources"].values():
        resource["overQuotaWeight"] = 0
    return spec


async def _phase(env: Env, name: str, phase: str = "Running") -> bool:
    found = env.cluster.get("", "v1", "pods", name, "default")
    return found is not None and (found.get("status") or {}).get("phase") == phase


async def test_kubectl_shows_kais_conditions_events_and_status(slow_env: Env) -> None:
    env = slow_env
    await env.create(QUEUES, queue("spare", gpu_quota=0))
    await env.create(QUEUES, queue("owner", gpu_quota=16))
    await env.create(QUEUES, weightless("tight"))
    for i in range(4):  # 7 of each node's 8 GPUs, over quota (preemptible)
        await env.create(PODS, pod(f"spare-{i}", gpus=7, queue_name="spare"))
    await env.create(GROUPS, pod_group("gang", "tight", 5))
    for i in range(5):  # one GPU is left on each node: four of the five fit
        await env.create(PODS, pod(f"gang-{i}", gpus=1, group="gang"))
    loop = env.loop()
    task = asyncio.create_task(loop.run())
    try:
        await until(lambda: loop.state.binds == 4, 20)
        await until(lambda: "default/gang" in loop.status.last, timeout=20)
        await asyncio.sleep(3)  # many cycles with nothing new
        gang_pod = await asyncio.to_thread(kubectl, env, "describe", "pod", "gang-0")
        gang_group = await asyncio.to_thread(kubectl, env, "describe", "pg", "gang")
        gang_events = await asyncio.to_thread(events_of, env, "gang-0")
        gang_uid = _uid(env, "pods", "gang-0")
        scheduled = await asyncio.to_thread(kubectl, env, "describe", "pod", "spare-0")

        await env.api.request("DELETE", f"{GROUPS}/gang")  # make room for the reclaim
        for i in range(5):
            await env.api.request("DELETE", f"{PODS}/gang-{i}")
        await env.create(PODS, pod("mine", gpus=7, queue_name="owner"))  # reclaims one spare pod
        await until(lambda: loop.state.evictions == 1, timeout=20)
        victim = next(name for name in (f"spare-{i}" for i in range(4)) if _terminating(env, name))
        victim_pod = await asyncio.to_thread(kubectl, env, "describe", "pod", victim)
        victim_group = env.cluster.get("", "v1", "pods", victim, "default")["metadata"]["annotations"]["pod-group-name"]
        victim_pg = await asyncio.to_thread(kubectl, env, "describe", "pg", victim_group)
        await until(lambda: _phase(env, "mine"), timeout=30)
        await asyncio.sleep(2.5)  # the next resource status round
        queues = yaml.safe_load(await asyncio.to_thread(kubectl, env, "get", "queue", "-o", "yaml"))["items"]
    finally:
        loop.stop()
        await asyncio.wait_for(task, 10)

    # The pending gang's pod: PodScheduled=False and one Warning event, in KAI's words, found by
    # kubectl through the pod's UID; one event although about 60 cycles found the same thing.
    assert _row(gang_pod, "PodScheduled") == ["PodScheduled", "False"]
    [warning] = _events(gang_pod)
    assert warning[:2] == ["Warning", "Unschedulable"] and warning[3] == "kai-scheduler"  # type, reason, age, from
    assert GANG in " ".join(gang_pod.split())
    [event] = [e for e in gang_events if e["reason"] == "Unschedulable"]
    assert event["count"] == 1 and event["involvedObject"]["uid"] == gang_uid
    # The gang's PodGroup: KAI's UnschedulableOnNodePool condition, its reasons, and its Normal event.
    flat = " ".join(gang_group.split())
    for field in ("Type: UnschedulableOnNodePool", "Node Pool: default", "Reason: Unschedulable", "Transition ID: 1"):
        assert field in flat, field
    assert "Reason: PodSchedulingErrors" in flat and f"Message: PodSchedulingErrors: {GANG}" in flat
    assert [row[:2] for row in _events(gang_group)] == [["Normal", "Unschedulable"]]
    assert "Requested: nvidia.com/gpu: 5" in flat  # resourcesStatus, as KAI's podgroup controller writes it
    # The scheduled job: KAI's Scheduled event.
    assert [row[:2] for row in _events(scheduled)] == [["Normal", "Scheduled"]]
    assert "Successfully assigned pod default/spare-0 to node kwok-node-0 at node-pool default" in scheduled
    # The reclaimed victim: DisruptionTarget, and an Evict event on the pod and on its PodGroup.
    assert _row(victim_pod, "DisruptionTarget") == ["DisruptionTarget", "True"]
    assert [row[:2] for row in _events(victim_pod)] == [["Normal", "Scheduled"], ["Normal", "Evict"]]
    assert f"Pod default/{victim} was preempted by workload default/pg-mine-" in victim_pod
    assert [row[:2] for row in _events(victim_pg)] == [["Normal", "Evict"]]
    assert "Allocated: nvidia.com/gpu: 7" in " ".join(victim_pg.split())
    # The queues: KAI's status fields, summed from their PodGroups.
    status = {q["metadata"]["name"]: q["status"] for q in queues}
    assert status["owner"] == {
        "allocated": {"nvidia.com/gpu": "7"},
        "allocatedNonPreemptible": {},
        "requested": {"nvidia.com/gpu": "7"},
        "childQueues": [],
    }
    assert status["spare"]["allocated"] == {"nvidia.com/gpu": "21"}  # three of its four pods are left
    assert status["tight"]["requested"] == {}  # its gang is gone


def _row(described: str, first: str) -> list[str]:
    """A table row of `kubectl describe` output, split into words."""
    return next(line.split() for line in described.splitlines() if line.strip().startswith(first + " "))


def _events(described: str) -> list[list[str]]:
    """The rows of the Events table at the end of `kubectl describe` output."""
    lines = described.split("\nEvents:\n", 1)[1].splitlines()[2:]
    return [line.split() for line in lines if line.startswith("  ") and not line.startswith("   ")]


def _uid(env: Env, plural: str, name: str) -> str:
    found = env.cluster.get("", "v1", plural, name, "default")
    assert found is not None
    return str(found["metadata"]["uid"])


def _terminating(env: Env, name: str) -> bool:
    found = env.cluster.get("", "v1", "pods", name, "default")
    return found is not None and bool(found["metadata"].get("deletionTimestamp"))
