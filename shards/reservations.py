"""Two-phase reservations: capacity held for a gang between prepare and commit/abort.

A reservation moves PREPARED -> COMMITTED or PREPARED -> ABORTED / EXPIRED exactly once.
Commit and abort are idempotent: repeating the same verb answers True again; the other
verb on a resolved reservation answers False. Resolved reservations are remembered for a
while so late or repeated calls get a consistent answer.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from dataclasses import dataclass, field

from shards.node_table import Holding

REMEMBER_RESOLVED = 100_000


class ReservationState(enum.Enum):
    PREPARED = "prepared"
    COMMITTED = "committed"
    ABORTED = "aborted"
    EXPIRED = "expired"


@dataclass(slots=True)
class Reservation:
    rid: str
    deadline: float
    holdings: list[Holding] = field(default_factory=list)
    state: ReservationState = ReservationState.PREPARED
    epoch: int = 0  # of the coordinator that prepared it


class ReservationBook:
    """Every reservation a shard has seen, prepared ones first in line for expiry."""

    def __init__(self) -> None:
        self._all: OrderedDict[str, Reservation] = OrderedDict()

    def get(self, rid: str) -> Reservation | None:
        return self._all.get(rid)

    def add(self, reservation: Reservation) -> None:
        self._all[reservation.rid] = reservation
        self._forget_old()

    def prepared(self) -> list[Reservation]:
        return [r for r in self._all.values() if r.state is ReservationState.PREPARED]

    def resolve(self, reservation: Reservation, state: ReservationState) -> None:
        reservation.state = state
        self._all.move_to_end(reservation.rid)

    def _forget_old(self) -> None:
        if len(self._all) <= REMEMBER_RESOLVED:
            return
        for rid in list(self._all):
            if len(self._all) <= REMEMBER_RESOLVED:
                return
            if self._all[rid].state is not ReservationState.PREPARED:
                del self._all[rid]
