"""Reservations and backfill (beyond KAI; ``reservation`` in the config): a gang that has waited
long enough holds the nodes it will run on, and other jobs may take them only if they end before
the gang is projected to start. Registered under kai-ray's own name on the node-holds seam; the
rules are ``coordinator/reservation.py``. With the option off it holds nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from coordinator.jobs import Job
from coordinator.plugins.hooks import NodeHoldHook, NodeHolds
from coordinator.topology import Mask

if TYPE_CHECKING:
    from coordinator.reservation import Reservation
    from coordinator.session import SessionState

NAME = "reservation"


class ReservationHolds:
    """The reservations of one session, as the node-holds seam asks about them."""

    def __init__(self, state: SessionState, reservations: list[Reservation]) -> None:
        self.state = state
        self.reservations = reservations
        self.by_job = {r.job: r for r in reservations}

    def closed_to(self, job: Job) -> Mask | None:
        from coordinator.reservation import backfill_verdict

        closed: Mask | None = None
        for held in self.reservations:
            if held.job == job.key:
                continue
            rows = held.mask if backfill_verdict(self.state, job, held) else held.mask & ~held.backfillable
            closed = rows if closed is None else closed | rows
        return closed if closed is not None and bool(closed.any()) else None

    def refusal(self, job: Job, where: Mask) -> str:
        """Why ``job`` may not use the held rows in ``where`` (those it would have fitted)."""
        from coordinator.reservation import backfill_verdict, node_list

        parts = []
        for held in self.reservations:
            if held.job == job.key or not bool((held.mask & where).any()):
                continue
            why = backfill_verdict(self.state, job, held)
            if why is None:  # it may backfill, but not the nodes whose jobs have no expected end
                names = tuple(self.state.table.names[int(r)] for r in np.flatnonzero(held.mask & ~held.backfillable))
                why = f"nodes whose pods have no expected runtime take no backfill ({node_list(names)})"
            parts.append(f"capacity on nodes held for gang {held.job} is not for it: {why}")
        return "; ".join(parts)

    def holding(self, job: Job) -> str | None:
        held = self.by_job.get(job.key)
        return None if held is None else held.describe()


def _holds(state: SessionState) -> NodeHolds | None:
    # Imported here: the planner reads the session module, which loads the plugins.
    from coordinator.reservation import Planner, candidates

    gangs = candidates(state)
    if not gangs:
        return None  # the option is off, or no gang has waited long enough: nothing to copy
    state.every_node()  # free times and capacities are read off every node's row
    reservations = Planner(state).plan(gangs)
    return ReservationHolds(state, reservations) if reservations else None


def node_holds() -> NodeHoldHook:
    return NodeHoldHook(NAME, _holds)
