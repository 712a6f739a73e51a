"""Two-phase reservations: capacity held for a gang between prepare and commit/abort.

A reservation moves PREPARED -> COMMITTED or PREPARED -> ABORTED / EXPIRED exactly once.
Commit and abort are idempotent: repeating the same verb answers True again; the other
verb on a resolved reservation answers False. Resolved reservations are remembered for a
while so late or repeated calls get a consistent answer.

Every operation of the book is O(1) (O(log n) for the deadline heap), whatever it
remembers: prepared reservations sit in their own map with a heap of deadlines, resolved
ones in insertion order, the oldest forgotten first.
"""

from __future__ import annotations

import enum
import heapq
from collections import OrderedDict
from dataclasses import dataclass, field

from placement.holdings import Holding

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
    """Every reservation a shard has seen recently: the open ones, and the resolved ones it remembers."""

    def __init__(self, remember: int = REMEMBER_RESOLVED) -> None:
        self.remember = remember
        self._prepared: dict[str, Reservation] = {}
        self._resolved: OrderedDict[str, Reservation] = OrderedDict()
        self._deadlines: list[tuple[float, int, str]] = []  # prepared ones; entries of resolved ones go stale
        self._seq = 0

    def __len__(self) -> int:
        return len(self._prepared) + len(self._resolved)

    def get(self, rid: str) -> Reservation | None:
        found = self._prepared.get(rid)
        return found if found is not None else self._resolved.get(rid)

    def add(self, reservation: Reservation) -> None:
        if reservation.state is ReservationState.PREPARED:
            self._prepared[reservation.rid] = reservation
            self._seq += 1
            heapq.heappush(self._deadlines, (reservation.deadline, self._seq, reservation.rid))
            if len(self._deadlines) > 2 * len(self._prepared) + 1024:  # mostly stale entries: start over
                self._deadlines = [(r.deadline, i, r.rid) for i, r in enumerate(self._prepared.values())]
                heapq.heapify(self._deadlines)
        else:
            self._remember(reservation)

    def prepared(self) -> list[Reservation]:
        return list(self._prepared.values())

    def open_count(self) -> int:
        return len(self._prepared)

    def due(self, now: float) -> list[Reservation]:
        """Prepared reservations whose deadline is before ``now``, soonest first."""
        out = []
        heap = self._deadlines
        while heap and heap[0][0] < now:
            deadline, _, rid = heapq.heappop(heap)
            reservation = self._prepared.get(rid)
            if reservation is not None and reservation.deadline == deadline:
                out.append(reservation)
        return out

    def resolve(self, reservation: Reservation, state: ReservationState) -> None:
        """The reservation is committed, aborted or expired; its holdings were moved to its pods
        or released by the caller. Only its answer is remembered: kept, the holdings (each with
        its vector) outlived the pods they held for, up to ``remember`` reservations' worth."""
        reservation.state = state
        reservation.holdings = []
        self._prepared.pop(reservation.rid, None)
        self._remember(reservation)

    def _remember(self, reservation: Reservation) -> None:
        self._resolved[reservation.rid] = reservation
        self._resolved.move_to_end(reservation.rid)
        while len(self._resolved) > self.remember:
            self._resolved.popitem(last=False)
