"""Allocate leaves the shards' streams for every node's row once sizes that share nodes keep
re-placing one another, and decides exactly as it would have on the streams.

One thing may read differently: how many nodes each resource ruled out for a pod that found no
room. On every row a pod is explained when it fails; on the streams, by the shards' rows at the
end of the streams, after later pods filled nodes too (docs/architecture.md, "Two-phase reservation").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings

from coordinator import rounds
from coordinator.coordinator import CycleResult
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import ClusterSnapshot
from tests.builders import JobSpec, build, config, node, queue
from tests.coordinator.random_clusters import clusters

NOW = 1_000_000.0
ACTIONS = ("allocate", "consolidation", "reclaim", "preempt")
NEVER = 1e9  # re-placed pods per node: never moves
NODE_COUNTS = re.compile(r"(?<=no nodes with enough resources were found:)[^;]*")


def _cycle(snapshot: ClusterSnapshot, replaced_per_node: float, shards: int = 1) -> CycleResult:
    coordinator = in_process_coordinator(config(), shards)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    with mock.patch.object(rounds, "REPLACED_PODS_PER_NODE", replaced_per_node):
        return coordinator.cycle(NOW, ACTIONS)


def _same(moved: CycleResult, stayed: CycleResult) -> None:
    assert _without_counts(moved.decisions.pods) == _without_counts(stayed.decisions.pods)
    assert _without_counts(moved.decisions.pod_groups) == _without_counts(stayed.decisions.pod_groups)
    assert moved.decisions.queues == stayed.decisions.queues
    assert sorted(moved.decisions.evictions, key=str) == sorted(stayed.decisions.evictions, key=str)
    binds = [sorted((b.pod, b.node, b.gpu_groups) for b in result.binds) for result in (moved, stayed)]
    assert binds[0] == binds[1]


def _without_counts(decisions: Mapping[str, Any]) -> dict[str, Any]:
    return {key: replace(d, reason=NODE_COUNTS.sub("", d.reason)) for key, d in decisions.items()}


def _mixed_backlog(nodes: int, jobs: int) -> ClusterSnapshot:
    """Two teams' backlogs of 1, 2, 4 and 8 GPU jobs, more than the cluster holds."""
    sizes = (1, 2, 1, 4, 1, 8, 2, 1)
    specs = [JobSpec(f"j{i}", f"team-{'ab'[i % 2]}", gpu=sizes[i % len(sizes)], created=float(i)) for i in range(jobs)]
    teams = [queue(f"team-{t}", gpu_quota=nodes * 4, created=float(k)) for k, t in enumerate("ab")]
    return build([node(f"n{i:03}", gpu=8) for i in range(nodes)], teams, specs)


def test_a_mixed_backlog_moves_onto_every_row_after_a_few_rounds_with_the_same_binds() -> None:
    snapshot = _mixed_backlog(nodes=24, jobs=120)
    moved = _cycle(snapshot, rounds.REPLACED_PODS_PER_NODE, shards=2)
    stayed = _cycle(snapshot, NEVER, shards=2)
    _same(moved, stayed)
    assert len(moved.binds) == len(stayed.binds) > 50
    # On the streams every switch between sizes took a new round; moved, after the first one that
    # re-placed more pods than a quarter of the nodes, none did.
    assert stayed.stats.place_rounds > 30
    assert moved.stats.full_table and moved.stats.place_rounds == 2


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters())
def test_random_clusters_are_decided_the_same_on_the_streams_and_on_every_row(snapshot: ClusterSnapshot) -> None:
    _same(_cycle(snapshot, 0.0), _cycle(snapshot, NEVER))
