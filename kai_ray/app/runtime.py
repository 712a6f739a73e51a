"""Wiring: a coordinator with its shards, in one process or as Ray actors."""

from __future__ import annotations

import gc

from coordinator.coordinator import Coordinator
from coordinator.shard_client import InProcessTransport
from coordinator.shard_set import ShardSet
from kai_ray.config import SchedulerConfig
from placement.placer import PlacementPolicy
from shards.shard import Shard


def shard_count(config: SchedulerConfig, nodes: int, override: int | None = None) -> int:
    """``auto``: one shard per 5,000 nodes, at least one."""
    if override is not None:
        return override
    if isinstance(config.shards, int):
        return config.shards
    return max(1, -(-nodes // 5000))


def in_process_coordinator(config: SchedulerConfig, shards: int = 1) -> Coordinator:
    policy = PlacementPolicy.of(config)
    transport = InProcessTransport([Shard(i, policy) for i in range(shards)])
    return Coordinator(config, ShardSet(transport))


# A long-running coordinator keeps millions of objects alive (the model, the session kept across
# cycles). With Python's default thresholds a full collection walks all of them every few
# cycles: a cycle with one change at 20,000 nodes took 300-345 ms (median) of CPU instead of
# 185-210 (its minimum). Collecting the young generation less eagerly, and the old one rarely,
# brought the median to 175-195 ms (loadtests.bench_core's idle cycle, one pending pod more).
# One session over a large snapshot pays the same: `kai-ray schedule` on the reclaim storm (500
# full nodes, 4,000 reclaiming jobs) spent 0.79 s of 5.8 in collections, 0.22 s with these.
GC_THRESHOLDS = (100_000, 50, 100)


def tune_gc_for_large_models() -> None:
    """Garbage-collector thresholds for a process whose model is large and lives long: one that
    keeps a coordinator for its lifetime, or one session over a large snapshot."""
    gc.set_threshold(*GC_THRESHOLDS)


def make_coordinator(config: SchedulerConfig, nodes: int, shards: int | None = None) -> Coordinator:
    """In-process shards for small clusters (or ``shards=0``); Ray actors otherwise. For a
    process that keeps it (``kai-ray run``): the garbage collector is tuned for that."""
    count = shard_count(config, nodes, shards)
    if count <= 1 or shards == 0:
        tune_gc_for_large_models()
        return in_process_coordinator(config, 1)
    from kai_ray.app.actors import RemoteCoordinator

    return RemoteCoordinator(config, count)  # type: ignore[return-value]
