"""What a KAI scale run leaves on its cluster, written down so that KAI's and kai-ray's outcomes
of the same scenario can be compared later: each pod's queue, node and phase, the pods evicted,
pods and GPUs per node, each queue's GPUs (from its bound pods, and as its Queue status says) and
each PodGroup's scheduling conditions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Set
from typing import Any

from k8s_adapter.api import KubeApi
from loadtests.kai_scale_scenarios import NAMESPACE

Obj = dict[str, Any]
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
GROUPS = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NAMESPACE}/podgroups"
PATHS = {
    "Pod": PODS,
    "PodGroup": GROUPS,
    "Queue": "/apis/scheduling.run.ai/v2/queues",
    "Node": "/api/v1/nodes",
    "Topology": "/apis/kai.scheduler/v1alpha1/topologies",
}


async def settle_running(api: KubeApi, timeout: float = 30.0) -> None:
    """The pods bound and still there get a few seconds to turn Running before the state is read
    (not timed); the evicted ones are gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = (await api.request("GET", PODS)).body.get("items") or []
        if all(
            (p.get("status") or {}).get("phase") == "Running"
            for p in items
            if (p.get("spec") or {}).get("nodeName") and not p["metadata"].get("deletionTimestamp")
        ):
            return
        await asyncio.sleep(1.0)


async def final_state(api: KubeApi, created: Mapping[str, str], removed: Set[str]) -> Obj:
    """What the cluster holds: each pod's queue, node and phase, the pods gone (evicted: deleted
    by someone other than the driver), pods and GPUs per node, each queue's GPUs held by bound
    pods and what its Queue status says, each PodGroup's scheduling conditions."""
    pods = (await api.request("GET", PODS)).body.get("items") or []
    queues = (await api.request("GET", PATHS["Queue"])).body.get("items") or []
    groups = (await api.request("GET", GROUPS)).body.get("items") or []
    listed: dict[str, Obj] = {}
    per_node: dict[str, list[int]] = {}
    held: dict[str, float] = {}
    counts: dict[str, dict[str, int]] = {}
    for p in pods:
        meta, spec, status = p["metadata"], p.get("spec") or {}, p.get("status") or {}
        queue = (meta.get("labels") or {}).get("kai.scheduler/queue", "")
        gpus = int((spec["containers"][0].get("resources") or {}).get("limits", {}).get("nvidia.com/gpu", 0))
        node, evicting = spec.get("nodeName"), bool(meta.get("deletionTimestamp"))
        listed[meta["name"]] = {"queue": queue, "node": node, "phase": status.get("phase"), "evicting": evicting}
        kind = "evicted" if evicting else "bound" if node else "pending"
        counts.setdefault(queue, {"bound": 0, "pending": 0, "evicted": 0})[kind] += 1
        if node and not evicting:
            held[queue] = held.get(queue, 0.0) + gpus
            per_node.setdefault(node, [0, 0])
            per_node[node][0] += 1
            per_node[node][1] += gpus
    gone = sorted(n for n in created if n not in removed and n not in listed)
    for name in gone:
        queue = created[name]
        counts.setdefault(queue, {"bound": 0, "pending": 0, "evicted": 0})["evicted"] += 1
    return {
        "pods": listed,
        "evicted": gone + sorted(n for n, p in listed.items() if p["evicting"]),
        "counts": counts,
        "podsPerNode": {n: v[0] for n, v in sorted(per_node.items())},
        "gpusPerNode": {n: v[1] for n, v in sorted(per_node.items())},
        "queueGpus": held,
        "queueStatus": {q["metadata"]["name"]: (q.get("status") or {}).get("allocated") for q in queues},
        "podGroups": {
            g["metadata"]["name"]: [
                {"type": c.get("type"), "reason": c.get("reason")}
                for c in (g.get("status") or {}).get("schedulingConditions") or []
            ]
            for g in groups
        },
    }
