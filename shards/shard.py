"""One shard: a partition of the cluster's nodes, what runs on them, and reservations.

A plain class: tests drive it in-process; ``kai_ray.app.actors`` turns it into a Ray actor.
The coordinator reaches it through ``handle`` only (``shards.protocol``): one batch of typed
requests per round trip. The methods behind it are plain and tests call them directly.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from kai_ray.model import Node, Pod, ResourceVector, Topology
from placement.holdings import Holding, Kind
from placement.node_table import NodeTable
from placement.placer import PlacementPolicy, Placer
from placement.pod_holds import pod_hold
from placement.rows import NodeRows, export_holds, export_rows
from placement.shapes import ResourceSchema
from placement.topology_domains import DomainCache, DomainReport
from shards.dra_claims import apply_dra
from shards.handover import ShardHandover, give_nodes, take_nodes
from shards.messages import ClaimHold, NodeDevices, RowChanges, ShardDeltas
from shards.proposal import Proposal, ProposalKeeper
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
    ShardInfo,
    ShardRequest,
    TakeOver,
)
from shards.reservations import ReservationBook, ReservationState
from shards.stream_messages import RoundReply, RoundRequest, SettleReply, SettleRequest, Taken
from shards.two_phase import TwoPhase
from shards.wire import pack_diagnoses

_INCARNATIONS = itertools.count(time.time_ns())  # unique per shard object, across replacements


class Shard(TwoPhase):
    def __init__(
        self,
        shard_id: int,
        policy: PlacementPolicy | None = None,
        reservation_ttl: float = 30.0,
        schema: ResourceSchema | None = None,
    ) -> None:
        self.shard_id = shard_id
        self.policy = policy or PlacementPolicy()
        self.ttl = reservation_ttl
        self.epoch = 0  # the newest coordinator epoch seen; reservations of older ones are void
        self.applied_seq = 0  # cluster changes numbered up to this one are applied
        self.incarnation = next(_INCARNATIONS)
        self._reset(schema or ResourceSchema())

    def _reset(self, schema: ResourceSchema) -> None:
        self.incarnation = next(_INCARNATIONS)  # a mirror of the old table must start over
        self.table = NodeTable(schema)
        self.placer = Placer(self.table, self.policy)
        self.pods: dict[str, Holding] = {}  # what each placed pod holds here
        self.book = ReservationBook()
        self.domain_cache = DomainCache(self.table)
        self.claim_holds: dict[str, list[str]] = {}  # prepared reservation -> DRA claims it allocated
        self.keeper = ProposalKeeper(self.table, self.placer)
        self.proposal: Proposal | None = None  # what this cycle placed and holds
        self.broken: set[str] = set()  # proposals whose holds a cluster change took away

    # ------------------------------------------------------------------ the protocol
    def handle(self, batch: Batch) -> BatchReply:
        """One round trip: every request of the batch, in order."""
        started = time.thread_time()
        if batch.epoch < self.epoch:
            return BatchReply(self.applied_seq, stale=True, epoch=self.epoch)
        if batch.epoch > self.epoch:
            self._new_epoch(batch.epoch)
        replies = tuple(self._serve(request) for request in batch.requests)
        return BatchReply(self.applied_seq, replies, epoch=self.epoch, cpu=time.thread_time() - started)

    def _serve(self, request: ShardRequest) -> object:
        match request:
            case ApplyDeltas(seq=seq, deltas=deltas):
                if seq <= self.applied_seq:
                    return None  # delivered before; only the acknowledgement was lost
                if seq != self.applied_seq + 1:
                    raise ValueError(f"shard {self.shard_id}: changes {self.applied_seq + 1}..{seq - 1} never arrived")
                self.apply(deltas)
                self.applied_seq = seq
                return None
            case Load(seq=seq, nodes=nodes, pods=pods, devices=devices, claims=claims):
                self.load(nodes, pods, devices, claims)
                self.applied_seq = seq
                return None
            case RowsOf(names=names):
                return self.rows(None if names is None else list(names))
            case HoldsOf():
                return export_holds(self.table)
            case Changes(stamp=stamp, incarnation=incarnation):
                return self.changes(stamp, incarnation)
            case Prepare(items=items, now=now):
                return self.prepare(list(items), now)
            case Commit(rids=rids, now=now):
                return self.commit(list(rids), now)
            case Abort(rids=rids):
                return self.abort(list(rids))
            case Expire(now=now):
                return self.expire(now)
            case HandOver(names=names):
                return self.hand_over(list(names))
            case TakeOver(handover=handover):
                self.take_over(handover)
                return None
            case Round(request=round_request):
                return self.place_round(round_request)
            case Settle(request=settle_request):
                return self.settle(settle_request)
            case Domains(topologies=topologies):
                return self.domains(topologies)
            case Describe():
                return self.describe()
        raise TypeError(f"shard {self.shard_id}: unknown request {type(request).__name__}")

    def _new_epoch(self, epoch: int) -> None:
        """A new coordinator took over: what older ones prepared will never be committed."""
        for reservation in list(self.book.prepared()):
            if reservation.epoch < epoch:
                self._release(reservation)
                self.book.resolve(reservation, ReservationState.ABORTED)
        self.epoch = epoch

    def load(
        self,
        nodes: tuple[Node, ...],
        pods: tuple[Pod, ...],
        devices: tuple[NodeDevices, ...] = (),
        claims: tuple[ClaimHold, ...] = (),
    ) -> None:
        """Start over with these nodes, placed pods and DRA devices and claims (reservations are
        gone with the old state)."""
        self._reset(ResourceSchema())
        self.apply(ShardDeltas(nodes_upserted=nodes, pods_upserted=pods, devices=devices, claims=claims))

    def describe(self) -> ShardInfo:
        return ShardInfo(
            self.shard_id,
            os.getpid(),
            int(self.table.present.sum()),
            len(self.pods),
            self.book.open_count(),
            self.epoch,
            self.applied_seq,
        )

    # ------------------------------------------------------------------ deltas
    def apply(self, deltas: ShardDeltas) -> None:
        self._ensure_schema([n.allocatable for n in deltas.nodes_upserted] + [p.requests for p in deltas.pods_upserted])
        known = set(self.table.index)
        self.table.add_nodes([n for n in deltas.nodes_upserted if n.name not in known])
        for node in deltas.nodes_upserted:
            if node.name in known:
                self.table.update_node(node)
        self._remove_nodes([name for name in deltas.nodes_removed if name in self.table.index])
        for pod in deltas.pods_upserted:
            self._place_pod(pod)
        for key in deltas.pods_removed:
            self._drop_pod(key)
        if deltas.devices or deltas.claims:
            apply_dra(self.table, deltas.devices, deltas.claims)

    def _remove_nodes(self, names: list[str]) -> None:
        """Kubernetes deletes a deleted node's pods (their own deletions may come later) and a
        reservation holding capacity there can no longer be committed: both go with the node."""
        if not names:
            return
        rows = {self.table.index[name] for name in names}
        if self.proposal is not None and any(e.row in rows for e in self.proposal.holdings_entries()):
            self._drop_proposal()
        for key in [k for k, holding in self.pods.items() if holding.node in rows]:
            self._drop_pod(key)
        for reservation in self.book.prepared():
            if any(holding.node in rows for holding in reservation.holdings):
                self._release(reservation)
                self.book.resolve(reservation, ReservationState.ABORTED)
        for name in names:
            self.table.remove_node(name)

    def _ensure_schema(self, vectors: list[ResourceVector]) -> None:
        names = {n for v in vectors for n in v.scalars} - set(self.table.schema.scalars)
        if names:
            old = self.table.schema
            self.table.widen(ResourceSchema(tuple(sorted(set(old.scalars) | names))))
            self._relay_holdings(old)

    def _relay_holdings(self, old: ResourceSchema) -> None:
        """Holdings carry vectors in the column layout they were made in; once the table has
        more columns they must be re-laid, or releasing one would subtract misaligned columns."""
        schema = self.table.schema

        def relaid(holding: Holding) -> Holding:
            return replace(holding, vector=schema.vector_from(holding.vector, old))

        self.pods = {key: relaid(holding) for key, holding in self.pods.items()}
        if self.proposal is not None:
            for entry in self.proposal.holdings_entries():
                entry.holding = relaid(entry.holding)
                entry.vector = schema.vector_from(entry.vector, old)
        for reservation in self.book.prepared():
            reservation.holdings = [relaid(holding) for holding in reservation.holdings]

    def _place_pod(self, pod: Pod) -> None:
        hold = pod_hold(self.table, pod)
        current = self.pods.get(pod.key)
        if hold is None:
            # Nothing held here any more: a failed bind (pending again), a pod gone to another
            # node, or one that finished (Succeeded/Failed keep their node but free it).
            if current is not None:
                self._drop_pod(pod.key)
            return
        if (
            current is not None
            and current.node == hold.row
            and current.kind is hold.kind
            and _same_shares(current.shares, hold.shares)
            and np.array_equal(current.vector, hold.vector)
        ):
            return  # e.g. the watch confirming a bind this shard already holds
        if current is not None:
            self._drop_pod(pod.key)
        # A shared GPU with a bound holder has its reservation pod, which takes a pod slot until
        # the last holder is gone, terminating ones included; a pipelined holder has none yet.
        create = tuple(g for g, _ in hold.shares if g not in self.table.groups[hold.row])
        self.pods[pod.key] = self.table.hold(
            pod.key, hold.row, hold.kind, hold.vector, hold.shares, create if hold.kind is not Kind.PIPELINED else ()
        )

    def _drop_pod(self, key: str) -> None:
        holding = self.pods.pop(key, None)
        if holding is not None:
            self.table.release(holding)

    def domains(self, topologies: Sequence[Topology]) -> list[DomainReport]:
        """This shard's nodes' domains in each Topology (the coordinator merges every shard's)."""
        return [self.domain_cache.report(topology) for topology in topologies]

    def rows(self, names: list[str] | None = None) -> NodeRows:
        """Current state of some (default: all present) nodes."""
        table = self.table
        if names is None:
            wanted = np.flatnonzero(table.present)
        else:
            wanted = np.array([table.index[n] for n in names if n in table.index], dtype=np.int64)
        return export_rows(table, wanted)

    def changes(self, stamp: int, incarnation: int) -> RowChanges:
        """What changed since a mirror of this shard last looked (everything, for a new mirror or
        one of another incarnation of this shard)."""
        table = self.table
        full = incarnation != self.incarnation or stamp > table.clock
        rows, removed = table.changed_since(-1 if full else stamp)
        table.forget_removed(stamp if not full else table.clock)
        return RowChanges(export_rows(table, rows), () if full else tuple(removed), table.clock, self.incarnation, full)

    # ------------------------------------------------------------------ proposals
    def _proposal(self, pid: str, now: float) -> Proposal:
        """This cycle's proposal; one of an earlier cycle is released first (that cycle is over)."""
        if pid in self.broken:
            raise RuntimeError(f"shard {self.shard_id}: proposal {pid} lost holds to a cluster change")
        current = self.proposal
        if current is not None and current.pid != pid:
            self.keeper.release_all(current)
            current = None
        if current is None:
            current = self.proposal = Proposal(pid, now + self.ttl)
        return current

    def place_round(self, request: RoundRequest) -> RoundReply:
        table = request.taken.table()
        self._ensure_schema([shape.request for shape in table])
        proposal = self._proposal(request.proposal, request.now)
        # The holds are promised for a TTL from the coordinator's latest round, not from its
        # first: a session that runs longer than the TTL while it keeps placing keeps them. A
        # settle renews nothing; it is judged against the deadline the rounds left.
        proposal.deadline = max(proposal.deadline, request.now + self.ttl)
        diagnoses = self._take(proposal, request.taken)
        shapes = tuple(table[i] for i in request.place.tolist())
        streams, conflicts = self.keeper.place(proposal, shapes, tuple(request.wanted.tolist()))
        return RoundReply(tuple(streams), np.array(conflicts, dtype=np.int64).reshape(-1, 2), diagnoses)

    def _take(self, proposal: Proposal, taken: Taken) -> bytes:
        """Release what the session did not take, pipeline what it pipelined, then diagnose."""
        self.keeper.keep(proposal, taken.keep_by_shape())
        self.keeper.pipeline(proposal, taken.pipelined_by_shape())
        table = taken.table()
        wanted = taken.diagnose.tolist()
        return pack_diagnoses({i: self.placer.diagnose(table[i]) for i in wanted}) if wanted else b""

    def settle(self, request: SettleRequest) -> SettleReply:
        """Commit the binds (all of them, or none once the proposal's deadline has passed)."""
        proposal = self._proposal(request.proposal, request.now)
        diagnoses = self._take(proposal, request.taken)
        binds = request.binds
        if proposal.deadline < request.now:  # too late: the capacity was promised only until then
            self.keeper.release_all(proposal)
            self.proposal = None
            return SettleReply(dict.fromkeys(binds.rids, False), diagnoses)
        refused = self.keeper.overrun(proposal, request.taken.table(), binds)
        for pod, rid in zip(binds.pods.tolist(), binds.rid.tolist(), strict=True):
            if binds.rids[rid] not in refused:
                previous = self.pods.pop(pod, None)
                if previous is not None:
                    self.table.release(previous)
        self.keeper.commit(proposal, request.taken.table(), binds, refused, self.pods)
        self.proposal = None
        return SettleReply({rid: rid not in refused for rid in binds.rids}, diagnoses)

    def _drop_proposal(self) -> None:
        if self.proposal is not None:
            self.keeper.release_all(self.proposal)
            self.broken.add(self.proposal.pid)
            self.proposal = None

    def expire(self, now: float) -> list[str]:
        if self.proposal is not None and self.proposal.deadline < now:
            self.keeper.release_all(self.proposal)
            self.proposal = None
        return super().expire(now)

    # ------------------------------------------------------------------ rebalancing
    def hand_over(self, names: list[str]) -> ShardHandover:
        """Give nodes away with everything on them: pods' holds and reservations. Shards are
        resized between cycles: a proposal still open belongs to a cycle that failed."""
        if self.proposal is not None:
            self.keeper.release_all(self.proposal)
            self.proposal = None
        return take_nodes(self.table, self.pods, self.book, names)

    def take_over(self, handover: ShardHandover) -> None:
        # Columns the giver knows and we do not: widen first, so our own holdings are re-laid too.
        self._ensure_schema([handover.rows.schema.scalars_vector()])
        give_nodes(self.table, self.pods, self.book, handover)

    def node_names(self) -> list[str]:
        return [n for i, n in enumerate(self.table.names) if self.table.present[i]]


def _same_shares(a: tuple[tuple[str, int], ...], b: tuple[tuple[str, int], ...]) -> bool:
    return sorted(a) == sorted(b)
