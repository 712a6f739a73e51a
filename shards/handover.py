"""Moving nodes between shards with everything they carry.

When shards are added or removed, a node leaves one shard and joins another together
with its capacity state, the pods placed on it and the parts of reservations that hold
capacity on it, so no capacity and no reservation is lost or counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.holdings import Holding, Kind
from placement.node_table import NodeTable
from placement.rows import NodeRows, export_rows, load_rows
from shards.reservations import Reservation, ReservationBook, ReservationState


@dataclass(frozen=True, slots=True)
class MovedHolding:
    owner: str  # "pod" or a reservation id
    pod: str
    node: str
    kind: int
    vector: np.ndarray
    shares: tuple[tuple[str, int], ...]
    created: tuple[str, ...]
    state: str = ""  # reservation state
    deadline: float = 0.0
    epoch: int = 0  # of the coordinator that prepared the reservation


@dataclass(frozen=True, slots=True)
class ShardHandover:
    rows: NodeRows
    holdings: tuple[MovedHolding, ...]


def take_nodes(table: NodeTable, pods: dict[str, Holding], book: ReservationBook, names: list[str]) -> ShardHandover:
    leaving = {table.index[n] for n in names if n in table.index and table.present[table.index[n]]}
    rows = export_rows(table, sorted(leaving))
    moved: list[MovedHolding] = []
    for key, holding in list(pods.items()):
        if holding.node in leaving:
            moved.append(_moved("pod", holding, table))
            del pods[key]
    for reservation in book.prepared():  # committed ones' holdings are the pods' holdings
        staying = []
        for holding in reservation.holdings:
            if holding.node in leaving:
                state, deadline, epoch = reservation.state.value, reservation.deadline, reservation.epoch
                moved.append(_moved(reservation.rid, holding, table, state, deadline, epoch))
            else:
                staying.append(holding)
        reservation.holdings = staying
    for row in leaving:
        for claim in [c for c, held in table.devices.claims.items() if held.row == row]:
            table.devices.release(claim)  # they travel with the row (rows.devices)
        table.devices.set_devices(row, ())
        table.held[:, row] = 0.0
        table.groups[row] = {}
        table.refresh(row)
        table.remove_node(table.names[row])
    return ShardHandover(rows, tuple(moved))


def give_nodes(table: NodeTable, pods: dict[str, Holding], book: ReservationBook, handover: ShardHandover) -> None:
    if set(handover.rows.schema.scalars) - set(table.schema.scalars):  # the owner re-lays its holdings
        raise ValueError("widen the table to the handover's columns before taking nodes over")
    for name in handover.rows.names:
        if name in table.index:
            table.present[table.index[name]] = True
    load_rows(table, handover.rows)
    for item in handover.holdings:
        row = table.index[item.node]
        vector = table.schema.vector_from(item.vector, handover.rows.schema)
        holding = Holding(item.pod, row, Kind(item.kind), vector, item.shares, item.created)
        if item.owner == "pod":
            pods[item.pod] = holding
            continue
        reservation = book.get(item.owner)
        if reservation is None:
            reservation = Reservation(item.owner, item.deadline, [], ReservationState(item.state), item.epoch)
            book.add(reservation)
        if reservation.state is ReservationState.PREPARED:
            reservation.holdings.append(holding)
        elif reservation.state is ReservationState.COMMITTED:  # resolved here already: the part that
            previous = pods.pop(item.pod, None)  # moved in follows, as commit would do
            if previous is not None:
                table.release(previous)
            pods[item.pod] = holding
        else:  # aborted or expired here (expiry runs per shard): the moved part's capacity returns too
            table.release(holding)


def _moved(
    owner: str, holding: Holding, table: NodeTable, state: str = "", deadline: float = 0.0, epoch: int = 0
) -> MovedHolding:
    return MovedHolding(
        owner,
        holding.pod,
        table.names[holding.node],
        int(holding.kind),
        holding.vector,
        holding.shares,
        holding.created_groups,
        state,
        deadline,
        epoch,
    )
