"""One shard: a partition of the cluster's nodes, what runs on them, and reservations.

A plain class: tests drive it in-process; ``kai_ray.actors`` turns it into a Ray actor.
The coordinator reaches it through ``handle`` only (``shards.protocol``): one batch of typed
requests per round trip. The methods behind it are plain and tests call them directly.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from kai_ray.model import Node, Pod, ResourceVector
from shards.handover import ShardHandover, give_nodes, take_nodes
from shards.messages import Placement, PrepareItem, PrepareReply, ProposeReply, ProposeRequest, ShardDeltas
from shards.node_table import Holding, Kind, NodeTable
from shards.placement import PlacementPolicy, Placer
from shards.pod_holds import pod_hold
from shards.protocol import (
    Abort,
    ApplyDeltas,
    Batch,
    BatchReply,
    Commit,
    Describe,
    Expire,
    HandOver,
    Load,
    Prepare,
    Propose,
    Rows,
    ShardInfo,
    ShardRequest,
    TakeOver,
)
from shards.reservations import Reservation, ReservationBook, ReservationState
from shards.rows import NodeRows, export_rows
from shards.shapes import CPU, GPU, MEMORY, PODS, ResourceSchema

TOLERANCE = 1e-6


class Shard:
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
        self._reset(schema or ResourceSchema())

    def _reset(self, schema: ResourceSchema) -> None:
        self.table = NodeTable(schema)
        self.placer = Placer(self.table, self.policy)
        self.pods: dict[str, Holding] = {}  # what each placed pod holds here
        self.book = ReservationBook()

    # ------------------------------------------------------------------ the protocol
    def handle(self, batch: Batch) -> BatchReply:
        """One round trip: every request of the batch, in order."""
        if batch.epoch < self.epoch:
            return BatchReply(self.applied_seq, stale=True, epoch=self.epoch)
        if batch.epoch > self.epoch:
            self._new_epoch(batch.epoch)
        replies = tuple(self._serve(request) for request in batch.requests)
        return BatchReply(self.applied_seq, replies, epoch=self.epoch)

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
            case Load(seq=seq, nodes=nodes, pods=pods):
                self.load(nodes, pods)
                self.applied_seq = seq
                return None
            case Propose(request=propose):
                return self.propose(propose)
            case Rows(names=names):
                return self.rows(None if names is None else list(names))
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

    def load(self, nodes: tuple[Node, ...], pods: tuple[Pod, ...]) -> None:
        """Start over with these nodes and placed pods (reservations are gone with the old state)."""
        self._reset(ResourceSchema())
        self.apply(ShardDeltas(nodes_upserted=nodes, pods_upserted=pods))

    def describe(self) -> ShardInfo:
        return ShardInfo(
            self.shard_id,
            os.getpid(),
            int(self.table.present.sum()),
            len(self.pods),
            len(self.book.prepared()),
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
        for name in deltas.nodes_removed:
            if name in self.table.index:
                self.table.remove_node(name)
        for pod in deltas.pods_upserted:
            self._place_pod(pod)
        for key in deltas.pods_removed:
            self._drop_pod(key)

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
        for reservation in self.book.prepared():
            reservation.holdings = [relaid(holding) for holding in reservation.holdings]

    def _place_pod(self, pod: Pod) -> None:
        hold = pod_hold(self.table, pod)
        current = self.pods.get(pod.key)
        if hold is None:
            if current is not None and pod.node is None and pod.state.value == "Pending":
                self._drop_pod(pod.key)  # a failed bind: the pod is pending again
            elif current is not None and (pod.node is None or pod.node not in self.table.index):
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

    # ------------------------------------------------------------------ propose
    def propose(self, request: ProposeRequest) -> ProposeReply:
        """For each shape, this shard's best nodes in the exact order a session would use."""
        table = self.table
        picked: set[int] = set()
        ranked: list[tuple[str, ...]] = []
        for shape in request.shapes:
            fit = self.placer.fit(shape)
            rows = np.flatnonzero(fit.future)
            if len(rows):
                band, placement = self.placer.rank_keys(shape, fit, rows)
                order = np.lexsort((table.name_rank[rows], -placement, -band))[: request.candidates_per_shape]
                rows = rows[order]
            picked.update(int(r) for r in rows)
            ranked.append(tuple(table.names[r] for r in rows))
        sent = np.zeros(len(table), dtype=bool)
        sent[list(picked)] = True
        diagnoses = tuple(self.placer.diagnose(shape, exclude=sent) for shape in request.shapes)
        return ProposeReply(export_rows(table, sorted(picked)), tuple(ranked), self.totals(), len(table), diagnoses)

    def totals(self) -> tuple[float, float, float]:
        usable = self.table.present & self.table.ready
        alloc = self.table.alloc[usable]
        return float(alloc[:, GPU].sum()), float(alloc[:, CPU].sum()), float(alloc[:, MEMORY].sum())

    def rows(self, names: list[str] | None = None) -> NodeRows:
        """Current state of some (default: all present) nodes."""
        table = self.table
        if names is None:
            wanted = np.flatnonzero(table.present)
        else:
            wanted = np.array([table.index[n] for n in names if n in table.index], dtype=np.int64)
        return export_rows(table, wanted)

    # ------------------------------------------------------------------ two-phase commit
    def prepare(self, items: list[PrepareItem], now: float) -> PrepareReply:
        """Hold capacity for each reservation, all its placements or none of them."""
        self.expire(now)
        # Widen before anything is held: holdings made earlier in this call would keep the old layout.
        self._ensure_schema([p.requests for item in items for p in item.placements])
        held: list[str] = []
        refused: dict[str, str] = {}
        for item in items:
            existing = self.book.get(item.rid)
            if existing is not None:
                if existing.state is ReservationState.PREPARED:
                    held.append(item.rid)  # a retried prepare
                else:
                    refused[item.rid] = f"reservation already {existing.state.value}"
                continue
            holdings: list[Holding] = []
            problem = ""
            for placement in item.placements:
                problem = self._check_and_hold(placement, holdings)
                if problem:
                    break
            if problem:
                for holding in reversed(holdings):
                    self.table.release(holding)
                refused[item.rid] = problem
                continue
            self.book.add(Reservation(item.rid, now + self.ttl, holdings, epoch=self.epoch))
            held.append(item.rid)
        return PrepareReply(tuple(held), refused)

    def _check_and_hold(self, placement: Placement, holdings: list[Holding]) -> str:
        table = self.table
        row = table.index.get(placement.node)
        if row is None or not table.present[row]:
            return f"node {placement.node} is not in shard {self.shard_id}"
        vector = table.schema.vector(placement.requests)
        if placement.share is not None:
            vector[GPU] = 0.0
        before_idle, before_future = table.idle[row].copy(), table.future[row].copy()
        kind = Kind.PIPELINED if placement.pipelined else Kind.ACTIVE
        holding = table.hold(placement.pod, row, kind, vector, placement.shares, placement.create)
        holdings.append(holding)
        problem = self._overcommit(row, before_idle, before_future, not placement.pipelined)
        if problem:
            return f"node {placement.node}: {problem} for pod {placement.pod}"
        return ""

    def _overcommit(self, row: int, before_idle: np.ndarray, before_future: np.ndarray, now: bool) -> str:
        """A column pushed below zero by this hold (pre-existing deficits are not blamed on it)."""
        table = self.table
        views = [("free", table.idle[row], before_idle)] if now else []
        views.append(("free once releasing pods finish", table.future[row], before_future))
        names = ["cpu", "memory", "gpu", "pods", *table.schema.scalars]
        for label, after, before in views:
            worse = (after < -TOLERANCE) & (after < before - TOLERANCE)
            if worse.any():
                column = int(np.flatnonzero(worse)[0])
                return f"not enough {names[column]} {label}"
        device = int(table.gpu_mem[row])
        for gid, usage in table.groups[row].items():
            if usage.active + usage.pipelined > device or usage.active + usage.releasing > device:
                return f"shared GPU {gid} is full"
        if table.future[row, PODS] < -TOLERANCE:
            return "no free pod slot"
        return ""

    def commit(self, rids: list[str], now: float) -> dict[str, bool]:
        """Prepared reservations become assumed pods; True also for ones already committed.
        A reservation whose deadline passed is expired instead (its capacity was promised only
        until then) and answers False: its pods must not be bound."""
        out: dict[str, bool] = {}
        for rid in rids:
            reservation = self.book.get(rid)
            if reservation is None:
                out[rid] = False
                continue
            if reservation.state is ReservationState.PREPARED and reservation.deadline < now:
                self._release(reservation)
                self.book.resolve(reservation, ReservationState.EXPIRED)
            if reservation.state is ReservationState.PREPARED:
                for holding in reservation.holdings:
                    previous = self.pods.pop(holding.pod, None)
                    if previous is not None:
                        self.table.release(previous)
                    self.pods[holding.pod] = holding
                self.book.resolve(reservation, ReservationState.COMMITTED)
            out[rid] = reservation.state is ReservationState.COMMITTED
        return out

    def abort(self, rids: list[str]) -> dict[str, bool]:
        """Release prepared reservations; True also for ones already aborted, expired or unknown."""
        out: dict[str, bool] = {}
        for rid in rids:
            reservation = self.book.get(rid)
            if reservation is None:
                out[rid] = True
                continue
            if reservation.state is ReservationState.PREPARED:
                self._release(reservation)
                self.book.resolve(reservation, ReservationState.ABORTED)
            out[rid] = reservation.state is not ReservationState.COMMITTED
        return out

    def expire(self, now: float) -> list[str]:
        """Release prepared reservations nobody resolved in time; their ids."""
        gone = []
        for reservation in self.book.prepared():
            if reservation.deadline < now:
                self._release(reservation)
                self.book.resolve(reservation, ReservationState.EXPIRED)
                gone.append(reservation.rid)
        return gone

    def _release(self, reservation: Reservation) -> None:
        for holding in reversed(reservation.holdings):
            self.table.release(holding)

    def reservation_state(self, rid: str) -> str | None:
        reservation = self.book.get(rid)
        return None if reservation is None else reservation.state.value

    # ------------------------------------------------------------------ rebalancing
    def hand_over(self, names: list[str]) -> ShardHandover:
        """Give nodes away with everything on them: pods' holds and reservations."""
        return take_nodes(self.table, self.pods, self.book, names)

    def take_over(self, handover: ShardHandover) -> None:
        # Columns the giver knows and we do not: widen first, so our own holdings are re-laid too.
        self._ensure_schema([handover.rows.schema.scalars_vector()])
        give_nodes(self.table, self.pods, self.book, handover)

    def node_names(self) -> list[str]:
        return [n for i, n in enumerate(self.table.names) if self.table.present[i]]


def _same_shares(a: tuple[tuple[str, int], ...], b: tuple[tuple[str, int], ...]) -> bool:
    return sorted(a) == sorted(b)
