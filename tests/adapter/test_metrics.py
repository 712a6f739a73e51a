"""Metrics after real cycles: kube-scheduler's names with kube-scheduler's meaning, KAI's with KAI's."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from prometheus_client import CollectorRegistry

from k8s_adapter.api import Response
from k8s_adapter.cache import ClusterCache
from k8s_adapter.kinds import PODS
from k8s_adapter.metrics import SchedulerMetrics, exposition, new_registry
from k8s_adapter.ungate_sender import UngateSender
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import ClusterSnapshot, Queue, QueueResource
from tests import manifests as m
from tests.adapter.fake_api import FakeApi, fail, ok
from tests.builders import JobSpec, build, config, node, queue

PROFILE = {"profile": "kai-scheduler"}


def cycles(snapshot, times=(1_000.0,), actions=None, **cfg):  # type: ignore[no-untyped-def]
    coordinator = in_process_coordinator(config(**cfg))
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    return [coordinator.cycle(t, actions) for t in times]


def test_pending_pods_are_counted_in_kube_schedulers_queue_types_not_kai_queues() -> None:
    snapshot = build(
        [node("a", gpu=4), node("b", gpu=4)],
        [queue("q", gpu_quota=8)],
        [
            JobSpec("leaving", "q", gpu=4, releasing_on=["a"]),
            JobSpec("waits-for-a", "q", gpu=4, created=1),  # pipelined onto a's releasing GPUs
            JobSpec("fits", "q", gpu=4, created=2),
            JobSpec("huge", "q", gpu=16, created=3),  # tried, unschedulable
            JobSpec("half-gang", "q", pods=2, gpu=1, min_member=3, created=4),  # gang incomplete: never tried
        ],
    )
    [result] = cycles(snapshot, actions=["allocate"])
    registry = CollectorRegistry()
    SchedulerMetrics(registry).observe_cycle(result)
    pending = {q: registry.get_sample_value("scheduler_pending_pods", {"queue": q}) for q in ("active", "backoff")}
    pending |= {
        q: registry.get_sample_value("scheduler_pending_pods", {"queue": q}) for q in ("unschedulable", "gated")
    }
    assert pending == {"active": 1, "backoff": 0, "unschedulable": 1, "gated": 2}
    assert registry.get_sample_value("scheduler_pending_pods", {"queue": "q"}) is None  # KAI queues: kai_ray_ name
    assert registry.get_sample_value("kai_ray_pending_pods", {"queue": "q"}) == 3


def test_a_pod_waiting_for_the_same_reason_is_one_attempt_not_one_per_cycle() -> None:
    snapshot = build([node("a", gpu=4)], [queue("q", gpu_quota=4)], [JobSpec("huge", "q", gpu=8)])
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    for result in cycles(snapshot, times=(1_000.0, 1_001.0, 1_002.0)):
        metrics.observe_cycle(result)
    attempts = lambda result: registry.get_sample_value(  # noqa: E731
        "scheduler_schedule_attempts_total", {"result": result, **PROFILE}
    )
    assert attempts("unschedulable") == 1
    metrics.observe_binds(ok=2, failed=1, waited_seconds=[0.004, 0.3])
    assert (attempts("scheduled"), attempts("error")) == (2, 1)
    assert registry.get_sample_value("kai_task_scheduling_latency_milliseconds_bucket", {"le": "5.0"}) == 1
    assert registry.get_sample_value("kai_task_scheduling_latency_milliseconds_count") == 2


def test_a_new_reason_is_a_new_attempt() -> None:
    first = build([node("a", gpu=4)], [queue("q", gpu_quota=4)], [JobSpec("huge", "q", gpu=8)])
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    coordinator = in_process_coordinator(config())
    coordinator.apply(ClusterDeltas.of_snapshot(first))
    metrics.observe_cycle(coordinator.cycle(1_000.0))
    coordinator.apply(ClusterDeltas(nodes_upserted=(node("b", gpu=6),)))  # bigger nodes, still too small
    metrics.observe_cycle(coordinator.cycle(1_001.0))
    value = registry.get_sample_value("scheduler_schedule_attempts_total", {"result": "unschedulable", **PROFILE})
    assert value == 2


def test_kai_queue_gauges_carry_kais_labels_units_and_quotas() -> None:
    snapshot = build([node("a", gpu=4)], [queue("q", gpu_quota=4)], [JobSpec("fits", "q", pods=2, gpu=1)])
    [result] = cycles(snapshot)
    registry = CollectorRegistry()
    quota = QueueResource(quota=4)
    spec = Queue("q", gpu=quota, cpu=QueueResource(quota=8000), memory=QueueResource(quota=-1), display_name="Team Q")
    SchedulerMetrics(registry).observe_cycle(result, {"q": spec})
    labels = {"queue_name": "Team Q", "queue_metadata_name": "q", "queue_display_name": "Team Q"}
    value = registry.get_sample_value
    assert value("kai_queue_allocated_gpus", labels) == 2
    assert value("kai_queue_fair_share_gpu", labels) == 2  # its quota, capped by what it asks for
    assert value("kai_queue_info", labels) == 1
    assert value("kai_queue_deserved_gpus", labels) == 4
    assert value("kai_queue_quota_cpu_cores", labels) == 8
    assert value("kai_queue_quota_memory_bytes", labels) == -1
    assert value("kai_e2e_scheduling_latency_milliseconds") is not None
    assert value("kai_action_scheduling_latency_milliseconds", {"action": "allocate"}) is not None


def test_kai_counters_keep_their_names_without_total_and_their_counter_type() -> None:
    snapshot = build([node("a", gpu=4)], [queue("q", gpu_quota=4)], [JobSpec("a", "q"), JobSpec("b", "q", created=1)])
    [result] = cycles(snapshot)
    registry = new_registry()
    SchedulerMetrics(registry).observe_cycle(result)
    text = exposition(registry).decode()
    assert "# TYPE kai_podgroups_scheduled_by_action counter\n" in text
    assert 'kai_podgroups_scheduled_by_action{action="allocate"} 2.0\n' in text
    assert "# TYPE kai_total_preemption_attempts counter\nkai_total_preemption_attempts 0.0\n" in text
    assert "kai_podgroups_scheduled_by_action_total" not in text


def test_preemption_and_reclaim_are_counted_as_kai_counts_them() -> None:
    snapshot = build(
        [node("a", gpu=2)],
        [queue("q", gpu_quota=2)],
        [
            JobSpec("low", "q", pods=2, gpu=1, running_on=["a", "a"], min_member=1),
            JobSpec("high", "q", gpu=2, priority=75, created=5),
        ],
    )
    [result] = cycles(snapshot, actions=["allocate", "preempt"])
    assert {e.action for e in result.evictions} == {"preempt"}
    registry = new_registry()
    metrics = SchedulerMetrics(registry)
    metrics.observe_cycle(result)
    for eviction in result.evictions:
        metrics.observe_eviction(eviction.action, "low", "default", "uid-low")
    text = exposition(registry).decode()
    assert "kai_total_preemption_attempts 1.0\n" in text  # one job preempted for, as KAI counts
    assert 'kai_podgroups_scheduled_by_action{action="preempt"} 1.0\n' in text
    labels = {"podgroup": "low", "namespace": "default", "uid": "uid-low", "nodepool": "default", "action": "preempt"}
    assert registry.get_sample_value("kai_pod_group_evicted_pods_total", labels) == len(result.evictions)
    assert registry.get_sample_value("kai_ray_evicted_pods_total", {"action": "preempt"}) == len(result.evictions)


def test_the_registry_serves_process_and_gc_metrics_and_no_created_series() -> None:
    registry = new_registry()
    SchedulerMetrics(registry)
    text = exposition(registry).decode()
    assert "process_resident_memory_bytes" in text and "python_gc_collections_total" in text
    assert "_created" not in text


def test_two_registries_do_not_share_state() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    SchedulerMetrics(first).observe_binds(ok=3, failed=1)
    SchedulerMetrics(second)
    assert first.get_sample_value("kai_ray_binds_total", {"result": "ok"}) == 3
    assert second.get_sample_value("kai_ray_binds_total", {"result": "ok"}) is None


def gated(snapshot: ClusterSnapshot, gates: dict[str, tuple[str, ...]], **changes: Any) -> ClusterSnapshot:
    """The snapshot with the pods of each job in ``gates`` created with those gates."""
    pods = tuple(
        replace(p, scheduling_gates=gates[p.pod_group], **changes) if p.pod_group in gates else p for p in snapshot.pods
    )
    return replace(snapshot, pods=pods)


def test_gated_pods_are_counted_by_queue_and_gate_state_and_as_kube_schedulers_gated() -> None:
    snapshot = build(
        [node("a", gpu=4)],
        [queue("q", gpu_quota=4, gpu_limit=4), queue("r", gpu_quota=4)],
        [
            JobSpec("admitted", "q", gpu=2),
            JobSpec("over", "q", pods=2, gpu=2, created=1),  # 2 + 4 GPUs would pass q's limit of 4
            JobSpec("waits-elsewhere", "r", pods=3, min_member=1),
        ],
    )
    gate, other = "kai.scheduler/queue-admission", "example.com/wait"
    snapshot = gated(snapshot, {"admitted": (gate,), "over": (gate,), "waits-elsewhere": (gate, other)})
    [result] = cycles(snapshot)
    registry = CollectorRegistry()
    SchedulerMetrics(registry).observe_cycle(result)
    value = registry.get_sample_value
    assert value("kai_ray_gated_pods", {"queue": "q", "state": "removing"}) == 1
    assert value("kai_ray_gated_pods", {"queue": "q", "state": "held"}) == 2
    assert value("kai_ray_gated_pods", {"queue": "r", "state": "foreign"}) == 3
    assert value("scheduler_pending_pods", {"queue": "gated"}) == 6  # kube-scheduler's meaning of gated
    assert value("kai_ray_pending_pods", {"queue": "q"}) is None  # never in a session: not left pending by it


def test_gated_pods_of_another_scheduler_are_not_counted() -> None:
    snapshot = build([node("a", gpu=4)], [queue("q", gpu_quota=4)], [JobSpec("theirs", "q")])
    snapshot = gated(snapshot, {"theirs": ("example.com/wait",)}, scheduler_name="default-scheduler")
    [result] = cycles(snapshot)
    registry = CollectorRegistry()
    SchedulerMetrics(registry).observe_cycle(result)
    assert registry.get_sample_value("kai_ray_gated_pods", {"queue": "q", "state": "foreign"}) is None
    assert registry.get_sample_value("scheduler_pending_pods", {"queue": "gated"}) == 0


def test_a_queue_whose_gated_pods_are_gone_loses_its_series() -> None:
    snapshot = build([node("a", gpu=4)], [queue("q", gpu_quota=4)], [JobSpec("waits", "q")])
    [result] = cycles(gated(snapshot, {"waits": ("example.com/wait",)}))
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    metrics.observe_cycle(result)
    assert registry.get_sample_value("kai_ray_gated_pods", {"queue": "q", "state": "foreign"}) == 1
    [result] = cycles(snapshot)
    metrics.observe_cycle(result)
    assert registry.get_sample_value("kai_ray_gated_pods", {"queue": "q", "state": "foreign"}) is None


async def test_gate_removals_are_counted_by_result() -> None:
    cache = ClusterCache()
    gate = [{"name": "kai.scheduler/queue-admission"}]
    manifests = [m.pod(name, "q", group=name) for name in ("goes", "refused")]
    for manifest in manifests:
        manifest["spec"]["schedulingGates"] = gate
    cache.on_list(PODS, manifests)
    cache.take_deltas()

    def answer(method: str, path: str, query: object, body: object) -> Response:
        return fail(500) if path.endswith("/refused") else ok({})

    registry = CollectorRegistry()
    sender = UngateSender(FakeApi(answer), cache, SchedulerMetrics(registry))  # type: ignore[arg-type]
    assert registry.get_sample_value("kai_ray_gate_removals_total", {"result": "ok"}) == 0  # served from the start
    assert await sender.send(["team/goes", "team/refused", "team/unknown"]) == 1
    assert registry.get_sample_value("kai_ray_gate_removals_total", {"result": "ok"}) == 1
    assert registry.get_sample_value("kai_ray_gate_removals_total", {"result": "failed"}) == 1
