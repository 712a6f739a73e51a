"""Two-phase reservations on a shard: capacity for placements the coordinator chose.

``prepare`` holds every placement of a reservation or none of them, re-checking each against
what the shard holds now; ``commit`` turns a prepared reservation into placed pods if its
deadline has not passed; ``abort`` and ``expire`` give the capacity back. A mixin of ``Shard``.
"""

from __future__ import annotations

import numpy as np

from kai_ray.model import ResourceVector
from placement.holdings import Holding, Kind
from placement.node_table import NodeTable
from placement.shapes import GPU
from shards.dra_claims import release_claims, take_claims
from shards.messages import Placement, PrepareItem, PrepareReply
from shards.reservations import Reservation, ReservationBook, ReservationState

TOLERANCE = 1e-6


class TwoPhase:
    shard_id: int
    table: NodeTable
    pods: dict[str, Holding]
    book: ReservationBook
    ttl: float
    epoch: int
    claim_holds: dict[str, list[str]]  # prepared reservation -> DRA claims it allocated

    def _ensure_schema(self, vectors: list[ResourceVector]) -> None:
        raise NotImplementedError

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
            claims: list[str] = []
            problem = ""
            for placement in item.placements:
                problem = self._check_and_hold(placement, holdings) or take_claims(self.table, placement, claims)
                if problem:
                    break
            if problem:
                for holding in reversed(holdings):
                    self.table.release(holding)
                release_claims(self.table, claims)
                refused[item.rid] = problem
                continue
            if claims:
                self.claim_holds[item.rid] = claims
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
        problem = self._overcommit(holding, before_idle, before_future, not placement.pipelined)
        if problem:
            return f"node {placement.node}: {problem} for pod {placement.pod}"
        return ""

    def _overcommit(self, holding: Holding, before_idle: np.ndarray, before_future: np.ndarray, now: bool) -> str:
        """A column pushed below zero by this hold, or a shared GPU it joined now over-full.
        Deficits that were there before (a shared GPU the kubelet over-filled, say) are not
        blamed on it: a whole-GPU pod on another free device of the node must still fit."""
        table = self.table
        row = holding.node
        views = [("free", table.idle[row], before_idle)] if now else []
        views.append(("free once releasing pods finish", table.future[row], before_future))
        names = ["cpu", "memory", "gpu", "pods", *table.schema.scalars]
        for label, after, before in views:
            worse = (after < -TOLERANCE) & (after < before - TOLERANCE)
            if worse.any():
                column = int(np.flatnonzero(worse)[0])
                return f"not enough {names[column]} {label}"
        device = int(table.gpu_mem[row])
        for gid, _ in holding.shares:
            usage = table.groups[row][gid]
            if usage.active + usage.pipelined > device or usage.active + usage.releasing > device:
                return f"shared GPU {gid} is full"
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
                self.claim_holds.pop(rid, None)  # the claims stay allocated, as the binder will write
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
        for reservation in self.book.due(now):
            self._release(reservation)
            self.book.resolve(reservation, ReservationState.EXPIRED)
            gone.append(reservation.rid)
        return gone

    def _release(self, reservation: Reservation) -> None:
        for holding in reversed(reservation.holdings):
            self.table.release(holding)
        release_claims(self.table, self.claim_holds.pop(reservation.rid, []))

    def reservation_state(self, rid: str) -> str | None:
        reservation = self.book.get(rid)
        return None if reservation is None else reservation.state.value
