"""Per-kind API rules for the built-in kinds that differ from the generic ones, and their wiring."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devcluster.catalog import ResourceType
from devcluster.crds import CRD_KEY, CrdStrategy
from devcluster.errors import ApiError
from devcluster.pods import PodStrategy
from devcluster.registry import Causes, Registry, Strategy
from devcluster.validation import gang_pod_group_causes, pod_group_causes, queue_causes, workload_causes

Obj = dict[str, Any]
PROTECTED_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})


class NamespaceStrategy(Strategy):
    name_is_label = True

    def prepare_create(self, reg: Registry, rt: ResourceType, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        obj["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), "kubernetes.io/metadata.name": name}
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}

    def delete(self, reg: Registry, rt: ResourceType, obj: Obj, options: Obj) -> Obj | None:
        name = obj["metadata"]["name"]
        if name in PROTECTED_NAMESPACES:
            raise ApiError(403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be deleted')
        # Upstream the namespace turns Terminating while a controller empties it; here that is immediate.
        reg.store.purge_namespace(name)
        return None


class NodeStrategy(Strategy):
    keep_status_on_create = True  # nodes (and kwok) register with their status filled in


class PriorityClassStrategy(Strategy):
    def prepare_create(self, reg: Registry, rt: ResourceType, obj: Obj) -> None:
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def validate(self, reg: Registry, rt: ResourceType, obj: Obj, old: Obj | None) -> Causes:
        value = obj.get("value")
        if not isinstance(value, int) or isinstance(value, bool):
            return [("value", "Required value: an integer")]
        if old is not None and old.get("value") != value:
            return [("value", "Forbidden: may not be changed in an update.")]
        return []


class SchemaStrategy(Strategy):
    """A custom resource checked against (the part kai-ray reads of) its CRD's schema."""

    def __init__(self, causes: Callable[[Obj], Causes]) -> None:
        self.causes = causes

    def validate(self, reg: Registry, rt: ResourceType, obj: Obj, old: Obj | None) -> Causes:
        return self.causes(obj)


def install(reg: Registry) -> None:
    reg.strategies.update(
        {
            ("", "pods"): PodStrategy(),
            ("", "namespaces"): NamespaceStrategy(),
            ("", "nodes"): NodeStrategy(),
            ("scheduling.k8s.io", "priorityclasses"): PriorityClassStrategy(),
            CRD_KEY: CrdStrategy(),
            ("scheduling.run.ai", "podgroups"): SchemaStrategy(pod_group_causes),
            ("scheduling.run.ai", "queues"): SchemaStrategy(queue_causes),
            ("scheduling.k8s.io", "podgroups"): SchemaStrategy(gang_pod_group_causes),
            ("scheduling.k8s.io", "workloads"): SchemaStrategy(workload_causes),
        }
    )
