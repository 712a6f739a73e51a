"""The policy/v1 Eviction subresource and the PodDisruptionBudget arithmetic behind it.

An eviction is a delete that a PodDisruptionBudget may refuse with 429 TooManyRequests. As
upstream, pods that are Pending, finished or already terminating ignore budgets, and a pod
covered by more than one budget cannot be evicted (500). A budget's allowance is computed
from the pods it selects right now rather than from its status (which the real disruption
controller fills in): healthy = Running, Ready and not terminating; desired = minAvailable,
or selected minus maxUnavailable; allowed = healthy - desired. An eviction makes its pod
terminating at once, so it stops counting as healthy and the next eviction sees one fewer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from devcluster import errors
from devcluster.catalog import ResourceType
from devcluster.errors import ApiError
from devcluster.pods import is_terminal
from devcluster.registry import Registry
from devcluster.selectors import label_selector_object

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Budget:
    expected: int
    healthy: int
    desired: int

    @property
    def allowed(self) -> int:
        return max(0, self.healthy - self.desired)

    def status(self, generation: int) -> Obj:
        return {
            "observedGeneration": generation,
            "expectedPods": self.expected,
            "currentHealthy": self.healthy,
            "desiredHealthy": self.desired,
            "disruptionsAllowed": self.allowed,
        }


def is_healthy(pod: Obj) -> bool:
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return status.get("phase") == "Running" and ready and not pod["metadata"].get("deletionTimestamp")


def _scaled(value: Any, total: int) -> int:
    """An int-or-percent field; percentages round up, as upstream does for both fields."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def budget_for(reg: Registry, pdb: Obj) -> Budget:
    spec = pdb.get("spec") or {}
    selects = label_selector_object(spec.get("selector"))
    pods_rt = reg.catalog.require("", "v1", "pods")
    namespace = pdb["metadata"].get("namespace", "")
    pods = (
        [] if selects is None else [p for p in reg.store.items(pods_rt, namespace) if not is_terminal(p) and selects(p)]
    )
    expected = len(pods)
    healthy = sum(1 for p in pods if is_healthy(p))
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        desired = 1
    return Budget(expected, healthy, desired)


def budgets_covering(reg: Registry, pod: Obj) -> list[Obj]:
    pdbs = reg.catalog.require("policy", "v1", "poddisruptionbudgets")
    out = []
    for pdb in reg.store.items(pdbs, pod["metadata"].get("namespace", "")):
        selects = label_selector_object((pdb.get("spec") or {}).get("selector"))
        if selects is not None and selects(pod):
            out.append(pdb)
    return out


def evict(reg: Registry, pods: ResourceType, namespace: str, name: str, body: Any) -> None:
    """POST pods/<name>/eviction: 429 when a budget forbids it, else the pod is deleted gracefully."""
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be an Eviction object")
    if (body.get("metadata") or {}).get("name") not in (None, "", name):
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = body.get("deleteOptions") or {}
    pod = reg.get(pods, namespace, name)
    status = pod.get("status") or {}
    ignores_budgets = status.get("phase") in ("Pending", "Succeeded", "Failed") or pod["metadata"].get(
        "deletionTimestamp"
    )
    if not ignores_budgets:
        covering = budgets_covering(reg, pod)
        if len(covering) > 1:
            raise ApiError(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            )
        if covering:
            pdb = covering[0]
            budget = budget_for(reg, pdb)
            if budget.allowed <= 0:
                raise errors.too_many_requests(
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    [
                        {
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget {pdb['metadata']['name']} "
                            f"needs {budget.desired} healthy pods and has {budget.healthy} currently",
                        }
                    ],
                )
    reg.delete(pods, namespace, name, options)


def refresh_status(reg: Registry, namespace: str) -> int:
    """Rewrite the status of the namespace's budgets (the disruption controller's job); returns writes."""
    pdbs = reg.catalog.require("policy", "v1", "poddisruptionbudgets")
    writes = 0
    for pdb in list(reg.store.items(pdbs, namespace)):
        status = {**(pdb.get("status") or {}), **budget_for(reg, pdb).status(int(pdb["metadata"].get("generation", 1)))}
        if status != pdb.get("status"):
            reg.store.replace(pdbs, {**pdb, "status": status})
            writes += 1
    return writes
