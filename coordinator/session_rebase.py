"""Moving a session onto another table: from no node's row (the shards placed) onto every node's.

The new table carries the cluster's usage already; each task learns its holdings on it, and what
the session placed itself so far is held again there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from coordinator.session import SessionState
from coordinator.session_open import grown_schema, make_placer
from coordinator.tasks import Status, moved_in_session
from placement.holdings import Holding, Kind
from placement.node_table import NodeTable
from placement.shapes import GPU

if TYPE_CHECKING:
    from coordinator.rounds import Pick


def rebase_session(state: SessionState, table: NodeTable, picks: Mapping[str, Pick] | None = None) -> None:
    """Move a session onto another table (e.g. onto all nodes). The new table carries the
    cluster's usage and, for pods placed from the shards' streams (``picks``), what the shards
    hold for them; what this session placed on its own table so far is held again on it."""
    old = state.table
    table.widen(grown_schema(table.schema, [old.schema.scalars_vector()]))
    # Tasks the session has not moved hold on the new table as their records say (its usage
    # includes them): that is one change of the shared ``PlacedHolds``. The others are told
    # what they hold there, from what they held on the old table, read before the move.
    moved = [(task, task.holdings) for task in moved_in_session(state.tasks.values())]
    state.placed_holds.move_to(table)
    for task, previous in moved:
        task.holdings = []
        pick = picks.get(task.key) if picks else None
        if pick is not None and task.node is not None:  # the shard's hold is in the rows already
            vector = table.schema.vector(task.pod.requests)
            if task.pod.gpu_share is not None:
                vector[GPU] = 0.0
            kind = Kind.PIPELINED if task.status is Status.PIPELINED else Kind.ACTIVE
            task.holdings.append(Holding(task.key, table.index[task.node], kind, vector, pick.shares, pick.create))
            continue
        for holding in previous:  # placed by this session: hold it again on the new table
            row = table.index[old.names[holding.node]]
            vector = table.schema.vector_from(holding.vector, old.schema)
            task.holdings.append(
                table.hold(holding.pod, row, holding.kind, vector, holding.shares, holding.created_groups)
            )
    _carry_claims(old, table)
    state.table = table
    state.rebased = True
    state.placer = make_placer(state.placer_type, table, state.config)


def _carry_claims(old: NodeTable, table: NodeTable) -> None:
    """The session's claim users and (de)allocations move to the new table with it."""
    book, before = table.devices, old.devices
    book.users = {k: set(v) for k, v in before.users.items()}
    book.overrides = dict(before.overrides)
    book.releasing = dict(before.releasing)
    book.payer = dict(before.payer)
    book.claim_gpus = before.claim_gpus
    for key, (allocated, node) in before.overrides.items():
        held = before.claims.get(key)
        if not allocated:
            book.release(key)
        elif held is not None and node is not None and node in table.index:
            book.take(key, held.keys, table.index[node])
