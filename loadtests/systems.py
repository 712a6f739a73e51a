"""The systems the benchmarks compare, built the same way everywhere."""

from __future__ import annotations

from coordinator.coordinator import Coordinator
from coordinator.shard_client import InProcessTransport
from coordinator.shard_set import ShardSet
from kai_ray.config import SchedulerConfig
from loadtests.baseline import FullScanCoordinator
from placement.placer import PlacementPolicy
from shards.shard import Shard

CONFIG = SchedulerConfig()


def baseline(config: SchedulerConfig = CONFIG) -> Coordinator:
    """The per-pod full scan over every node of the cluster (``loadtests.baseline``)."""
    return FullScanCoordinator(config, ShardSet(InProcessTransport([Shard(0, PlacementPolicy.of(config))])))


def in_process(config: SchedulerConfig = CONFIG, shards: int = 1) -> Coordinator:
    policy = PlacementPolicy.of(config)
    return Coordinator(config, ShardSet(InProcessTransport([Shard(i, policy) for i in range(shards)])))


def on_ray(shards: int, config: SchedulerConfig = CONFIG) -> Coordinator:
    """The coordinator in this process, its shards as Ray actors (started before any clock)."""
    from kai_ray.app.actors import RayTransport, ensure_ray

    ensure_ray()
    transport = RayTransport(shards, PlacementPolicy.of(config))
    transport.wait_ready()
    return Coordinator(config, ShardSet(transport))
