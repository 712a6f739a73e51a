"""A coordinator that lives somewhere else (a Ray actor) and is replaced when it dies.

``CoordinatorHost`` is what runs where the coordinator lives: a ``Coordinator``, its results sent
as what changed since the last one (``result_changes``). ``HostLink`` is the one seam to that
place: a call by method name that raises ``HostGone`` when the host died with it (Ray's link is in
``kai_ray/app/actors.py``; the fault trials use one in this process).

``ReplaceableCoordinator`` gives callers the ``Coordinator``'s methods and keeps its own
``ClusterModel`` of what it told the host: the changes, the binds the host handed out (assumed
until the watch confirms them, as in the host) and the binds that failed. The call that meets a
dead host closes it for good, starts a new one (new shards with it) restored from that model,
and raises ``CoordinatorLost(replaced=True)``: changes and failed binds given with that call are
in the new host already, and a cycle that met it handed nothing out. A new host does not inherit
the lost one's victim-search backoff or job clocks not yet written to the API: they start again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from coordinator.cluster_model import ClusterModel
from coordinator.coordinator import Coordinator, CycleResult
from coordinator.failures import CoordinatorLost
from coordinator.result_changes import ResultChange, ResultReceiver, ResultSender
from kai_ray.deltas import ClusterDeltas
from placement.rows import NodeHolds
from shards.protocol import ShardInfo

log = logging.getLogger(__name__)

Assumed = list[tuple[str, str, tuple[str, ...]]]  # pod, node, GPU groups of binds still in flight


class HostGone(RuntimeError):
    """The host died before or during the call; the reply, if any, is lost."""


class HostLink(Protocol):
    def call(self, method: str, *args: Any) -> Any:
        """``method`` of the host with ``args``; raises ``HostGone`` when the host died."""
        ...

    def close(self) -> None:
        """The host is not used again (killed, where it may only be unreachable)."""
        ...


class CoordinatorHost:
    """What runs where the coordinator lives."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self.results = ResultSender()

    def apply(self, deltas: ClusterDeltas) -> None:
        self.coordinator.apply(deltas)

    def restore(self, everything: ClusterDeltas, assumed: Assumed) -> None:
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

    def node_holds(self) -> list[NodeHolds]:
        return self.coordinator.shards.every_hold()

    def resize(self, shards: int) -> int:
        return self.coordinator.shards.resize(shards)

    def shard_calls(self) -> int:
        return self.coordinator.shards.calls

    def shard_info(self) -> list[ShardInfo]:
        return self.coordinator.shard_info()


class ReplaceableCoordinator:
    """The coordinator behind a ``HostLink``; ``start(shards)`` makes a new host's link."""

    def __init__(self, start: Callable[[int], HostLink], shards: int) -> None:
        self._start_link, self._shards = start, shards
        self.model = ClusterModel(change_log=False)  # what the host was told, to rebuild a lost one from
        self._link: HostLink | None = None
        self._results = ResultReceiver()
        self._start()

    def _start(self) -> None:
        link = self._start_link(self._shards)
        model = self.model
        if model.nodes or model.pods or model.queues:
            assumed = [(key, pod.node, pod.gpu_groups) for key, pod in model.assumed.items() if pod.node]
            link.call("restore", ClusterDeltas.of_snapshot(model.snapshot()), assumed)
        self._link, self._results = link, ResultReceiver()  # a new host sends whole results first

    def _call(self, method: str, *args: Any) -> Any:
        if self._link is None:  # the last one was lost and none could be started then
            self._replace("no coordinator since the last one was lost", raise_after=False)
        assert self._link is not None
        try:
            return self._link.call(method, *args)
        except HostGone as gone:
            self._replace(f"the coordinator died ({gone})", raise_after=True)

    def _replace(self, why: str, raise_after: bool) -> None:
        """Start a new host from the model kept here. Raises ``CoordinatorLost`` unless
        ``raise_after`` is off and the new one started."""
        if self._link is not None:
            with contextlib.suppress(Exception):  # it may be only unreachable: there must not be two
                self._link.close()
            self._link = None
        try:
            self._start()
        except Exception as error:  # the place to start one is gone too: the next call tries again
            log.error("%s; no new coordinator could be started: %s", why, error)
            raise CoordinatorLost(f"{why}; no new coordinator could be started: {error}", replaced=False) from None
        pods, nodes = len(self.model.pods), len(self.model.nodes)
        log.warning("%s; a new one was started from %d pods on %d nodes", why, pods, nodes)
        if raise_after:
            raise CoordinatorLost(f"{why}; replaced, rebuilt from {pods} pods on {nodes} nodes", replaced=True)

    def apply(self, deltas: ClusterDeltas) -> None:
        """Also when this raises ``CoordinatorLost``: the changes are kept here, and a coordinator
        started then or later is rebuilt with them."""
        self.model.apply(deltas)
        self._call("apply", deltas)

    def cycle(self, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        return self._decided(self._call("cycle", now, actions, self._results.held))

    def step(self, deltas: ClusterDeltas, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        """Apply changes and run a cycle in one call to the host."""
        self.model.apply(deltas)
        return self._decided(self._call("step", deltas, now, actions, self._results.held))

    def _decided(self, change: ResultChange) -> CycleResult:
        result = self._results.receive(change)
        for bind in result.binds:  # handed out: in flight until the watch shows them
            self.model.assume_bound(bind.pod, bind.node, bind.gpu_groups, bind.claims)
        return result

    def bind_failed(self, pods: Sequence[str]) -> None:
        """Kept here first, as ``apply``'s changes are."""
        for pod in pods:
            self.model.forget_bind(pod)
        self._call("bind_failed", list(pods))

    def node_holds(self) -> list[NodeHolds]:
        """What every node holds as the host's shards have it (the simulator's accounting check)."""
        holds: list[NodeHolds] = self._call("node_holds")
        return holds

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
        if self._link is not None:
            self._link.close()
            self._link = None
