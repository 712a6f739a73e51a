"""Wiring: a coordinator with its shards, in one process or as Ray actors."""

from __future__ import annotations

from coordinator.coordinator import Coordinator
from coordinator.shard_client import InProcessTransport
from coordinator.shard_set import ShardSet
from kai_ray.config import SchedulerConfig
from shards.placement import PlacementPolicy
from shards.shard import Shard


def placement_policy(config: SchedulerConfig) -> PlacementPolicy:
    strategy = config.placementStrategy
    return PlacementPolicy(strategy.gpu, strategy.cpu, strategy.gpu_device)


def shard_count(config: SchedulerConfig, nodes: int, override: int | None = None) -> int:
    """``auto``: one shard per 5,000 nodes, at least one."""
    if override is not None:
        return override
    if isinstance(config.shards, int):
        return config.shards
    return max(1, -(-nodes // 5000))


def in_process_coordinator(config: SchedulerConfig, shards: int = 1) -> Coordinator:
    policy = placement_policy(config)
    transport = InProcessTransport([Shard(i, policy) for i in range(shards)])
    return Coordinator(config, ShardSet(transport))


def make_coordinator(config: SchedulerConfig, nodes: int, shards: int | None = None) -> Coordinator:
    """In-process shards for small clusters (or ``shards=0``); Ray actors otherwise."""
    count = shard_count(config, nodes, shards)
    if count <= 1 or shards == 0:
        return in_process_coordinator(config, 1)
    from kai_ray.actors import RemoteCoordinator

    return RemoteCoordinator(config, count)  # type: ignore[return-value]
