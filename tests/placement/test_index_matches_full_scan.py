"""The per-shape index changes the cost of placement, never a decision: pod after pod, on a busy
cluster, it picks the same node, GPU groups and pipelining as a full scan of every node."""

from __future__ import annotations

from loadtests.baseline import FullScanPlacer
from loadtests.bench_shards import hold_choice
from loadtests.shard_workload import busy_shard, pending_pods


def test_indexed_and_full_scan_placement_choose_alike() -> None:
    indexed = busy_shard(300).placer
    scanned = FullScanPlacer(busy_shard(300).table, indexed.policy)
    placed = 0
    for pod in pending_pods(400):
        mine, theirs = indexed.best_node(pod.shape), scanned.best_node(pod.shape)
        assert mine == theirs, pod.key
        if mine is not None and theirs is not None:
            placed += 1
            hold_choice(indexed.table, pod, mine)
            hold_choice(scanned.table, pod, theirs)
    assert 0 < placed < 400  # the cluster fills up: the comparison covers pods that no longer fit
