"""What a shard's reservation book remembers once a reservation is resolved."""

from __future__ import annotations

import numpy as np

from placement.holdings import Holding, Kind
from shards.reservations import Reservation, ReservationBook, ReservationState


def _prepared(rid: str) -> Reservation:
    return Reservation(rid, 100.0, [Holding(f"ns/{rid}-pod", 0, Kind.ACTIVE, np.ones(5))])


def test_a_resolved_reservation_is_remembered_by_its_answer_alone() -> None:
    # A late or repeated commit or abort needs the answer; the holdings went to the pods (or
    # back to the nodes) when it was resolved, and kept here they outlive those pods.
    book = ReservationBook(remember=2)
    for rid, state in (("r1", ReservationState.COMMITTED), ("r2", ReservationState.ABORTED)):
        reservation = _prepared(rid)
        book.add(reservation)
        book.resolve(reservation, state)
    remembered = [book.get(rid) for rid in ("r1", "r2")]
    assert [(r.state, r.holdings) for r in remembered if r is not None] == [
        (ReservationState.COMMITTED, []),
        (ReservationState.ABORTED, []),
    ]
    third = _prepared("r3")
    book.add(third)
    book.resolve(third, ReservationState.EXPIRED)
    assert book.get("r1") is None and len(book) == 2  # the oldest answer is forgotten first
