"""Ray at the edges: the plain ``Shard`` and ``Coordinator`` classes as Ray actors.

This is the only module that imports Ray. ``RayTransport`` delivers the shard client's
batches to shard actors (every round is one ``ray.get`` per shard, all submitted at once)
and reports an actor that died, or failed a batch, as ``ShardDown``; ``RemoteCoordinator``
gives callers the same methods as ``Coordinator`` while the work happens in the
coordinator actor, whose results come back as what changed since the last one
(``coordinator.result_changes``), and replaces that actor when it dies.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from coordinator.coordinator import Coordinator
from coordinator.replaceable import CoordinatorHost, HostGone, ReplaceableCoordinator
from coordinator.shard_set import ShardSet
from kai_ray.config import SchedulerConfig
from placement.placer import PlacementPolicy
from shards.protocol import Batch, BatchReply, ShardDown
from shards.shard import Shard


def ensure_ray(num_cpus: int | None = None, address: str | None = None) -> None:
    """Start (or join, with ``address`` / RAY_ADDRESS) a Ray instance, quietly."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # Ray keeps an event record of every task and actor call in the GCS for its dashboard, up to
    # 100,000 of them: a scheduler that calls its actors every cycle fills that, about 100 MB of
    # gcs_server per 30,000 calls measured, and nothing here reads it. Off, unless the user says
    # otherwise; an instance joined by address keeps its own setting.
    os.environ.setdefault("RAY_task_events_report_interval_ms", "0")
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)


class ShardActor(Shard):
    """A shard in an actor process of its own (Ray titles it ``ray::ShardActor``), which it keeps
    for its lifetime: its garbage collector is tuned as the coordinator's is
    (``kai_ray.app.runtime.GC_THRESHOLDS``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from kai_ray.app.runtime import tune_gc_for_long_runs

        tune_gc_for_long_runs()
        super().__init__(*args, **kwargs)


class RayTransport:
    """Shard actors; ``exchange`` submits every batch before waiting for any answer."""

    remote = True

    def __init__(self, count: int, policy: PlacementPolicy, ttl: float = 30.0) -> None:
        import ray

        self._actor = ray.remote(num_cpus=0)(ShardActor)
        self._policy = policy
        self._ttl = ttl
        self.handles: dict[int, Any] = {i: self._new(i) for i in range(count)}

    def _new(self, shard_id: int) -> Any:
        return self._actor.remote(shard_id, self._policy, self._ttl)

    def shard_ids(self) -> list[int]:
        return sorted(self.handles)

    def wait_ready(self) -> None:
        """Block until every shard actor has started and answered once (actors start lazily)."""
        self.exchange({sid: Batch(0, ()) for sid in self.shard_ids()})

    def exchange(self, batches: Mapping[int, Batch]) -> dict[int, BatchReply | ShardDown]:
        import ray
        from ray.exceptions import RayActorError, RayError

        refs = {sid: self.handles[sid].handle.remote(batch) for sid, batch in batches.items()}
        out: dict[int, BatchReply | ShardDown] = {}
        for sid, ref in refs.items():
            try:
                out[sid] = ray.get(ref)
            except RayActorError as error:  # the actor's process is gone
                out[sid] = ShardDown(sid, type(error).__name__)
            except RayError as error:  # the batch raised inside the actor: its state is suspect
                out[sid] = ShardDown(sid, f"{type(error).__name__}: {str(error).splitlines()[0]}")
        return out

    def replace(self, shard_id: int) -> None:
        import ray

        old = self.handles.get(shard_id)
        if old is not None:
            ray.kill(old, no_restart=True)  # a shard that failed a batch may still be alive
        self.handles[shard_id] = self._new(shard_id)

    def add(self, shard_id: int) -> None:
        self.handles[shard_id] = self._new(shard_id)

    def remove(self, shard_id: int) -> None:
        import ray

        ray.kill(self.handles.pop(shard_id))


@contextlib.contextmanager
def on_ray_actors(config: SchedulerConfig, shards: int) -> Iterator[Coordinator]:
    """A coordinator in this process whose shards are ``shards`` Ray actors, for as long as the
    block runs (Ray is started for it, and stopped after, unless it was running already)."""
    import ray

    started = not ray.is_initialized()
    ensure_ray()
    transport = RayTransport(shards, PlacementPolicy.of(config))
    try:
        transport.wait_ready()
        yield Coordinator(config, ShardSet(transport))
    finally:
        for sid in transport.shard_ids():
            transport.remove(sid)
        if started:
            ray.shutdown()


class _CoordinatorHost(CoordinatorHost):
    """The coordinator actor: a ``CoordinatorHost`` whose coordinator's shards are actors (this
    actor owns them: they die with it)."""

    def __init__(self, config: SchedulerConfig, shards: int) -> None:
        from kai_ray.app.runtime import tune_gc_for_long_runs

        tune_gc_for_long_runs()  # this actor's process keeps the coordinator for its lifetime
        policy = PlacementPolicy.of(config)
        super().__init__(Coordinator(config, ShardSet(RayTransport(shards, policy))))


class _RayHostLink:
    """A ``HostLink`` to a new coordinator actor."""

    def __init__(self, actor_class: Any, config: SchedulerConfig, shards: int) -> None:
        self._handle: Any = actor_class.remote(config, shards)

    def call(self, method: str, *args: Any) -> Any:
        import ray
        from ray.exceptions import RayActorError

        try:
            return ray.get(getattr(self._handle, method).remote(*args))
        except RayActorError as error:
            raise HostGone(type(error).__name__) from error

    def close(self) -> None:
        import ray

        ray.kill(self._handle)


class RemoteCoordinator(ReplaceableCoordinator):
    """The coordinator as a Ray actor, with its shards as actors too; a new actor replaces one that
    died (``coordinator.replaceable``)."""

    def __init__(self, config: SchedulerConfig, shards: int) -> None:
        import ray

        ensure_ray()
        actor_class: Any = ray.remote(num_cpus=0)(_CoordinatorHost)
        super().__init__(lambda count: _RayHostLink(actor_class, config, count), shards)
