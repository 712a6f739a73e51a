"""Metrics after a cycle carry the names, labels and values of what happened."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from k8s_adapter.metrics import SchedulerMetrics
from kai_ray.deltas import ClusterDeltas
from kai_ray.runtime import in_process_coordinator
from tests.builders import JobSpec, build, config, node, queue


def test_a_cycle_is_reported_with_kube_scheduler_and_kai_names() -> None:
    snapshot = build(
        [node("a", gpu=4)],
        [queue("q", gpu_quota=4)],
        [JobSpec("fits", "q", pods=2, gpu=1), JobSpec("too-big", "q", gpu=8, created=1)],
    )
    coordinator = in_process_coordinator(config())
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    result = coordinator.cycle(1_000.0)
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    metrics.observe_cycle(result)
    value = registry.get_sample_value
    assert value("scheduler_schedule_attempts_total", {"result": "scheduled", "profile": "kai-scheduler"}) == 2
    assert value("scheduler_schedule_attempts_total", {"result": "unschedulable", "profile": "kai-scheduler"}) == 1
    assert value("scheduler_pending_pods", {"queue": "q"}) == 1
    assert value("kai_queue_allocated_gpus", {"queue_name": "q"}) == 2
    assert value("kai_queue_fair_share_gpu", {"queue_name": "q"}) == 4
    assert value("kai_ray_reservation_prepares_total") == 1
    assert value("kai_ray_cycle_duration_seconds_count") == 1
    text = generate_latest(registry).decode()
    assert "kai_ray_gang_commit_duration_seconds_bucket" in text


def test_two_registries_do_not_share_state() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    SchedulerMetrics(first).observe_binds(ok=3, failed=1)
    SchedulerMetrics(second)
    assert first.get_sample_value("kai_ray_binds_total", {"result": "ok"}) == 3
    assert second.get_sample_value("kai_ray_binds_total", {"result": "ok"}) is None
