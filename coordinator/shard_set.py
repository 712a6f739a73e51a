"""The coordinator's side of the shards: who owns which node, and each phase as one round.

Cluster changes are not sent on their own: ``ShardClient`` queues them per shard and they
travel ahead of the next request to that shard, so a cycle costs one round trip per phase
however many delta batches came in since the last one, and a change stays queued until the
shard has acknowledged it. A shard that fails a round is rebuilt by ``recover`` from the
coordinator's model (which holds every change, acknowledged or not).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from coordinator.cluster_model import ClusterModel
from coordinator.shard_client import Answers, ShardClient, ShardTransport
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import Pod, Topology
from placement.rows import NodeHolds, NodeRows
from placement.topology_domains import DomainReport
from shards import partitioner
from shards.messages import ClaimHold, NodeDevices, PrepareItem, PrepareReply, RowChanges, ShardDeltas
from shards.protocol import Expire, ShardInfo, ShardRequest
from shards.stream_messages import RoundReply, RoundRequest, SettleReply, SettleRequest

Verdicts = dict[str, bool]


class ShardSet:
    def __init__(self, transport: ShardTransport, epoch: int | None = None) -> None:
        self.client = ShardClient(transport, epoch)
        self.owner: dict[str, int] = {}  # node -> shard
        self.pod_node: dict[str, str] = {}  # placed pod -> its node (whose shard holds it)

    @property
    def transport(self) -> ShardTransport:
        return self.client.transport

    @property
    def ids(self) -> list[int]:
        return self.client.shard_ids()

    @property
    def calls(self) -> int:
        return self.client.calls

    @property
    def shard_cpu(self) -> float:
        return self.client.shard_cpu

    @property
    def epoch(self) -> int:
        return self.client.epoch

    @property
    def down(self) -> frozenset[int]:
        return frozenset(self.client.down)

    def heartbeat(self) -> Answers[list[object]]:
        """An empty round to every shard (carrying whatever changes are queued for it)."""
        return self.client.heartbeat()

    def flush(self) -> frozenset[int]:
        """Send every queued change now (before shards are resized, or to inspect the shards)."""
        return self.client.flush()

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
                self.client.queue(shard, message)

    def _shard_of_pod(self, key: str) -> int | None:
        node = self.pod_node.get(key)
        return None if node is None else self.owner.get(node)

    def record_placed(self, placed: Mapping[str, str]) -> None:
        """Committed pods (pod -> node): their shards hold them now."""
        self.pod_node.update(placed)

    def release(self, shard_id: int, pods: Iterable[Pod]) -> None:
        """A shard committed these pods but they will not be bound: they are pending again there
        (queued like any change, so it reaches the shard even if the next round fails)."""
        pending = tuple(pods)
        if pending:
            self.client.queue(shard_id, ShardDeltas(pods_upserted=pending))

    # ------------------------------------------------------------------ phases
    def rows(self) -> Answers[NodeRows]:
        return self.client.rows(self.ids)

    def every_row(self) -> list[NodeRows]:
        """Every shard's rows, in shard order, for checks and baselines outside a cycle (a shard
        that does not answer is an error here, not a lost cycle)."""
        answers = self.rows()
        if answers.down:
            raise RuntimeError(f"shards {sorted(answers.down)} did not answer")
        return [answers.replies[sid] for sid in sorted(answers.replies)]

    def every_hold(self) -> list[NodeHolds]:
        """What every node holds, per shard in shard order: ``every_row`` without labels, taints
        and devices, for the checks that recount usage (the simulator's, each cycle)."""
        answers = self.client.holds(self.ids)
        if answers.down:
            raise RuntimeError(f"shards {sorted(answers.down)} did not answer")
        return [answers.replies[sid] for sid in sorted(answers.replies)]

    def domains(self, topologies: Sequence[Topology]) -> Answers[list[DomainReport]]:
        """Each shard's report of its nodes' domains, one per Topology asked for."""
        return self.client.domains(self.ids, topologies)

    def changes(self, since: Mapping[int, tuple[int, int]]) -> Answers[RowChanges]:
        return self.client.changes(since)

    def changes_after(
        self, before: Mapping[int, ShardRequest], since: Mapping[int, tuple[int, int]]
    ) -> Answers[tuple[object, RowChanges]]:
        return self.client.changes_after(before, since)

    def rounds(self, requests: Mapping[int, RoundRequest]) -> Answers[RoundReply]:
        return self.client.rounds(requests)

    def settle_all(self, requests: Mapping[int, SettleRequest]) -> Answers[SettleReply]:
        return self.client.settle_all(requests)

    def prepare(self, items: Mapping[int, Sequence[PrepareItem]], now: float) -> Answers[PrepareReply]:
        return self.client.prepare(items, now)

    def settle(
        self, commit: Mapping[int, Sequence[str]], abort: Mapping[int, Sequence[str]], now: float
    ) -> Answers[Verdicts]:
        """Commit some reservations and abort others in one round: per shard, the commit verdicts."""
        return self.client.settle(commit, abort, now)

    def commit(self, rids: Sequence[str], now: float, shards: Sequence[int] | None = None) -> Answers[Verdicts]:
        return self.client.commit({sid: rids for sid in (self.ids if shards is None else shards)}, now)

    def abort(self, rids: Sequence[str], shards: Sequence[int] | None = None) -> Answers[Verdicts]:
        if not rids:
            return Answers({})
        return self.client.abort({sid: rids for sid in (self.ids if shards is None else shards)})

    def expire(self, now: float) -> Answers[list[str]]:
        return self.client.expire(self.ids, now)

    def expire_later(self, now: float) -> None:
        """Expire what is past its deadline at ``now``, with each shard's next batch."""
        self.client.ride_along(dict.fromkeys(self.ids, Expire(now)))

    def describe(self) -> Answers[ShardInfo]:
        return self.client.describe(self.ids)

    # ------------------------------------------------------------------ failure
    def recover(self, model: ClusterModel) -> list[int]:
        """Replace every shard that is down with a fresh one loaded from ``model``; the ones
        that came back. Whatever they had prepared is gone with them (treated as aborted)."""
        back = []
        for sid in sorted(self.client.down):
            names = {n for n, owner in self.owner.items() if owner == sid and n in model.nodes}
            nodes = tuple(model.nodes[n] for n in sorted(names))
            pods = tuple(p for p in model.pods.values() if p.node in names)
            devices, holds = model.dra.state_of(names)
            if self.client.reload(sid, nodes, pods, tuple(devices), tuple(holds)):
                back.append(sid)
        return back

    # ------------------------------------------------------------------ scaling
    def resize(self, count: int) -> int:
        """Add or remove shards; nodes move with their state. Returns how many nodes moved."""
        self.flush()
        before = self.ids
        after = list(range(count))
        for sid in after:
            if sid not in before:
                self.client.add(sid)
        moves = partitioner.moves(list(self.owner), before, after)
        by_pair: dict[tuple[int, int], list[str]] = defaultdict(list)
        for node, pair in moves.items():
            by_pair[pair].append(node)
        for (old, new), names in sorted(by_pair.items()):
            handover = self.client.hand_over(old, sorted(names))
            self.client.take_over(new, handover)
            for name in names:
                self.owner[name] = new
        for sid in before:
            if sid not in after:
                self.client.remove(sid)
        return len(moves)
