"""Node rows in transit: a column-wise copy of some nodes of a table and what they hold.

Shards send rows to the coordinator (candidates for a session) and to each other
(rebalancing). Numeric state travels as numpy arrays (Ray ships them as buffers without
pickling element by element); labels, taints and shared-GPU groups as plain lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kai_ray.model import Device, Taint
from placement.gpu_groups import GroupUsage
from placement.holdings import Kind
from placement.node_table import NodeTable
from placement.shapes import GPU, ResourceSchema

GroupState = tuple[int, int, int, bool]  # active, releasing, pipelined MiB; owns a reservation slot
RowDevices = tuple[tuple[Device, ...], dict[str, str]]  # a row's DRA devices; device key -> claim holding it


@dataclass(frozen=True, slots=True)
class NodeRows:
    schema: ResourceSchema
    names: list[str]
    labels: list[dict[str, str]]
    taints: list[tuple[Taint, ...]]
    ready: npt.NDArray[np.bool_]
    unschedulable: npt.NDArray[np.bool_]
    alloc: npt.NDArray[np.float64]
    held: npt.NDArray[np.float64]  # (3, n, width)
    gpu_mem: npt.NDArray[np.int64]
    groups: list[dict[str, GroupState]]
    # Each row's MIG mode: it travels as worked out where the node was read (the MIG-node label
    # key is configured, and profiles listed at zero are not in ``alloc``).
    mig_mode: npt.NDArray[np.int8]
    devices: list[RowDevices] = field(default_factory=list)  # DRA, per row; empty when no row has any

    def __len__(self) -> int:
        return len(self.names)

    @staticmethod
    def empty(schema: ResourceSchema) -> NodeRows:
        width = schema.width
        return NodeRows(
            schema,
            [],
            [],
            [],
            np.zeros(0, dtype=bool),
            np.zeros(0, dtype=bool),
            np.zeros((0, width)),
            np.zeros((3, 0, width)),
            np.zeros(0, dtype=np.int64),
            [],
            np.zeros(0, dtype=np.int8),
        )


@dataclass(frozen=True, slots=True)
class NodeHolds:
    """What some nodes hold, and nothing else: for checks outside a cycle (the simulator's
    recount of every node's usage each cycle), which need neither labels nor taints."""

    names: list[str]
    held: npt.NDArray[np.float64]  # (3, n, width), as ``NodeRows.held``
    schema: ResourceSchema
    groups: dict[int, dict[str, GroupState]]  # row -> its shared GPUs, for rows that have any


def export_holds(table: NodeTable) -> NodeHolds:
    """Every present node's holds."""
    index = np.flatnonzero(table.present)
    groups = {
        i: {g: (u.active, u.releasing, u.pipelined, u.owns_slot) for g, u in table.groups[r].items()}
        for i, r in enumerate(index.tolist())
        if table.groups[r]
    }
    return NodeHolds([table.names[r] for r in index], table.held[:, index].copy(), table.schema, groups)


def export_rows(table: NodeTable, rows: Sequence[int] | npt.NDArray[np.int64]) -> NodeRows:
    """Copy ``rows`` of ``table`` (present nodes only make sense to send)."""
    index = np.asarray(rows, dtype=np.int64)
    return NodeRows(
        schema=table.schema,
        names=[table.names[r] for r in index],
        labels=[dict(table.labels[r]) for r in index],
        taints=[table.taints[r] for r in index],
        ready=table.ready[index].copy(),
        unschedulable=table.unschedulable[index].copy(),
        alloc=table.alloc[index].copy(),
        held=table.held[:, index].copy(),
        gpu_mem=table.gpu_mem[index].copy(),
        groups=[
            {g: (u.active, u.releasing, u.pipelined, u.owns_slot) for g, u in table.groups[r].items()} for r in index
        ],
        mig_mode=table.mig_mode[index].copy(),
        devices=table.devices.export(index) if table.devices else [],
    )


def merge_rows(parts: Sequence[NodeRows], schema: ResourceSchema) -> NodeRows:
    """One set of rows from several (duplicates by name keep the first copy)."""
    seen: set[str] = set()
    picks: list[tuple[NodeRows, int]] = []
    for part in parts:
        for i, name in enumerate(part.names):
            if name not in seen:
                seen.add(name)
                picks.append((part, i))
    if not picks:
        return NodeRows.empty(schema)
    width = schema.width

    def widen(part: NodeRows, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        if part.schema == schema:
            return values
        out = np.zeros(values.shape[:-1] + (width,))
        out[..., :4] = values[..., :4]
        for j, name in enumerate(part.schema.scalars):
            if name in schema.scalars:
                out[..., 4 + schema.scalars.index(name)] = values[..., 4 + j]
        return out

    return NodeRows(
        schema=schema,
        names=[p.names[i] for p, i in picks],
        labels=[p.labels[i] for p, i in picks],
        taints=[p.taints[i] for p, i in picks],
        ready=np.array([p.ready[i] for p, i in picks], dtype=bool),
        unschedulable=np.array([p.unschedulable[i] for p, i in picks], dtype=bool),
        alloc=np.array([widen(p, p.alloc[i]) for p, i in picks]).reshape(len(picks), width),
        held=np.stack([widen(p, p.held[:, i]) for p, i in picks], axis=1).reshape(3, len(picks), width),
        gpu_mem=np.array([p.gpu_mem[i] for p, i in picks], dtype=np.int64),
        groups=[p.groups[i] for p, i in picks],
        mig_mode=np.array([p.mig_mode[i] for p, i in picks], dtype=np.int8),
        devices=[p.devices[i] if p.devices else ((), {}) for p, i in picks] if any(p.devices for p in parts) else [],
    )


def table_from_rows(rows: NodeRows) -> NodeTable:
    """A table holding exactly these rows, with their usage already in place. Built column-wise:
    a session table is made of thousands of candidate rows every cycle, and this costs numpy
    operations instead of a Python pass per row (only rows with shared GPUs are refreshed one by
    one)."""
    table = NodeTable(rows.schema)
    n = len(rows.names)
    table.names = list(rows.names)
    table.index = {name: i for i, name in enumerate(table.names)}
    table.labels, table.taints = list(rows.labels), list(rows.taints)
    table.groups = [
        {g: GroupUsage(a, r, p, slot) for g, (a, r, p, slot) in row_groups.items()} for row_groups in rows.groups
    ]
    table.alloc, table.held = np.array(rows.alloc, dtype=np.float64), np.array(rows.held, dtype=np.float64)
    table.gpu_count = table.alloc[:, GPU].copy()
    table.gpu_mem = np.asarray(rows.gpu_mem, dtype=np.int64).copy()
    table.ready = np.asarray(rows.ready, dtype=bool).copy()
    table.unschedulable = np.asarray(rows.unschedulable, dtype=bool)
    table.mig_mode = np.asarray(rows.mig_mode, dtype=np.int8).reshape(n).copy()
    table.present = np.ones(n, dtype=bool)
    table.version = np.zeros(n, dtype=np.int64)
    table.stamp = np.zeros(n, dtype=np.int64)
    table.room_future = np.full(n, -1, dtype=np.int64)
    table.room_idle = np.full(n, -1, dtype=np.int64)
    table.name_rank = np.argsort(np.argsort(np.array(table.names), kind="stable"), kind="stable")
    # What refresh() computes, for rows without shared GPUs; those with some get refresh() itself.
    table.idle = table.alloc - table.held[Kind.ACTIVE] - table.held[Kind.RELEASING]
    table.future = table.idle + table.held[Kind.RELEASING] - table.held[Kind.PIPELINED]
    for row, row_groups in enumerate(table.groups):
        if row_groups:
            table.refresh(row)
    table.static_epoch += 1
    for row, (devices, owners) in enumerate(rows.devices):
        if devices or owners:
            table.devices.load(row, devices, owners)
    return table


def load_rows(table: NodeTable, rows: NodeRows) -> list[int]:
    """Add ``rows`` to ``table`` (or refresh the rows it already has) with their usage; their row
    numbers. The table must have every column the rows have."""
    from kai_ray.model import MigMode, Node, ResourceVector

    nodes = []
    for i, name in enumerate(rows.names):
        alloc = rows.alloc[i]
        scalars = {n: float(alloc[4 + j]) for j, n in enumerate(rows.schema.scalars)}
        nodes.append(
            Node(
                name,
                ResourceVector.of(alloc[0], alloc[1], alloc[2], alloc[3], scalars),
                labels=rows.labels[i],
                taints=rows.taints[i],
                ready=bool(rows.ready[i]),
                unschedulable=bool(rows.unschedulable[i]),
                gpu_memory_mib=float(rows.gpu_mem[i]),
                mig_mode=MigMode(int(rows.mig_mode[i])),
            )
        )
    returning = [n for n in nodes if n.name in table.index]
    table.add_nodes(nodes)
    for node in returning:  # a node that was here before: its old row may be out of date
        table.update_node(node)
    placed = []
    for i, name in enumerate(rows.names):
        row = table.index[name]
        table.held[:, row] = [table.schema.vector_from(held, rows.schema) for held in rows.held[:, i]]
        table.groups[row] = {g: GroupUsage(a, r, p, slot) for g, (a, r, p, slot) in rows.groups[i].items()}
        table.refresh(row)
        if rows.devices:
            table.devices.load(row, *rows.devices[i])
        placed.append(row)
    return placed
