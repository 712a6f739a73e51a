"""Two half-GPU pods share one device, a third goes to another: checked through the API only.

The steps talk to the API server alone (``KubeApi``), so the same scenario runs against the
dev cluster with an in-process scheduler and against a real cluster where kai-ray runs from
the Helm chart (only the timeouts and the namespace differ). A pod is written the way KAI's
admission webhook leaves a fractional pod: annotation ``runai/shared-gpu-configmap`` and its
GPU container reading ``NVIDIA_VISIBLE_DEVICES`` and ``GPU_PORTION`` from the ConfigMaps the
binder writes; the container prints them, and the scenario reads them back from its log.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from k8s_adapter.api import JSON, KubeApi, KubeError

RESERVATIONS = "kai-resource-reservation"
INDEX = "run.ai/reserve_for_gpu_index"


@dataclass(frozen=True)
class Setting:
    namespace: str = "default"
    queue: str = "default-queue"
    run_seconds: int = 4  # how long each sharer runs before it succeeds
    timeout: float = 30.0


def fractional_pod(name: str, setting: Setting, fraction: str = "0.5") -> JSON:
    prefix = f"{name}-shared-gpu"
    from_map = {"configMapKeyRef": {"name": f"{prefix}-0", "key": ""}}
    env = [
        {"name": var, "valueFrom": {"configMapKeyRef": {**from_map["configMapKeyRef"], "key": var}}}
        for var in ("NVIDIA_VISIBLE_DEVICES", "GPU_PORTION")
    ]
    script = (
        f"echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES GPU_PORTION=$GPU_PORTION; sleep {setting.run_seconds}"
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": setting.namespace,
            "labels": {"kai.scheduler/queue": setting.queue},
            "annotations": {
                "gpu-fraction": fraction,
                "runai/shared-gpu-configmap": prefix,
                "kai-ray.dev/run-seconds": str(setting.run_seconds),  # the dev cluster's kubelet ends it
            },
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sh", "-c", script],
                    "env": env,
                    "envFrom": [{"configMapRef": {"name": f"{prefix}-0-evar"}}],
                }
            ],
        },
    }


async def until(check: Any, timeout: float) -> Any:
    """Wait until the awaited ``check()`` returns something true; return it."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


async def pod(api: KubeApi, namespace: str, name: str) -> JSON:
    return (await api.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")).body


async def reservation_pods(api: KubeApi) -> list[JSON]:
    reply = await api.request("GET", f"/api/v1/namespaces/{RESERVATIONS}/pods", {"labelSelector": "runai-gpu-group"})
    return [p for p in reply.body.get("items") or [] if not (p["metadata"].get("deletionTimestamp"))]


async def log(api: KubeApi, namespace: str, name: str) -> str:
    raw = await api._call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}/log", None, None, "text/plain", 30)
    try:
        return (await raw.read()).decode()
    finally:
        raw.release()


def group_of(found: JSON) -> str:
    return str((found["metadata"].get("labels") or {}).get("runai-gpu-group", ""))


async def run(api: KubeApi, setting: Setting) -> dict[str, Any]:
    """The scenario; returns what it observed (the caller asserts on it, and so does this)."""
    ns = setting.namespace
    collection = f"/api/v1/namespaces/{ns}/pods"
    for name in ("share-a", "share-b"):
        await api.request("POST", collection, body=fractional_pod(name, setting))

    async def both_running() -> list[JSON] | None:
        pods = [await pod(api, ns, n) for n in ("share-a", "share-b")]
        return pods if all((p.get("status") or {}).get("phase") == "Running" for p in pods) else None

    first, second = await until(both_running, setting.timeout)
    group = group_of(first)
    assert group and group_of(second) == group, "both halves carry the same GPU group"
    assert first["spec"]["nodeName"] == second["spec"]["nodeName"]
    node = first["spec"]["nodeName"]
    [holder] = [p for p in await reservation_pods(api) if group_of(p) == group]
    assert holder["spec"]["nodeName"] == node
    assert holder["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    index = holder["metadata"]["annotations"][INDEX]
    for found in (first, second):
        assert found["metadata"]["annotations"].get("received-resource-type") == "Fraction"
        text = await until(lambda name=found["metadata"]["name"]: log(api, ns, name), setting.timeout)
        assert f"NVIDIA_VISIBLE_DEVICES={index} GPU_PORTION=0.50" in text, text

    await api.request("POST", collection, body=fractional_pod("share-c", setting))

    async def third_running() -> JSON | None:
        found = await pod(api, ns, "share-c")
        return found if (found.get("status") or {}).get("phase") == "Running" else None

    third = await until(third_running, setting.timeout)
    other = group_of(third)
    assert other and other != group, "the full GPU takes no third half"
    [other_holder] = [p for p in await reservation_pods(api) if group_of(p) == other]
    other_index = other_holder["metadata"]["annotations"][INDEX]
    assert (third["spec"]["nodeName"], other_index) != (node, index), "another physical device"

    async def first_group_released() -> bool:
        return not any(group_of(p) == group for p in await reservation_pods(api))

    await until(first_group_released, setting.timeout + 2 * setting.run_seconds)
    done = [(await pod(api, ns, n))["status"]["phase"] for n in ("share-a", "share-b")]
    assert done == ["Succeeded", "Succeeded"]
    return {"node": node, "group": group, "index": index, "third": (third["spec"]["nodeName"], other_index)}


async def clean(api: KubeApi, setting: Setting) -> None:
    for name in ("share-a", "share-b", "share-c"):
        with contextlib.suppress(KubeError):
            await api.request("DELETE", f"/api/v1/namespaces/{setting.namespace}/pods/{name}")
