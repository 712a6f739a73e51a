"""Every metric a scheduler serves, fed once per cycle and after each batch of binds and evictions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from k8s_adapter.metrics.kai import KaiMetrics
from k8s_adapter.metrics.kube_scheduler import KubeSchedulerMetrics
from k8s_adapter.metrics.own import KaiRayMetrics
from kai_ray import labels as L
from kai_ray.model import Queue

if TYPE_CHECKING:
    from coordinator.coordinator import CycleResult


class SchedulerMetrics:
    """kube-scheduler's, KAI's and kai-ray's own series in one registry (docs/metrics.md lists them)."""

    def __init__(self, registry: CollectorRegistry, profile: str = L.DEFAULT_SCHEDULER_NAME) -> None:
        self.registry = registry
        self.kube = KubeSchedulerMetrics(registry, profile)
        self.kai = KaiMetrics(registry)
        self.own = KaiRayMetrics(registry)

    def observe_cycle(self, result: CycleResult, queues: Mapping[str, Queue] | None = None) -> None:
        """A cycle's decisions; ``queues`` (the cluster's Queue objects) add KAI's quota gauges and display names."""
        self.kube.observe_cycle(result)
        self.kai.observe_cycle(result, queues or {})
        self.own.observe_cycle(result)

    def observe_binds(self, ok: int, failed: int, waited_seconds: Sequence[float] = ()) -> None:
        """Binds sent: how many succeeded or failed, and how long each bound pod waited since its creation."""
        self.kube.observe_binds(ok, failed)
        self.kai.observe_binds(list(waited_seconds))
        self.own.binds.labels("ok").inc(ok)
        self.own.binds.labels("failed").inc(failed)

    def observe_ungates(self, ok: int, failed: int) -> None:
        """Removals of kai-ray's gate sent: how many went through and how many failed."""
        self.own.gate_removals.labels("ok").inc(ok)
        self.own.gate_removals.labels("failed").inc(failed)

    def observe_eviction(
        self, action: str, podgroup: str = "", namespace: str = "", uid: str = "", nodepool: str = "default"
    ) -> None:
        """One pod evicted (sent to the API server), by the action that chose it."""
        self.kai.observe_eviction(podgroup, namespace, uid, nodepool, action)
        self.own.evictions.labels(action).inc()
