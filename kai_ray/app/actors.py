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
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from coordinator.cluster_model import ClusterModel
from coordinator.coordinator import Coordinator, CoordinatorLost, CycleResult
from coordinator.result_changes import ResultChange, ResultReceiver, ResultSender
from coordinator.shard_set import ShardSet
from kai_ray.config import SchedulerConfig
from kai_ray.deltas import ClusterDeltas
from placement.placer import PlacementPolicy
from placement.rows import NodeRows
from shards.protocol import Batch, BatchReply, ShardDown, ShardInfo
from shards.shard import Shard

log = logging.getLogger(__name__)


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


class _CoordinatorHost:
    """What runs inside the coordinator actor: a Coordinator wired to shard actors."""

    def __init__(self, config: SchedulerConfig, shards: int) -> None:
        from kai_ray.app.runtime import tune_gc_for_long_runs

        tune_gc_for_long_runs()  # this actor's process keeps the coordinator for its lifetime
        policy = PlacementPolicy.of(config)
        self.coordinator = Coordinator(config, ShardSet(RayTransport(shards, policy)))
        self.results = ResultSender()

    def apply(self, deltas: ClusterDeltas) -> None:
        self.coordinator.apply(deltas)

    def restore(self, everything: ClusterDeltas, assumed: list[tuple[str, str, tuple[str, ...]]]) -> None:
        """Start from what a lost coordinator knew: the cluster, and the binds it handed out that
        the watch has not confirmed (kept as such: a stale update must not make them pending)."""
        self.coordinator.apply(everything)
        for pod, node, gpu_groups in assumed:
            self.coordinator.model.assume_bound(pod, node, gpu_groups)

    def cycle(self, now: float, actions: Sequence[str] | None, held: int) -> ResultChange:
        return self.results.send(self.coordinator.cycle(now, actions), held)

    def step(self, deltas: ClusterDeltas, now: float, actions: Sequence[str] | None, held: int) -> ResultChange:
        return self.results.send(self.coordinator.step(deltas, now, actions), held)

    def bind_failed(self, pods: Sequence[str]) -> None:
        self.coordinator.bind_failed(pods)

    def node_rows(self) -> list[NodeRows]:
        return self.coordinator.shards.every_row()

    def resize(self, shards: int) -> int:
        return self.coordinator.shards.resize(shards)

    def shard_calls(self) -> int:
        return self.coordinator.shards.calls

    def shard_info(self) -> list[ShardInfo]:
        return self.coordinator.shard_info()


class RemoteCoordinator:
    """The coordinator as a Ray actor, with its shards as actors too.

    What the actor is told (changes, the binds it hands out, binds that failed) is also kept here,
    in a model of its own. When the actor dies (its process killed, its node lost) the call that
    meets it raises ``CoordinatorLost`` and a new actor, with new shards, starts from that model:
    the cluster as a restart would read it from the watches, and the binds still in flight known
    as such, so none of them is placed twice. What the new one does not inherit: the lost one's
    victim-search backoff and job clocks not yet written to the API (they start again)."""

    def __init__(self, config: SchedulerConfig, shards: int) -> None:
        import ray

        ensure_ray()
        self._config, self._shards = config, shards
        self._actor_class: Any = ray.remote(num_cpus=0)(_CoordinatorHost)
        self._mirror = ClusterModel()  # what the actor was told, to rebuild a lost one from
        self._handle: Any = None
        self._results = ResultReceiver()
        self._start()

    def _start(self) -> None:
        import ray

        handle = self._actor_class.remote(self._config, self._shards)
        mirror = self._mirror
        if mirror.nodes or mirror.pods or mirror.queues:
            assumed = [(key, pod.node, pod.gpu_groups) for key, pod in mirror.assumed.items() if pod.node]
            ray.get(handle.restore.remote(ClusterDeltas.of_snapshot(mirror.snapshot()), assumed))
        self._handle, self._results = handle, ResultReceiver()  # a new actor sends whole results first

    def _call(self, method: str, *args: Any) -> Any:
        import ray
        from ray.exceptions import RayActorError

        if self._handle is None:  # the last one was lost and none could be started then
            self._replace("no coordinator since the last one was lost", raise_after=False)
        try:
            return ray.get(getattr(self._handle, method).remote(*args))
        except RayActorError as error:
            self._replace(f"the coordinator actor died ({type(error).__name__})", raise_after=True)

    def _replace(self, why: str, raise_after: bool) -> None:
        """Start a new coordinator actor from the model kept here. Raises ``CoordinatorLost``
        unless ``raise_after`` is off and the new one started."""
        import ray

        if self._handle is not None:
            with contextlib.suppress(Exception):  # it may be only unreachable: there must not be two
                ray.kill(self._handle)
            self._handle = None
        try:
            self._start()
        except Exception as error:  # Ray itself is down, say: the next call tries again
            log.error("%s; no new coordinator could be started: %s", why, error)
            raise CoordinatorLost(f"{why}; no new coordinator could be started: {error}", replaced=False) from None
        pods, nodes = len(self._mirror.pods), len(self._mirror.nodes)
        log.warning("%s; a new one was started from %d pods on %d nodes", why, pods, nodes)
        if raise_after:
            raise CoordinatorLost(f"{why}; replaced, rebuilt from {pods} pods on {nodes} nodes", replaced=True)

    def apply(self, deltas: ClusterDeltas) -> None:
        """Also when this raises ``CoordinatorLost``: the changes are kept here, and a coordinator
        started then or later is rebuilt with them."""
        self._mirror.apply(deltas)
        self._call("apply", deltas)

    def cycle(self, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        return self._decided(self._call("cycle", now, actions, self._results.held))

    def step(self, deltas: ClusterDeltas, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        """Apply changes and run a cycle in one round trip to the coordinator actor."""
        self._mirror.apply(deltas)
        return self._decided(self._call("step", deltas, now, actions, self._results.held))

    def _decided(self, change: ResultChange) -> CycleResult:
        result = self._results.receive(change)
        for bind in result.binds:  # handed out: in flight until the watch shows them
            self._mirror.assume_bound(bind.pod, bind.node, bind.gpu_groups, bind.claims)
        return result

    def bind_failed(self, pods: Sequence[str]) -> None:
        """Kept here first, as ``apply``'s changes are."""
        for pod in pods:
            self._mirror.forget_bind(pod)
        self._call("bind_failed", list(pods))

    def node_rows(self) -> list[NodeRows]:
        """Every node as the shard actors hold it (the simulator's accounting check reads it)."""
        rows: list[NodeRows] = self._call("node_rows")
        return rows

    def resize(self, shards: int) -> int:
        moved: int = self._call("resize", shards)
        self._shards = shards
        return moved

    def shard_calls(self) -> int:
        calls: int = self._call("shard_calls")
        return calls

    def shard_info(self) -> list[ShardInfo]:
        info: list[ShardInfo] = self._call("shard_info")
        return info

    def close(self) -> None:
        import ray

        if self._handle is not None:
            ray.kill(self._handle)
