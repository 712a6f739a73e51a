"""The one typed client through which the coordinator reaches its shards.

Every call to a shard goes through ``ShardClient``: its methods take and return the typed
messages of ``shards.protocol`` and ``shards.messages``, and under them each round is one
``Batch`` per shard handed to a ``ShardTransport``. ``InProcessTransport`` delivers batches
to plain ``Shard`` objects (tests, ``kai-ray schedule``); ``kai_ray.app.actors.RayTransport``
delivers the same batches to shard actors, all at once. A test wraps a transport to fail
any delivery it likes: the client is the only thing that would notice.

Cluster changes for a shard are numbered and queued; each round carries what is still
unacknowledged, in order, ahead of the round's request, and only the shard's reply (how far
it has applied) takes them off the queue. A request whose answer nobody waits for (the expiry
sweep) rides the same way, once, ahead of the next round's request, instead of costing a
round trip of its own. A shard that does not answer is reported down and
is not contacted again until ``reload`` has put a fresh one, rebuilt from the coordinator's
model, in its place: the changes it never acknowledged are part of that model.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, cast

from kai_ray.model import Node, Pod, Topology
from placement.rows import NodeHolds, NodeRows
from placement.topology_domains import DomainReport
from shards.handover import ShardHandover
from shards.messages import ClaimHold, NodeDevices, PrepareItem, PrepareReply, RowChanges, ShardDeltas
from shards.protocol import (
    Abort,
    ApplyDeltas,
    Batch,
    BatchReply,
    Changes,
    Commit,
    Describe,
    Domains,
    Expire,
    HandOver,
    HoldsOf,
    Load,
    Prepare,
    Round,
    RowsOf,
    Settle,
    ShardDown,
    ShardInfo,
    ShardRequest,
    StaleEpoch,
    TakeOver,
)
from shards.shard import Shard
from shards.stream_messages import RoundReply, RoundRequest, SettleReply, SettleRequest

R = TypeVar("R")


class ShardTransport(Protocol):
    """Delivers batches to shards; the only thing that knows where shards live."""

    remote: bool  # shards in other processes (their CPU time is not this process's)

    def shard_ids(self) -> list[int]: ...

    def exchange(self, batches: Mapping[int, Batch]) -> dict[int, BatchReply | ShardDown]:
        """Each batch to its shard, all at once where the backend can. A shard that does not
        answer (or fails the batch) comes back as ``ShardDown``; nothing is raised."""
        ...

    def replace(self, shard_id: int) -> None:
        """A fresh, empty shard in place of one that is down."""
        ...

    def add(self, shard_id: int) -> None: ...

    def remove(self, shard_id: int) -> None: ...


class InProcessTransport:
    """Plain ``Shard`` objects in this process. A shard whose batch raises is reported down
    (its state may be half-changed), exactly as a failed actor would be."""

    remote = False

    def __init__(self, shards: Sequence[Shard]) -> None:
        self.shards = {s.shard_id: s for s in shards}
        self._policy = shards[0].policy if shards else None
        self._ttl = shards[0].ttl if shards else 30.0

    def shard_ids(self) -> list[int]:
        return sorted(self.shards)

    def exchange(self, batches: Mapping[int, Batch]) -> dict[int, BatchReply | ShardDown]:
        out: dict[int, BatchReply | ShardDown] = {}
        for sid, batch in batches.items():
            try:
                out[sid] = self.shards[sid].handle(batch)
            except Exception as error:  # noqa: BLE001 - a failed batch leaves the shard suspect: it is replaced
                out[sid] = ShardDown(sid, f"{type(error).__name__}: {error}")
        return out

    def replace(self, shard_id: int) -> None:
        self.shards[shard_id] = Shard(shard_id, self._policy, self._ttl)

    def add(self, shard_id: int) -> None:
        self.replace(shard_id)

    def remove(self, shard_id: int) -> None:
        del self.shards[shard_id]


@dataclass(frozen=True, slots=True)
class Answers(Generic[R]):
    """What the shards of one round said, and which of them did not answer."""

    replies: dict[int, R]
    down: frozenset[int] = frozenset()


class ShardClient:
    def __init__(self, transport: ShardTransport, epoch: int | None = None) -> None:
        self.transport = transport
        # Reservation ids and batches carry the epoch; a restarted coordinator gets a newer one.
        self.epoch = time.time_ns() if epoch is None else epoch
        self.calls = 0  # batches sent, for metrics and tests of batching
        self.shard_cpu = 0.0  # CPU seconds the shards report for our batches
        self.down: set[int] = set()  # shards that failed and are not reloaded yet
        self._outbox: dict[int, list[tuple[int, ShardDeltas]]] = {}
        self._seq: dict[int, int] = {}
        self._riders: dict[int, list[ShardRequest]] = {}  # sent once with the next batch, replies dropped

    def shard_ids(self) -> list[int]:
        return self.transport.shard_ids()

    # ------------------------------------------------------------------ changes
    def queue(self, shard_id: int, deltas: ShardDeltas) -> None:
        seq = self._seq.get(shard_id, 0) + 1
        self._seq[shard_id] = seq
        self._outbox.setdefault(shard_id, []).append((seq, deltas))

    def unacknowledged(self, shard_id: int) -> int:
        return len(self._outbox.get(shard_id, ()))

    def ride_along(self, requests: Mapping[int, ShardRequest]) -> None:
        """Send each request with its shard's next batch, after the queued changes; its reply is
        dropped (a shard that fails it fails that batch). One of a kind is kept per shard: a
        newer one replaces one not sent yet."""
        for sid, request in requests.items():
            queued = [r for r in self._riders.get(sid, []) if type(r) is not type(request)]
            self._riders[sid] = [*queued, request]

    def heartbeat(self) -> Answers[list[object]]:
        return self._round({sid: [] for sid in self.shard_ids()})

    def flush(self) -> frozenset[int]:
        """Deliver every queued change now; the shards that did not take them."""
        return self._round({sid: [] for sid, queued in self._outbox.items() if queued}).down

    # ------------------------------------------------------------------ rounds
    def _round(self, requests: Mapping[int, Sequence[ShardRequest]]) -> Answers[list[object]]:
        """One batch per shard named: its unacknowledged changes, then ``requests``."""
        batches: dict[int, Batch] = {}
        queued: dict[int, int] = {}
        for sid, asked in requests.items():
            if sid in self.down:
                continue
            changes = tuple(ApplyDeltas(seq, deltas) for seq, deltas in self._outbox.get(sid, ()))
            riders = tuple(self._riders.pop(sid, ()))
            queued[sid] = len(changes) + len(riders)
            batches[sid] = Batch(self.epoch, changes + riders + tuple(asked))
        self.calls += len(batches)
        results = self.transport.exchange(batches) if batches else {}
        replies: dict[int, list[object]] = {}
        down = {sid for sid in requests if sid in self.down}
        for sid, result in results.items():
            if isinstance(result, ShardDown):
                self.down.add(sid)
                down.add(sid)
                continue
            self.shard_cpu += result.cpu
            if result.stale:
                raise StaleEpoch(f"shard {sid} serves a newer coordinator (epoch {result.epoch} > {self.epoch})")
            outbox = self._outbox.get(sid)
            if outbox:
                self._outbox[sid] = [(seq, d) for seq, d in outbox if seq > result.applied_seq]
            replies[sid] = list(result.replies[queued[sid] :])
        return Answers(replies, frozenset(down))

    def _each(self, requests: Mapping[int, ShardRequest]) -> Answers[object]:
        """One request per shard; each shard's reply to it (the reply types are the protocol's)."""
        answers = self._round({sid: [request] for sid, request in requests.items()})
        return Answers({sid: reply[0] for sid, reply in answers.replies.items()}, answers.down)

    def rows(self, shards: Sequence[int], names: tuple[str, ...] | None = None) -> Answers[NodeRows]:
        return cast(Answers[NodeRows], self._each({sid: RowsOf(names) for sid in shards}))

    def holds(self, shards: Sequence[int]) -> Answers[NodeHolds]:
        return cast(Answers[NodeHolds], self._each(dict.fromkeys(shards, HoldsOf())))

    def domains(self, shards: Sequence[int], topologies: Sequence[Topology]) -> Answers[list[DomainReport]]:
        asked = Domains(tuple(topologies))
        return cast(Answers[list[DomainReport]], self._each({sid: asked for sid in shards}))

    def changes(self, since: Mapping[int, tuple[int, int]]) -> Answers[RowChanges]:
        """Rows changed per shard since (incarnation, stamp)."""
        return cast(Answers[RowChanges], self._each({sid: Changes(s, i) for sid, (i, s) in since.items()}))

    def changes_after(
        self, before: Mapping[int, ShardRequest], since: Mapping[int, tuple[int, int]]
    ) -> Answers[tuple[object, RowChanges]]:
        """Per shard, ``before[sid]`` and then the rows changed since (incarnation, stamp), in one round."""
        requests: dict[int, list[ShardRequest]] = {}
        for sid, (incarnation, stamp) in since.items():
            first = before.get(sid)
            requests[sid] = ([first] if first is not None else []) + [Changes(stamp, incarnation)]
        answers = self._round(requests)
        out = {
            sid: (replies[0] if len(replies) == 2 else None, cast(RowChanges, replies[-1]))
            for sid, replies in answers.replies.items()
        }
        return Answers(out, answers.down)

    def rounds(self, requests: Mapping[int, RoundRequest]) -> Answers[RoundReply]:
        return cast(Answers[RoundReply], self._each({sid: Round(r) for sid, r in requests.items()}))

    def settle_all(self, requests: Mapping[int, SettleRequest]) -> Answers[SettleReply]:
        return cast(Answers[SettleReply], self._each({sid: Settle(r) for sid, r in requests.items()}))

    def prepare(self, items: Mapping[int, Sequence[PrepareItem]], now: float) -> Answers[PrepareReply]:
        return cast(Answers[PrepareReply], self._each({sid: Prepare(tuple(b), now) for sid, b in items.items()}))

    def commit(self, rids: Mapping[int, Sequence[str]], now: float) -> Answers[dict[str, bool]]:
        return cast(Answers[dict[str, bool]], self._each({sid: Commit(tuple(i), now) for sid, i in rids.items()}))

    def settle(
        self, commit: Mapping[int, Sequence[str]], abort: Mapping[int, Sequence[str]], now: float
    ) -> Answers[dict[str, bool]]:
        """Commit some reservations and abort others in one round; per shard, its commit answers."""
        requests: dict[int, list[ShardRequest]] = {}
        for sid, rids in commit.items():
            if rids:
                requests.setdefault(sid, []).append(Commit(tuple(rids), now))
        for sid, rids in abort.items():
            if rids:
                requests.setdefault(sid, []).append(Abort(tuple(rids)))
        answers = self._round(requests)
        verdicts = {
            sid: cast(dict[str, bool], replies[0]) if commit.get(sid) else {}
            for sid, replies in answers.replies.items()
        }
        return Answers(verdicts, answers.down)

    def abort(self, rids: Mapping[int, Sequence[str]]) -> Answers[dict[str, bool]]:
        return cast(Answers[dict[str, bool]], self._each({sid: Abort(tuple(i)) for sid, i in rids.items()}))

    def expire(self, shards: Sequence[int], now: float) -> Answers[list[str]]:
        return cast(Answers[list[str]], self._each({sid: Expire(now) for sid in shards}))

    def describe(self, shards: Sequence[int]) -> Answers[ShardInfo]:
        return cast(Answers[ShardInfo], self._each({sid: Describe() for sid in shards}))

    def hand_over(self, shard_id: int, names: Sequence[str]) -> ShardHandover:
        return cast(ShardHandover, self._one(shard_id, HandOver(tuple(names))))

    def take_over(self, shard_id: int, handover: ShardHandover) -> None:
        self._one(shard_id, TakeOver(handover))

    def _one(self, shard_id: int, request: ShardRequest) -> object:
        answers = self._each({shard_id: request})
        if shard_id in answers.down:
            raise ShardDown(shard_id)
        return answers.replies[shard_id]

    # ------------------------------------------------------------------ membership
    def reload(
        self,
        shard_id: int,
        nodes: tuple[Node, ...],
        pods: tuple[Pod, ...],
        devices: tuple[NodeDevices, ...] = (),
        claims: tuple[ClaimHold, ...] = (),
    ) -> bool:
        """Put a fresh shard in place of ``shard_id`` and load it with these nodes and pods (the
        coordinator's model, which includes every change still queued for it). True when it took them."""
        self.transport.replace(shard_id)
        self.down.discard(shard_id)
        seq = self._seq.get(shard_id, 0)
        self._outbox[shard_id] = []
        return shard_id not in self._round({shard_id: [Load(seq, nodes, pods, devices, claims)]}).down

    def add(self, shard_id: int) -> None:
        self.transport.add(shard_id)

    def remove(self, shard_id: int) -> None:
        self.transport.remove(shard_id)
        self.down.discard(shard_id)
        self._outbox.pop(shard_id, None)
        self._seq.pop(shard_id, None)
        self._riders.pop(shard_id, None)
