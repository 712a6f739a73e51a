"""Ray at the edges: the plain ``Shard`` and ``Coordinator`` classes as Ray actors.

This is the only module that imports Ray. ``RayShards`` is the coordinator's backend for
shard actors (every phase is one ``ray.get`` over all shards at once), and
``RemoteCoordinator`` gives callers the same methods as ``Coordinator`` while the work
happens in the coordinator actor.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from coordinator.coordinator import Coordinator, CycleResult
from coordinator.shard_set import Call, ShardSet
from kai_ray.config import SchedulerConfig
from kai_ray.deltas import ClusterDeltas
from shards.placement import PlacementPolicy
from shards.rows import NodeRows
from shards.shard import Shard


def ensure_ray(num_cpus: int | None = None, address: str | None = None) -> None:
    """Start (or join, with ``address`` / RAY_ADDRESS) a Ray instance, quietly."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)


class RayShards:
    """Shard actors; ``call_many`` sends every call before waiting for any answer."""

    def __init__(self, count: int, policy: PlacementPolicy, ttl: float = 30.0) -> None:
        import ray

        self._actor = ray.remote(num_cpus=0)(Shard)
        self._policy = policy
        self._ttl = ttl
        self.handles: dict[int, Any] = {i: self._actor.remote(i, policy, ttl) for i in range(count)}

    def shard_ids(self) -> list[int]:
        return sorted(self.handles)

    def wait_ready(self) -> None:
        """Block until every shard actor has started and answered once (actors start lazily)."""
        self.call_many([(sid, "node_names", ()) for sid in self.shard_ids()])

    def call_many(self, calls: Sequence[Call]) -> list[Any]:
        import ray

        refs = [getattr(self.handles[sid], method).remote(*args) for sid, method, args in calls]
        return list(ray.get(refs))

    def add_shard(self, shard_id: int) -> None:
        self.handles[shard_id] = self._actor.remote(shard_id, self._policy, self._ttl)

    def remove_shard(self, shard_id: int) -> None:
        import ray

        ray.kill(self.handles.pop(shard_id))


class _CoordinatorHost:
    """What runs inside the coordinator actor: a Coordinator wired to shard actors."""

    def __init__(self, config: SchedulerConfig, shards: int) -> None:
        strategy = config.placementStrategy
        policy = PlacementPolicy(strategy.gpu, strategy.cpu, strategy.gpu_device)
        self.coordinator = Coordinator(config, ShardSet(RayShards(shards, policy)))

    def apply(self, deltas: ClusterDeltas) -> None:
        self.coordinator.apply(deltas)

    def cycle(self, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        return self.coordinator.cycle(now, actions)

    def step(self, deltas: ClusterDeltas, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        return self.coordinator.step(deltas, now, actions)

    def bind_failed(self, pods: Sequence[str]) -> None:
        self.coordinator.bind_failed(pods)

    def node_rows(self) -> list[NodeRows]:
        return self.coordinator.shards.rows()

    def resize(self, shards: int) -> int:
        return self.coordinator.shards.resize(shards)

    def shard_calls(self) -> int:
        return self.coordinator.shards.calls


class RemoteCoordinator:
    """The coordinator as a Ray actor, with its shards as actors too."""

    def __init__(self, config: SchedulerConfig, shards: int) -> None:
        import ray

        ensure_ray()
        actor: Any = ray.remote(num_cpus=0)(_CoordinatorHost)
        self._handle: Any = actor.remote(config, shards)

    def _get(self, ref: Any) -> Any:
        import ray

        return ray.get(ref)

    def apply(self, deltas: ClusterDeltas) -> None:
        self._get(self._handle.apply.remote(deltas))

    def cycle(self, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        result: CycleResult = self._get(self._handle.cycle.remote(now, actions))
        return result

    def step(self, deltas: ClusterDeltas, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        """Apply changes and run a cycle in one round trip to the coordinator actor."""
        result: CycleResult = self._get(self._handle.step.remote(deltas, now, actions))
        return result

    def bind_failed(self, pods: Sequence[str]) -> None:
        self._get(self._handle.bind_failed.remote(list(pods)))

    def node_rows(self) -> list[NodeRows]:
        """Every node as the shard actors hold it (the simulator's accounting check reads it)."""
        rows: list[NodeRows] = self._get(self._handle.node_rows.remote())
        return rows

    def resize(self, shards: int) -> int:
        moved: int = self._get(self._handle.resize.remote(shards))
        return moved

    def shard_calls(self) -> int:
        calls: int = self._get(self._handle.shard_calls.remote())
        return calls

    def close(self) -> None:
        import ray

        ray.kill(self._handle)
