"""kai-ray's queue-admission gate against the dev cluster and the real control plane: what an
autoscaler reads from pods (PodScheduled=False with reason SchedulingGated while gated,
Unschedulable for a pod kai-ray tried and could not place), and gates that only go away."""

from __future__ import annotations

from typing import Any

import pytest

from k8s_adapter.api import KubeError
from tests.adapter.conftest import pod, pod_group, queue, running
from tests.e2e.backends import GROUPS, PODS, QUEUES, Backend, until_true

GATE = "kai.scheduler/queue-admission"


def gated(name: str, gpus: int, *gates: str) -> dict[str, Any]:
    manifest = pod(name, gpus, group=name)
    manifest["spec"]["schedulingGates"] = [{"name": gate} for gate in gates]
    return manifest


async def scheduled(cluster: Backend, name: str) -> tuple[str, str] | None:
    conditions = (await cluster.get(f"{PODS}/{name}")).get("status", {}).get("conditions") or []
    found = [(c["status"], c.get("reason", "")) for c in conditions if c["type"] == "PodScheduled"]
    return found[0] if found else None


async def test_gated_pods_are_scheduling_gated_and_tried_ones_unschedulable(cluster: Backend) -> None:
    await cluster.create(QUEUES, queue("q", gpu_limit=4))
    for name in ("fits", "held", "foreign", "plain"):
        await cluster.create(GROUPS, pod_group(name, "q", 1))
    await cluster.create(PODS, gated("fits", 4, GATE))
    await cluster.create(PODS, gated("held", 4, GATE))  # the queue's room goes to "fits"
    await cluster.create(PODS, gated("foreign", 1, "example.com/wait"))
    assert await scheduled(cluster, "held") == ("False", "SchedulingGated")  # the API server's doing
    loop = cluster.loop()
    async with running(loop):
        await until_true(lambda: _bound(cluster, "fits"), timeout=60)
        await cluster.create(PODS, pod("plain", 4, group="plain"))  # no gate, over the limit
        await until_true(lambda: _reason_is(cluster, "plain", "Unschedulable"), timeout=60)
    for name in ("held", "foreign"):
        assert await scheduled(cluster, name) == ("False", "SchedulingGated")
        assert not (await cluster.get(f"{PODS}/{name}"))["spec"].get("nodeName")
    assert [g["name"] for g in (await cluster.get(f"{PODS}/held"))["spec"]["schedulingGates"]] == [GATE]
    with pytest.raises(KubeError) as refused:  # gates are set at creation only
        body = {"spec": {"schedulingGates": [{"name": GATE}]}}
        await cluster.api.request("PATCH", f"{PODS}/plain", body=body, content_type="application/merge-patch+json")
    assert refused.value.status == 422


async def _bound(cluster: Backend, name: str) -> bool:
    return bool((await cluster.placements()).get(name))


async def _reason_is(cluster: Backend, name: str, reason: str) -> bool:
    return await scheduled(cluster, name) == ("False", reason)
