"""DRA on the dev cluster: KAI's IMEX-channel example end to end, through the resource-claim
controller, the scheduler loop with ``--dra``, the binder's claim write and the kubelet."""

from __future__ import annotations

from typing import Any

import yaml

from tests.adapter.conftest import Env, queue, until
from tests.adapter.test_end_to_end import running
from tests.conftest import REPO

RESOURCE = "/apis/resource.k8s.io/v1"
PATHS = {
    "DeviceClass": f"{RESOURCE}/deviceclasses",
    "ResourceSlice": f"{RESOURCE}/resourceslices",
    "ResourceClaimTemplate": f"{RESOURCE}/namespaces/default/resourceclaimtemplates",
    "Pod": "/api/v1/namespaces/default/pods",
}
NODE = "kwok-node-2"


def example() -> list[dict[str, Any]]:
    """KAI's docs/dra/gpu-imex-pod.yaml with its cluster, moved onto a dev-cluster node."""
    items = yaml.safe_load((REPO / "examples" / "dra" / "gpu-imex-pod.yaml").read_text())["items"]
    out = []
    for item in items:
        if item["kind"] not in PATHS:
            continue
        if item["kind"] == "ResourceSlice":
            item["metadata"]["name"] = f"{NODE}-channels"
            item["spec"]["nodeName"] = NODE
            item["spec"]["pool"]["name"] = NODE
        if item["kind"] == "Pod":
            item["metadata"].setdefault("annotations", {})["kai-ray.dev/run-seconds"] = "1"
        out.append(item)
    order = ["DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "Pod"]
    return sorted(out, key=lambda i: order.index(i["kind"]))


def claims(env: Env) -> list[dict[str, Any]]:
    return env.cluster.objects("resource.k8s.io", "v1", "resourceclaims", "default")


async def test_kais_imex_example_gets_its_channel_allocated_before_the_bind_and_freed_after(env: Env) -> None:
    await env.create("/apis/scheduling.run.ai/v2/queues", queue("default-queue"))
    for item in example():
        await env.create(PATHS[item["kind"]], item)
    loop = env.loop(dra=True)
    async with running(loop):

        def phase() -> str:
            return str(env.cluster.get("", "v1", "pods", "gpu-imex-pod", "default")["status"].get("phase"))

        await until(lambda: phase() == "Running", timeout=15)
        pod = env.cluster.get("", "v1", "pods", "gpu-imex-pod", "default")
        assert pod["spec"]["nodeName"] == NODE
        [claim] = claims(env)
        assert claim["metadata"]["ownerReferences"][0]["name"] == "gpu-imex-pod"  # made from the template
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["pool"], result["device"], result["request"]) == (
            "compute-domain.nvidia.com",
            NODE,
            "channel-0",
            "channel",
        )
        assert [r["name"] for r in claim["status"]["reservedFor"]] == ["gpu-imex-pod"]
        await until(lambda: phase() == "Succeeded", timeout=10)
        await until(lambda: "allocation" not in (claims(env)[0].get("status") or {}), timeout=10)
