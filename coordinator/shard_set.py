"""The coordinator's side of the shards: who owns which node, and one batched call per shard.

``ShardBackend`` is the single seam for remote calls: ``InProcessShards`` calls plain
``Shard`` objects (tests, ``kai-ray schedule``); ``RayShards`` in ``kai_ray/actors.py`` sends
the same calls to Ray actors, all shards at once. Nothing else in the coordinator touches Ray.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

from kai_ray.deltas import ClusterDeltas
from kai_ray.model import Topology
from shards import partitioner
from shards.messages import (
    ClaimHold,
    NodeDevices,
    PrepareItem,
    PrepareReply,
    ProposeReply,
    ProposeRequest,
    ShardDeltas,
)
from shards.rows import NodeRows
from shards.shard import Shard
from shards.topology_domains import DomainReport

Call = tuple[int, str, tuple[Any, ...]]


class ShardBackend(Protocol):
    def shard_ids(self) -> list[int]: ...

    def call_many(self, calls: Sequence[Call]) -> list[Any]:
        """Run ``method(*args)`` on each shard named; all at once where the backend can."""
        ...

    def add_shard(self, shard_id: int) -> None: ...

    def remove_shard(self, shard_id: int) -> None: ...


class InProcessShards:
    def __init__(self, shards: Sequence[Shard]) -> None:
        self.shards = {s.shard_id: s for s in shards}
        self._policy = shards[0].placer.policy if shards else None
        self._ttl = shards[0].ttl if shards else 30.0

    def shard_ids(self) -> list[int]:
        return sorted(self.shards)

    def call_many(self, calls: Sequence[Call]) -> list[Any]:
        return [getattr(self.shards[sid], method)(*args) for sid, method, args in calls]

    def add_shard(self, shard_id: int) -> None:
        self.shards[shard_id] = Shard(shard_id, self._policy, self._ttl)

    def remove_shard(self, shard_id: int) -> None:
        del self.shards[shard_id]


class ShardSet:
    """Routes cluster changes to the owning shards and fans each phase out in one round.

    Cluster changes are not sent on their own: they wait, per shard, and travel in the same
    call as the next request to that shard (``Shard.run_batch``), applied before it. A shard
    therefore always answers with every change it owns applied, and a cycle costs one round
    trip per phase, however many delta batches came in since the last one.
    """

    def __init__(self, backend: ShardBackend) -> None:
        self.backend = backend
        self.owner: dict[str, int] = {}  # node -> shard
        self.pod_node: dict[str, str] = {}  # placed pod -> its node (whose shard holds it)
        self.calls = 0  # remote calls made, for metrics and tests of batching
        self._waiting: dict[int, list[ShardDeltas]] = defaultdict(list)  # deltas not yet sent, per shard

    @property
    def ids(self) -> list[int]:
        return self.backend.shard_ids()

    def _run(self, calls: list[Call]) -> list[Any]:
        """One round: each call, with that shard's waiting deltas applied first."""
        sent = [
            self._with_waiting(sid, [(method, args)]) if self._waiting.get(sid) else (sid, method, args)
            for sid, method, args in calls
        ]
        replies = self._send(sent)
        return [reply[-1] if call[1] == "run_batch" else reply for call, reply in zip(sent, replies, strict=True)]

    def flush(self) -> None:
        """Send every waiting delta now (before shards are resized, or to inspect the shards)."""
        self._send([self._with_waiting(sid, []) for sid in list(self._waiting) if self._waiting[sid]])

    def _with_waiting(self, sid: int, calls: list[tuple[str, tuple[Any, ...]]]) -> Call:
        """``calls`` to shard ``sid`` as one batch, after the deltas waiting for it (which leave the queue)."""
        applies: list[tuple[str, tuple[Any, ...]]] = [("apply", (d,)) for d in self._waiting.pop(sid, [])]
        return (sid, "run_batch", (applies + calls,))

    def _send(self, calls: list[Call]) -> list[Any]:
        self.calls += len(calls)
        return self.backend.call_many(calls) if calls else []

    # ------------------------------------------------------------------ deltas
    def apply(
        self, deltas: ClusterDeltas, devices: Sequence[NodeDevices] = (), holds: Sequence[ClaimHold] = ()
    ) -> None:
        """Route changes to the shards owning their nodes; ``devices`` and ``holds`` are the DRA
        ones (coordinator/dra_model.py), routed the same way after the nodes."""
        ids = self.ids
        per_shard: dict[int, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
        for node in deltas.nodes_upserted:
            home = self.owner.setdefault(node.name, partitioner.owner(node.name, ids))
            per_shard[home]["nodes_upserted"].append(node)
        # A deleted node's pods go with it (Kubernetes deletes them): forget them now, since their
        # own deletions, once the node has no owner, could not be routed to its shard.
        pods_on: dict[str, list[str]] = defaultdict(list)
        for key, node_name in self.pod_node.items() if deltas.nodes_removed else ():
            pods_on[node_name].append(key)
        for name in deltas.nodes_removed:
            shard_or_none = self.owner.pop(name, None)
            if shard_or_none is not None:
                per_shard[shard_or_none]["nodes_removed"].append(name)
                for key in pods_on.get(name, ()):
                    per_shard[shard_or_none]["pods_removed"].append(key)
                    del self.pod_node[key]
        for pod in deltas.pods_upserted:
            previous = self._shard_of_pod(pod.key)
            target = self.owner.get(pod.node) if pod.node else None
            if previous is not None and previous != target:
                per_shard[previous]["pods_removed"].append(pod.key)
                del self.pod_node[pod.key]
            if target is not None and pod.node is not None:
                per_shard[target]["pods_upserted"].append(pod)
                self.pod_node[pod.key] = pod.node
        for key in deltas.pods_removed:
            previous = self._shard_of_pod(key)
            self.pod_node.pop(key, None)
            if previous is not None:
                per_shard[previous]["pods_removed"].append(key)
        for node_name, listed in devices:
            if node_name in self.owner:
                per_shard[self.owner[node_name]]["devices"].append((node_name, listed))
        for hold in holds:  # a hold whose node no shard owns (network devices) goes to every shard
            for shard in [self.owner[hold[1]]] if hold[1] in self.owner else ids if hold[1] is None else []:
                per_shard[shard]["claims"].append(hold)
        for shard, parts in per_shard.items():
            message = ShardDeltas(**{k: tuple(v) for k, v in parts.items()})
            if message:
                self._waiting[shard].append(message)

    def _shard_of_pod(self, key: str) -> int | None:
        node = self.pod_node.get(key)
        return None if node is None else self.owner.get(node)

    # ------------------------------------------------------------------ phases
    def propose(self, request: ProposeRequest) -> list[ProposeReply]:
        return self._run([(sid, "propose", (request,)) for sid in self.ids])

    def rows(self) -> list[NodeRows]:
        return self._run([(sid, "rows", ()) for sid in self.ids])

    def domains(self, topologies: Sequence[Topology]) -> list[list[DomainReport]]:
        """Each shard's report of its nodes' domains, one per Topology asked for."""
        return self._run([(sid, "domains", (list(topologies),)) for sid in self.ids])

    def prepare(self, items: dict[int, list[PrepareItem]], now: float) -> dict[int, PrepareReply]:
        shards = sorted(items)
        replies = self._run([(sid, "prepare", (items[sid], now)) for sid in shards])
        return dict(zip(shards, replies, strict=True))

    def commit(self, rids: list[str], placed: dict[str, str]) -> None:
        """Commit everywhere; ``placed`` (pod -> node) records where the committed pods now are."""
        if rids:
            self._run([(sid, "commit", (rids,)) for sid in self.ids])
        self.pod_node.update(placed)

    def abort(self, rids: list[str]) -> None:
        if rids:
            self._run([(sid, "abort", (rids,)) for sid in self.ids])

    def expire(self, now: float) -> list[str]:
        gone: list[str] = []
        for part in self._run([(sid, "expire", (now,)) for sid in self.ids]):
            gone.extend(part)
        return gone

    # ------------------------------------------------------------------ scaling
    def resize(self, count: int) -> int:
        """Add or remove shards; nodes move with their state. Returns how many nodes moved."""
        self.flush()
        before = self.ids
        after = list(range(count))
        for sid in after:
            if sid not in before:
                self.backend.add_shard(sid)
        moves = partitioner.moves(list(self.owner), before, after)
        by_pair: dict[tuple[int, int], list[str]] = defaultdict(list)
        for node, pair in moves.items():
            by_pair[pair].append(node)
        for (old, new), names in sorted(by_pair.items()):
            (handover,) = self._run([(old, "hand_over", (sorted(names),))])
            self._run([(new, "take_over", (handover,))])
            for name in names:
                self.owner[name] = new
        for sid in before:
            if sid not in after:
                self.backend.remove_shard(sid)
        return len(moves)
