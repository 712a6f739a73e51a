"""kai-ray's own metrics, under ``kai_ray_``: base units (seconds, bytes, cores), counters end in ``_total``."""

from __future__ import annotations

from collections import Counter as Tally
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

if TYPE_CHECKING:
    from coordinator.coordinator import CycleResult

SECONDS_BUCKETS = tuple(0.001 * 2**i for i in range(15))  # 1 ms .. 16 s, as kube-scheduler


class KaiRayMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.cycle_duration = Histogram(
            "kai_ray_cycle_duration_seconds", "Wall time of one scheduling cycle.", buckets=SECONDS_BUCKETS, registry=r
        )
        self.session_duration = Histogram(
            "kai_ray_session_duration_seconds", "Wall time of a cycle's actions.", buckets=SECONDS_BUCKETS, registry=r
        )
        self.commit_duration = Histogram(
            "kai_ray_gang_commit_duration_seconds",
            "Prepare plus commit/abort of one cycle's gangs across shards.",
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.prepares = Counter("kai_ray_reservation_prepares", "Gang reservations prepared on the shards.", registry=r)
        self.aborts = Counter(
            "kai_ray_reservation_aborts", "Gang reservations aborted because a shard refused.", registry=r
        )
        self.shard_calls = Counter("kai_ray_shard_calls", "Calls from the coordinator to shards.", registry=r)
        self.candidates = Gauge("kai_ray_candidate_nodes", "Nodes the last session considered.", registry=r)
        self.pending = Gauge(
            "kai_ray_pending_pods", "Pods left pending by the last cycle, by leaf queue.", ["queue"], registry=r
        )
        self.skipped_searches = Gauge(
            "kai_ray_victim_searches_skipped",
            "Jobs whose victim search the last cycle skipped, by why (paused, similar).",
            ["why"],
            registry=r,
        )
        self.queue_share = Gauge(
            "kai_ray_queue_fair_share",
            "Queue fair share in base units (gpu devices, cpu cores, memory bytes).",
            ["queue", "resource"],
            registry=r,
        )
        self.queue_allocated = Gauge(
            "kai_ray_queue_allocated", "Queue allocation in base units.", ["queue", "resource"], registry=r
        )
        self.evictions = Counter("kai_ray_evicted_pods", "Pods evicted, by action.", ["action"], registry=r)
        self.binds = Counter("kai_ray_binds", "Bind requests by result (ok, failed).", ["result"], registry=r)
        self.gated = Gauge(
            "kai_ray_gated_pods",
            "Pods of this scheduler held by a scheduling gate after the last cycle, by KAI queue and gate "
            "state (held: the queue has no room; removing: kai-ray removes its gate; foreign: another gate).",
            ["queue", "state"],
            registry=r,
        )
        self.gate_removals = Counter(
            "kai_ray_gate_removals",
            "Removals of kai-ray's queue-admission gate sent to the API server, by result (ok, failed).",
            ["result"],
            registry=r,
        )
        for result in ("ok", "failed"):  # served at 0 before the first removal, so that rates start from it
            self.gate_removals.labels(result)

    def observe_cycle(self, result: CycleResult) -> None:
        stats = result.stats
        self.cycle_duration.observe(stats.seconds)
        self.session_duration.observe(stats.session_seconds)
        self.commit_duration.observe(stats.commit_seconds)
        self.prepares.inc(stats.prepared_jobs)
        self.aborts.inc(stats.aborted_jobs)
        self.shard_calls.inc(stats.shard_calls)
        self.candidates.set(stats.candidate_nodes)
        pending: Tally[str] = Tally()
        for pod in result.pod_jobs:
            decision = result.decisions.pods.get(pod)
            if decision is not None and decision.status == "Pending":
                pending[result.pod_queues.get(pod, "")] += 1
        self.pending.clear()
        for queue, count in pending.items():
            self.pending.labels(queue).set(count)
        paused = sum(1 for job in result.search_skipped if job in result.paused_jobs)
        self.skipped_searches.labels("paused").set(paused)
        self.skipped_searches.labels("similar").set(len(result.search_skipped) - paused)
        self.gated.clear()  # a queue whose gated pods are gone loses its series
        for (queue, state), count in result.gated_by_queue.items():
            self.gated.labels(queue, state).set(count)
        self.queue_share.clear()
        self.queue_allocated.clear()
        for name, figures in result.decisions.queues.items():
            for resource, scale in (("gpu", 1.0), ("cpu", 1e-3), ("memory", 1.0)):
                self.queue_share.labels(name, resource).set(figures["fairShare"][resource] * scale)
                self.queue_allocated.labels(name, resource).set(figures["allocated"][resource] * scale)
