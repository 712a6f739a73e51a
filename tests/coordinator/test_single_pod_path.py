"""Allocate's direct path for a job with one pod left to place decides exactly as the general
path would: the same placements, reasons, queue books and binds, whether the pod's queue is
the only one with work or queues compete for the order."""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings

from coordinator.coordinator import CycleResult
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import ClusterSnapshot
from tests.builders import JobSpec, build, config, node, queue
from tests.coordinator.random_clusters import clusters

NOW = 1_000_000.0
ACTIONS = ("allocate", "consolidation", "reclaim", "preempt")


def _cycle(snapshot: ClusterSnapshot, shards: int) -> CycleResult:
    coordinator = in_process_coordinator(config(), shards)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    return coordinator.cycle(NOW, ACTIONS)


def _both_ways(snapshot: ClusterSnapshot, shards: int = 1) -> tuple[CycleResult, CycleResult]:
    direct = _cycle(snapshot, shards)
    with mock.patch("coordinator.actions.allocate._place_single_pod", return_value=False):
        general = _cycle(snapshot, shards)
    return direct, general


def _same(direct: CycleResult, general: CycleResult) -> None:
    assert direct.decisions.pods == general.decisions.pods
    assert direct.decisions.pod_groups == general.decisions.pod_groups
    assert direct.decisions.queues == general.decisions.queues
    assert sorted(direct.decisions.evictions, key=str) == sorted(general.decisions.evictions, key=str)
    binds = [[(b.pod, b.node, b.gpu_groups) for b in result.binds] for result in (direct, general)]
    assert binds[0] == binds[1]


def test_four_queues_taking_turns_on_one_gpu_jobs() -> None:
    """The CLI fill's shape, small: every job one pod, four queues with different quotas and
    ages, more jobs than GPUs, so the order between queues decides who waits."""
    queues = [queue(f"q{i}", gpu_quota=1 + i, created=float(i)) for i in range(4)]
    jobs = [JobSpec(f"j{i}", f"q{i % 4}", gpu=1, created=float(i)) for i in range(40)]
    direct, general = _both_ways(build([node(f"n{i}", gpu=4) for i in range(6)], queues, jobs), shards=2)
    _same(direct, general)
    assert sum(1 for d in direct.decisions.pods.values() if d.status == "Binding") == 24


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters())
def test_random_clusters_are_decided_the_same_by_both_paths(snapshot: ClusterSnapshot) -> None:
    _same(*_both_ways(snapshot))
