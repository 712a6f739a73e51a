"""What the API server itself does for pods: defaults, binding, graceful deletion, eviction."""

from __future__ import annotations

import copy
from typing import Any

from k8s_adapter.devcluster.catalog import Catalog, Resource
from k8s_adapter.devcluster.selectors import label_matcher
from k8s_adapter.devcluster.store import ApiError, Obj, Store, now_rfc3339

DEFAULT_GRACE = 30


class PodRules:
    def __init__(self, store: Store, catalog: Catalog) -> None:
        self.store = store
        self.catalog = catalog

    @property
    def resource(self) -> Resource:
        found = self.catalog.find("", "v1", "pods")
        assert found is not None
        return found

    def defaults(self, pod: Obj) -> Obj:
        spec = pod.setdefault("spec", {})
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", DEFAULT_GRACE)
        for container in spec.get("containers") or []:
            resources = container.setdefault("resources", {})
            limits = resources.get("limits") or {}
            requests = resources.setdefault("requests", {})
            for name, value in limits.items():
                requests.setdefault(name, value)  # requests default to limits, as the API server does
        status = pod.setdefault("status", {})
        status.setdefault("phase", "Pending")
        status.setdefault("qosClass", "BestEffort")
        return pod

    def bind(self, namespace: str, name: str, binding: Obj) -> Obj:
        pod = self.store.get(self.resource, namespace, name)
        want_uid = (binding.get("metadata") or {}).get("uid")
        if want_uid and want_uid != pod["metadata"]["uid"]:
            raise ApiError(409, "Conflict", f'Precondition failed: UID in precondition: {want_uid}, '
                                            f'UID in object meta: {pod["metadata"]["uid"]}')
        if pod["metadata"].get("deletionTimestamp"):
            raise ApiError(409, "Conflict", f'pod {name} is being deleted, cannot be assigned to a host')
        if (pod.get("spec") or {}).get("nodeName"):
            raise ApiError(409, "Conflict", f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"')
        target = (binding.get("target") or {}).get("name")
        if not target:
            raise ApiError(422, "Invalid", "target.name: Required value")
        bound = copy.deepcopy(pod)
        bound["spec"]["nodeName"] = target
        conditions = [c for c in bound["status"].get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": now_rfc3339()})
        bound["status"]["conditions"] = conditions
        return self.store.replace(self.resource, bound)

    def delete(self, namespace: str, name: str, grace: Any = None) -> Obj:
        """Bound pods terminate gracefully (the node simulator removes them); others go at once."""
        pod = self.store.get(self.resource, namespace, name)
        seconds = DEFAULT_GRACE if grace is None else int(grace)
        if not (pod.get("spec") or {}).get("nodeName") or seconds == 0 or pod["status"].get("phase") in (
                "Succeeded", "Failed"):
            return self.store.delete(self.resource, namespace, name)
        if pod["metadata"].get("deletionTimestamp"):
            return pod
        terminating = copy.deepcopy(pod)
        terminating["metadata"]["deletionTimestamp"] = now_rfc3339()
        terminating["metadata"]["deletionGracePeriodSeconds"] = seconds
        return self.store.replace(self.resource, terminating)

    def evict(self, namespace: str, name: str, eviction: Obj) -> Obj:
        pod = self.store.get(self.resource, namespace, name)
        for budget in self._budgets(namespace, pod):
            if self._allowed(budget, namespace) < 1:
                raise ApiError(429, "TooManyRequests",
                               "Cannot evict pod as it would violate the pod's disruption budget.")
        grace = (eviction.get("deleteOptions") or {}).get("gracePeriodSeconds")
        return self.delete(namespace, name, grace)

    def _budgets(self, namespace: str, pod: Obj) -> list[Obj]:
        pdbs = self.catalog.find("policy", "v1", "poddisruptionbudgets")
        assert pdbs is not None
        out = []
        for budget in self.store.list(pdbs, namespace)[0]:
            selector = ((budget.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            text = ",".join(f"{k}={v}" for k, v in selector.items())
            if text and label_matcher(text)(pod):
                out.append(budget)
        return out

    def _allowed(self, budget: Obj, namespace: str) -> int:
        selector = ((budget.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        matches = label_matcher(",".join(f"{k}={v}" for k, v in selector.items()))
        pods = [p for p in self.store.list(self.resource, namespace)[0] if matches(p)]
        healthy = sum(1 for p in pods if p["status"].get("phase") == "Running"
                      and not p["metadata"].get("deletionTimestamp"))
        spec = budget.get("spec") or {}
        if "minAvailable" in spec:
            return healthy - _count(spec["minAvailable"], len(pods))
        if "maxUnavailable" in spec:
            return _count(spec["maxUnavailable"], len(pods)) - (len(pods) - healthy)
        return 1


def _count(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return -(-int(value[:-1]) * total // 100)
    return int(value)
