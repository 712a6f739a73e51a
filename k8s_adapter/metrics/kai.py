"""KAI Scheduler's metric names, with KAI's meaning, units and labels (namespace ``kai``).

From KAI's scheduler (pkg/scheduler/metrics): the latency gauges in milliseconds that keep the
last cycle's value, the task scheduling latency histogram, the per-action counters, the
evicted-pods counter and the queue fair-share gauges. From KAI's queue controller: the queue
info, quota and allocation gauges. Queue gauges carry KAI's three labels: ``queue_name`` (the
display name when set, else the name), ``queue_metadata_name`` and ``queue_display_name``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from k8s_adapter.metrics.registry import ExactCounter
from kai_ray.model import Queue

if TYPE_CHECKING:
    from coordinator.coordinator import CycleResult

MILLISECOND_BUCKETS = tuple(5.0 * 2**i for i in range(10))  # 5 ms .. 2560 ms, as KAI
QUEUE_LABELS = ("queue_name", "queue_metadata_name", "queue_display_name")
UNLIMITED = -1.0


def _ms(seconds: float) -> float:
    return float(int(seconds * 1000))  # KAI sets whole milliseconds


class KaiMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.e2e = Gauge(
            "kai_e2e_scheduling_latency_milliseconds",
            "E2e scheduling latency in milliseconds (open session, actions, close session) of the last cycle.",
            registry=r,
        )
        self.open_session = Gauge(
            "kai_open_session_latency_milliseconds", "Open session latency in milliseconds, as a gauge.", registry=r
        )
        self.close_session = Gauge(
            "kai_close_session_latency_milliseconds", "Close session latency in milliseconds, as a gauge.", registry=r
        )
        self.action = Gauge(
            "kai_action_scheduling_latency_milliseconds",
            "Action scheduling latency in milliseconds, as a gauge.",
            ["action"],
            registry=r,
        )
        self.task_latency = Histogram(
            "kai_task_scheduling_latency_milliseconds",
            "Task scheduling latency in milliseconds: from the pod's creation to its bind.",
            buckets=MILLISECOND_BUCKETS,
            registry=r,
        )
        self.scheduled_by_action = ExactCounter(
            "kai_podgroups_scheduled_by_action", "Count of podgroups scheduled per action.", ["action"], registry=r
        )
        self.preemption_attempts = ExactCounter(
            "kai_total_preemption_attempts",
            "Total preemption attempts in the cluster till now (KAI counts the preempt action's successes).",
            registry=r,
        )
        self.evicted = Counter(
            "kai_pod_group_evicted_pods",
            "Total number of pods evicted per pod group.",
            ["podgroup", "namespace", "uid", "nodepool", "action"],
            registry=r,
        )
        queue_gauges = {
            "fair_share_gpu": ("kai_queue_fair_share_gpu", "GPU fair share of queue, in GPU devices."),
            "fair_share_cpu": ("kai_queue_fair_share_cpu_cores", "CPU fair share of queue, in cores."),
            "fair_share_memory": ("kai_queue_fair_share_memory_gb", "Memory fair share of queue, in GB."),
            "info": ("kai_queue_info", "Queues info (1 per queue)."),
            "deserved_gpus": ("kai_queue_deserved_gpus", "Queue deserved GPUs (its GPU quota)."),
            "quota_cpu": ("kai_queue_quota_cpu_cores", "Queue quota CPU, in cores (-1: unlimited)."),
            "quota_memory": ("kai_queue_quota_memory_bytes", "Queue quota memory, in bytes (-1: unlimited)."),
            "allocated_gpus": ("kai_queue_allocated_gpus", "Queue allocated GPUs."),
            "allocated_cpu": ("kai_queue_allocated_cpu_cores", "Queue allocated CPUs, in cores."),
            "allocated_memory": ("kai_queue_allocated_memory_bytes", "Queue allocated memory, in bytes."),
        }
        self.queues = {key: Gauge(name, text, QUEUE_LABELS, registry=r) for key, (name, text) in queue_gauges.items()}

    def observe_cycle(self, result: CycleResult, queues: Mapping[str, Queue]) -> None:
        stats = result.stats
        self.e2e.set(_ms(stats.seconds))
        self.open_session.set(_ms(stats.open_seconds))
        self.close_session.set(_ms(stats.close_seconds))
        for action, seconds in stats.action_seconds.items():
            self.action.labels(action).set(_ms(seconds))
        preemptors: dict[str, set[str]] = {}
        for eviction in result.evictions:
            if eviction.preemptor:
                preemptors.setdefault(eviction.action, set()).add(eviction.preemptor)
        for action, jobs in preemptors.items():
            self.scheduled_by_action.inc(action, amount=len(jobs))
        self.preemption_attempts.inc(amount=len(preemptors.get("preempt", ())))
        by_others = set().union(*preemptors.values()) if preemptors else set()
        allocated = {result.pod_jobs.get(b.pod, "") for b in result.binds} - by_others - {""}
        self.scheduled_by_action.inc("allocate", amount=len(allocated))
        self._observe_queues(result, queues)

    def _observe_queues(self, result: CycleResult, queues: Mapping[str, Queue]) -> None:
        for gauge in self.queues.values():
            gauge.clear()  # a deleted queue's series go with it
        for name, figures in result.decisions.queues.items():
            queue = queues.get(name)
            display = queue.display_name if queue is not None else ""
            labels = (display or name, name, display)
            share, allocated = figures["fairShare"], figures["allocated"]
            g = self.queues
            g["fair_share_gpu"].labels(*labels).set(share["gpu"])
            g["fair_share_cpu"].labels(*labels).set(share["cpu"] / 1000)
            g["fair_share_memory"].labels(*labels).set(share["memory"] / 1e9)
            g["info"].labels(*labels).set(1)
            g["allocated_gpus"].labels(*labels).set(round(allocated["gpu"], 4))
            g["allocated_cpu"].labels(*labels).set(round(allocated["cpu"] / 1000, 4))
            g["allocated_memory"].labels(*labels).set(allocated["memory"])
            if queue is not None:
                cpu, memory = queue.cpu.quota, queue.memory.quota
                g["deserved_gpus"].labels(*labels).set(queue.gpu.quota)
                g["quota_cpu"].labels(*labels).set(UNLIMITED if cpu == UNLIMITED else cpu / 1000)
                g["quota_memory"].labels(*labels).set(memory)  # bytes already; -1 stays -1

    def observe_binds(self, waited_seconds: list[float]) -> None:
        for seconds in waited_seconds:
            self.task_latency.observe(seconds * 1000)

    def observe_eviction(self, podgroup: str, namespace: str, uid: str, nodepool: str, action: str) -> None:
        self.evicted.labels(podgroup, namespace, uid, nodepool, action).inc()
