"""Prometheus metrics, observed once per scheduling cycle (served on ``/metrics`` by ``runner.py``;
the simulator's report embeds them too).

Three families, documented in ``docs/metrics.md``:

- kube-scheduler's names where the meaning matches (``scheduler_schedule_attempts_total``,
  ``scheduler_scheduling_attempt_duration_seconds``, ``scheduler_pending_pods``), so existing
  dashboards and alerts keep working;
- KAI's queue gauges by their KAI names (``kai_queue_fair_share_gpu`` ...), including KAI's
  own units for those (GB for fair-share memory) so KAI dashboards work unchanged;
- kai-ray's own, in base units (seconds, bytes), counters ending in ``_total``.

The registry is passed in, never global at import, so tests and several schedulers in one
process do not collide.
"""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from coordinator.coordinator import CycleResult

SECONDS_BUCKETS = tuple(0.001 * 2**i for i in range(15))  # 1 ms .. 16 s, as kube-scheduler


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.attempts = Counter(
            "scheduler_schedule_attempts",
            "Pods the scheduler tried to place, by result (scheduled, unschedulable, error).",
            ["result", "profile"],
            registry=registry,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling cycle time per attempt result.",
            ["result", "profile"],
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.pending = Gauge("scheduler_pending_pods", "Pending pods by leaf queue.", ["queue"], registry=registry)
        self.fair_share_gpu = Gauge(
            "kai_queue_fair_share_gpu", "KAI: queue fair share of GPUs.", ["queue_name"], registry=registry
        )
        self.fair_share_cpu = Gauge(
            "kai_queue_fair_share_cpu_cores", "KAI: queue fair share of CPU cores.", ["queue_name"], registry=registry
        )
        self.fair_share_memory = Gauge(
            "kai_queue_fair_share_memory_gb", "KAI: queue fair share of memory (GB).", ["queue_name"], registry=registry
        )
        self.allocated_gpu = Gauge(
            "kai_queue_allocated_gpus", "KAI: GPUs allocated to the queue.", ["queue_name"], registry=registry
        )
        self.allocated_cpu = Gauge(
            "kai_queue_allocated_cpu_cores", "KAI: CPU cores allocated to the queue.", ["queue_name"], registry=registry
        )
        self.allocated_memory = Gauge(
            "kai_queue_allocated_memory_bytes", "KAI: memory allocated to the queue.", ["queue_name"], registry=registry
        )
        self.queue_share = Gauge(
            "kai_ray_queue_fair_share",
            "Queue fair share in base units (gpu devices, cpu cores, memory bytes).",
            ["queue", "resource"],
            registry=registry,
        )
        self.queue_allocated = Gauge(
            "kai_ray_queue_allocated", "Queue allocation in base units.", ["queue", "resource"], registry=registry
        )
        self.cycle_duration = Histogram(
            "kai_ray_cycle_duration_seconds",
            "Wall time of one scheduling cycle.",
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.session_duration = Histogram(
            "kai_ray_session_duration_seconds", "Wall time of the actions.", buckets=SECONDS_BUCKETS, registry=registry
        )
        self.commit_duration = Histogram(
            "kai_ray_gang_commit_duration_seconds",
            "Prepare plus commit/abort of one cycle's gangs across shards.",
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.prepares = Counter(
            "kai_ray_reservation_prepares", "Gang reservations prepared on the shards.", registry=registry
        )
        self.aborts = Counter(
            "kai_ray_reservation_aborts", "Gang reservations aborted (a shard refused).", registry=registry
        )
        self.shard_calls = Counter("kai_ray_shard_calls", "Calls from the coordinator to shards.", registry=registry)
        self.candidates = Gauge("kai_ray_candidate_nodes", "Nodes the last session considered.", registry=registry)
        self.evictions = Counter("kai_ray_evicted_pods", "Pods evicted, by action.", ["action"], registry=registry)
        self.binds = Counter("kai_ray_binds", "Bind requests by result (ok, failed).", ["result"], registry=registry)

    def observe_cycle(self, result: CycleResult, profile: str = "kai-scheduler") -> None:
        stats = result.stats
        statuses = Tally(d.status for d in result.decisions.pods.values())
        scheduled = statuses.get("Binding", 0) + statuses.get("Pipelined", 0)
        unschedulable = statuses.get("Pending", 0)
        self.attempts.labels("scheduled", profile).inc(len(result.binds))
        self.attempts.labels("unschedulable", profile).inc(unschedulable)
        result_label = "scheduled" if scheduled else "unschedulable"
        self.attempt_duration.labels(result_label, profile).observe(stats.seconds)
        self.cycle_duration.observe(stats.seconds)
        self.session_duration.observe(stats.session_seconds)
        self.commit_duration.observe(stats.commit_seconds)
        self.prepares.inc(stats.prepared_jobs)
        self.aborts.inc(stats.aborted_jobs)
        self.shard_calls.inc(stats.shard_calls)
        self.candidates.set(stats.candidate_nodes)
        for eviction in result.evictions:
            self.evictions.labels(eviction.action).inc()
        pending_by_queue: Tally[str] = Tally()
        for key, decision in result.decisions.pods.items():
            if decision.status == "Pending":
                pending_by_queue[result.pod_queues.get(key, "")] += 1
        self.pending.clear()
        for queue, count in pending_by_queue.items():
            self.pending.labels(queue).set(count)
        for name, figures in result.decisions.queues.items():
            share, allocated = figures["fairShare"], figures["allocated"]
            self.fair_share_gpu.labels(name).set(share["gpu"])
            self.fair_share_cpu.labels(name).set(share["cpu"] / 1000)
            self.fair_share_memory.labels(name).set(share["memory"] / 1e9)
            self.allocated_gpu.labels(name).set(allocated["gpu"])
            self.allocated_cpu.labels(name).set(allocated["cpu"] / 1000)
            self.allocated_memory.labels(name).set(allocated["memory"])
            for resource, scale in (("gpu", 1.0), ("cpu", 1e-3), ("memory", 1.0)):
                self.queue_share.labels(name, resource).set(share[resource] * scale)
                self.queue_allocated.labels(name, resource).set(allocated[resource] * scale)

    def observe_binds(self, ok: int, failed: int) -> None:
        self.binds.labels("ok").inc(ok)
        self.binds.labels("failed").inc(failed)
