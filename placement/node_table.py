"""A set of nodes as numpy arrays, with every pod's hold on them.

Rows are nodes, columns follow the ``ResourceSchema`` (cpu, memory, whole GPUs, pods,
extended scalars). Each pod's hold is recorded as a ``Holding`` so it can be undone
exactly: a session rolls back a gang by releasing the holdings it made.

Two derived views are kept up to date row by row, because every filter reads them:
``idle`` (free now) and ``future`` (free once releasing pods are gone, minus what is
already pipelined onto that). The GPU column counts whole devices only; shared GPUs
live in per-node ``GroupUsage`` records and are folded into the GPU column as KAI does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from kai_ray.model import Node, Taint, mig_instances, node_mig_mode
from placement.dra_devices import DeviceBook
from placement.gpu_groups import GroupUsage, summarize
from placement.holdings import Holding, Kind, Vector
from placement.shapes import GPU, PODS, ResourceSchema

# Below this many rows changed together, refreshing them one by one costs less than the
# fixed cost of the numpy calls that refresh them in one pass.
_ROWS_WORTH_ONE_PASS = 8


class NodeTable:
    """Capacity arrays for a set of node rows. Rows never move; a removed node's row is emptied
    and given to the next node added, so a table with node churn does not grow without end."""

    def __init__(self, schema: ResourceSchema, nodes: Sequence[Node] = ()) -> None:
        self.schema = schema
        width = schema.width
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.labels: list[dict[str, str]] = []
        self.taints: list[tuple[Taint, ...]] = []
        # One tuple per distinct set of taints, shared by the rows that carry it: pools of nodes
        # carry the same few, and rows sent to another process then pickle each set once.
        self._taint_sets: dict[tuple[Taint, ...], tuple[Taint, ...]] = {}
        self.alloc = np.zeros((0, width))
        self.held = np.zeros((3, 0, width))
        self.idle = np.zeros((0, width))
        self.future = np.zeros((0, width))
        self.gpu_count = np.zeros(0)
        self.gpu_mem = np.zeros(0, dtype=np.int64)
        self.ready = np.zeros(0, dtype=bool)
        self.unschedulable = np.zeros(0, dtype=bool)
        # Each node's MIG mode (``kai_ray.model.MigMode``), worked out when the node is added or
        # changes: placement asks it for every GPU pod, and a session's table is a copy.
        self.mig_mode = np.zeros(0, dtype=np.int8)
        self.present = np.zeros(0, dtype=bool)  # False for a removed node's row, until it is reused
        self.free_rows: list[int] = []
        self.name_rank = np.zeros(0, dtype=np.int64)
        self.version = np.zeros(0, dtype=np.int64)
        self.stamp = np.zeros(0, dtype=np.int64)  # the clock when the row last changed
        self.clock = 0
        self.removed_log: list[tuple[int, str]] = []  # (clock, name) of removed nodes, for mirrors
        self.room_future = np.zeros(0, dtype=np.int64)
        self.room_idle = np.zeros(0, dtype=np.int64)
        self.groups: list[dict[str, GroupUsage]] = []
        self.static_epoch = 0  # bumps when labels/taints/readiness change: constraint masks expire
        self.change_log: list[int] | None = None  # rows changed, in order, once someone tracks them
        self._deferred: dict[int, None] | None = None  # rows to refresh at the end of ``refreshed_once``
        self.devices = DeviceBook(self.refresh)  # DRA devices per row and the claims holding them
        self.add_nodes(nodes)

    def __len__(self) -> int:
        return len(self.names)

    # ------------------------------------------------------------------ nodes
    def add_nodes(self, nodes: Iterable[Node]) -> None:
        new = [n for n in nodes if n.name not in self.index]
        if not new:
            return
        while new and self.free_rows:
            self._reuse(self.free_rows.pop(), new.pop(0))
        if new:
            self._append(new)
        self.name_rank = np.argsort(np.argsort(np.array(self.names), kind="stable"), kind="stable")
        self.static_epoch += 1

    def _reuse(self, row: int, node: Node) -> None:
        """An empty row (its node was removed) takes ``node``; its version keeps counting up, so
        nothing cached for the old node is taken for the new one."""
        self.index[node.name] = row
        self.names[row] = node.name
        self.labels[row] = dict(node.labels)
        self.taints[row] = self._shared_taints(node.taints)
        self.groups[row] = {}
        self.alloc[row] = self.schema.vector(node.allocatable)
        self.held[:, row] = 0.0
        self.gpu_count[row] = self.alloc[row, GPU]
        self.gpu_mem[row] = int(node.gpu_memory_mib)
        self.ready[row], self.unschedulable[row], self.present[row] = node.ready, node.unschedulable, True
        self.mig_mode[row] = _mig_mode(node)
        self.refresh(row)

    def _append(self, new: list[Node]) -> None:
        start = len(self.names)
        for offset, node in enumerate(new):
            self.index[node.name] = start + offset
            self.names.append(node.name)
            self.labels.append(dict(node.labels))
            self.taints.append(self._shared_taints(node.taints))
            self.groups.append({})
        width = self.schema.width
        alloc = np.array([self.schema.vector(n.allocatable) for n in new]).reshape(len(new), width)
        self.alloc = np.vstack([self.alloc, alloc])
        self.held = np.concatenate([self.held, np.zeros((3, len(new), width))], axis=1)
        self.idle = np.vstack([self.idle, alloc])
        self.future = np.vstack([self.future, alloc])
        self.gpu_count = np.concatenate([self.gpu_count, alloc[:, GPU]])
        self.gpu_mem = np.concatenate([self.gpu_mem, np.array([int(n.gpu_memory_mib) for n in new], dtype=np.int64)])
        self.ready = np.concatenate([self.ready, np.array([n.ready for n in new], dtype=bool)])
        self.unschedulable = np.concatenate([self.unschedulable, np.array([n.unschedulable for n in new], dtype=bool)])
        self.mig_mode = np.concatenate([self.mig_mode, np.array([_mig_mode(n) for n in new], dtype=np.int8)])
        self.present = np.concatenate([self.present, np.ones(len(new), dtype=bool)])
        self.version = np.concatenate([self.version, np.zeros(len(new), dtype=np.int64)])
        self.stamp = np.concatenate([self.stamp, np.arange(self.clock + 1, self.clock + 1 + len(new), dtype=np.int64)])
        self.clock += len(new)
        self.room_future = np.concatenate([self.room_future, np.full(len(new), -1, dtype=np.int64)])
        self.room_idle = np.concatenate([self.room_idle, np.full(len(new), -1, dtype=np.int64)])

    def _shared_taints(self, taints: tuple[Taint, ...]) -> tuple[Taint, ...]:
        return self._taint_sets.setdefault(taints, taints)

    def update_node(self, node: Node) -> None:
        """New labels, taints, readiness or allocatable for an existing node; holdings stay."""
        row = self.index[node.name]
        self.labels[row] = dict(node.labels)
        self.taints[row] = self._shared_taints(node.taints)
        self.ready[row] = node.ready
        self.unschedulable[row] = node.unschedulable
        self.mig_mode[row] = _mig_mode(node)
        self.present[row] = True
        self.alloc[row] = self.schema.vector(node.allocatable)
        self.gpu_count[row] = self.alloc[row, GPU]
        self.gpu_mem[row] = int(node.gpu_memory_mib)
        self.static_epoch += 1
        self.refresh(row)

    def remove_node(self, name: str) -> None:
        """The node is gone: its row is emptied and kept for the next node added. Whatever still
        held capacity on it must have been released first."""
        row = self.index.pop(name)
        for claim in [c for c, held in self.devices.claims.items() if held.row == row]:
            self.devices.release(claim)
        if row in self.devices.devices:
            self.devices.set_devices(row, ())
        self.present[row] = False
        self.ready[row] = False
        self.mig_mode[row] = 0
        self.labels[row], self.taints[row], self.groups[row] = {}, (), {}
        self.alloc[row] = 0.0
        self.held[:, row] = 0.0
        self.gpu_count[row] = 0.0
        self.refresh(row)
        self.free_rows.append(row)
        self.removed_log.append((self.clock, name))
        self.static_epoch += 1

    # ---------------------------------------------------------------- holdings
    def hold(
        self,
        pod: str,
        node: int,
        kind: Kind,
        vector: Vector,
        shares: Sequence[tuple[str, int]] = (),
        create: Sequence[str] = (),
    ) -> Holding:
        """Record that ``pod`` takes ``vector`` (and ``shares`` of shared GPUs) on ``node``."""
        holding = self._book(pod, node, kind, vector, tuple(shares), tuple(create))
        self.refresh(node)
        return holding

    def release(self, holding: Holding) -> None:
        """Undo ``hold`` exactly (groups this holding created disappear when empty)."""
        self._unbook(holding)
        self.refresh(holding.node)

    def rehold(self, holding: Holding, kind: Kind) -> Holding:
        """The same pod's hold on the same node, now of ``kind`` (an eviction turns an active hold
        into a releasing one, and its undo turns it back): ``hold`` then ``release``, with the
        row worked out once. The new hold is taken first: a shared GPU whose usage dropped to zero
        in between would be forgotten, and with it the pod slot its reservation pod takes (a
        group only records that slot when it is created)."""
        new = self._book(holding.pod, holding.node, kind, holding.vector, holding.shares, holding.created_groups)
        self._unbook(holding)
        self.refresh(holding.node)
        return new

    def _book(
        self,
        pod: str,
        node: int,
        kind: Kind,
        vector: Vector,
        shares: tuple[tuple[str, int], ...],
        create: tuple[str, ...],
    ) -> Holding:
        self.held[kind, node] += vector
        groups = self.groups[node]
        for gid in create:
            groups.setdefault(gid, GroupUsage()).owns_slot = True
        for gid, mib in shares:
            usage = groups.setdefault(gid, GroupUsage())
            if kind is Kind.ACTIVE:
                usage.active += mib
            elif kind is Kind.RELEASING:
                usage.releasing += mib
            else:
                usage.pipelined += mib
        return Holding(pod, node, kind, vector, shares, create)

    def _unbook(self, holding: Holding) -> None:
        node = holding.node
        self.held[holding.kind, node] -= holding.vector
        groups = self.groups[node]
        for gid, mib in holding.shares:
            usage = groups[gid]
            if holding.kind is Kind.ACTIVE:
                usage.active -= mib
            elif holding.kind is Kind.RELEASING:
                usage.releasing -= mib
            else:
                usage.pipelined -= mib
            if usage.used <= 0:
                del groups[gid]

    @contextmanager
    def refreshed_once(self) -> Iterator[None]:
        """Holds taken and given back inside are worked into their rows once, on the way out:
        for a run of changes nothing reads in between (a rollback, which gives back a victim's
        eviction and the placement on its node one after the other). Rows are refreshed in the
        order they first changed."""
        if self._deferred is not None:  # already inside one
            yield
            return
        self._deferred = {}
        try:
            yield
        finally:
            rows, self._deferred = self._deferred, None
            self._refresh_rows(list(rows))

    def refresh(self, row: int) -> None:
        """Work out the row's free capacity again from its holds and shared GPUs. Victim searches
        call this for every hold they take and give back, millions of times in a large one: a
        row without shared GPUs skips their counts, whose zeros would change nothing."""
        if self._deferred is not None:
            self._deferred[row] = None
            return
        self._work_out(row)
        self.version[row] += 1
        self.clock += 1
        self.stamp[row] = self.clock
        if self.change_log is not None:
            self.change_log.append(row)

    def _refresh_rows(self, rows: list[int]) -> None:
        """``refresh`` of each row, in this order, each row once. A rollback of a gang's search
        step gives back hundreds of rows at once: those without shared GPUs are worked out in one
        numpy pass (the same element-wise arithmetic, so the same values), not row by row."""
        if len(rows) < _ROWS_WORTH_ONE_PASS:
            for row in rows:
                self.refresh(row)
            return
        at = np.array(rows, dtype=np.int64)
        groups = self.groups
        plain = np.fromiter((not groups[row] for row in rows), dtype=bool, count=len(rows))
        some = at[plain]
        held = self.held
        releasing = held[Kind.RELEASING][some]
        idle = self.alloc[some] - held[Kind.ACTIVE][some] - releasing
        self.future[some] = idle + releasing - held[Kind.PIPELINED][some]
        self.idle[some] = idle
        self.room_future[some] = -1
        self.room_idle[some] = -1
        for row in at[~plain].tolist():
            self._work_out(row)
        self.version[at] += 1
        self.stamp[at] = np.arange(self.clock + 1, self.clock + 1 + len(rows))
        self.clock += len(rows)
        if self.change_log is not None:
            self.change_log.extend(rows)

    def _work_out(self, row: int) -> None:
        """The row's ``idle``, ``future`` and best shared-GPU rooms from its holds."""
        held = self.held
        releasing = held[Kind.RELEASING, row]
        idle = self.alloc[row] - held[Kind.ACTIVE, row] - releasing
        groups = self.groups[row]
        if groups:
            counts = summarize(groups, int(self.gpu_mem[row]))
            idle[GPU] -= counts.busy
            idle[PODS] -= counts.owned_slots_idle
            future = idle + releasing - held[Kind.PIPELINED, row]
            future[GPU] += counts.frees_whole - counts.waits_on_releasing
            future[PODS] += counts.owned_slots_idle - counts.owned_slots_future
            self.room_future[row] = counts.best_room_future
            self.room_idle[row] = counts.best_room_idle
        else:
            future = idle + releasing - held[Kind.PIPELINED, row]
            self.room_future[row] = self.room_idle[row] = -1
        self.idle[row] = idle
        self.future[row] = future

    def changed_since(self, stamp: int) -> tuple[npt.NDArray[np.int64], list[str]]:
        """Present rows changed after clock ``stamp``, and the nodes removed after it."""
        rows = np.flatnonzero((self.stamp > stamp) & self.present)
        return rows, [name for clock, name in self.removed_log if clock > stamp]

    def forget_removed(self, stamp: int) -> None:
        """Removals up to clock ``stamp`` have been seen by whoever mirrors this table."""
        self.removed_log = [(clock, name) for clock, name in self.removed_log if clock > stamp]

    def copy(self) -> NodeTable:
        """An independent copy (a session may change it freely): arrays and shared-GPU records are
        copied; labels and taints are shared, nothing changes them in place."""
        out = NodeTable.__new__(NodeTable)
        out.__dict__.update(self.__dict__)
        for name in ("alloc", "held", "idle", "future", "gpu_count", "gpu_mem", "ready", "unschedulable", "mig_mode"):
            setattr(out, name, getattr(self, name).copy())
        for name in ("present", "name_rank", "version", "stamp", "room_future", "room_idle"):
            setattr(out, name, getattr(self, name).copy())
        out.names, out.index = list(self.names), dict(self.index)
        out.labels, out.taints = list(self.labels), list(self.taints)
        out.groups = [{g: replace(u) for g, u in row.items()} if row else {} for row in self.groups]
        out.free_rows, out.removed_log = list(self.free_rows), []
        out.change_log = None
        out._deferred = None
        out.devices = self.devices.copy(out.refresh)
        return out

    def track_changes(self) -> list[int]:
        """Start (or keep) logging changed rows; session-scoped tables only, the log is not trimmed."""
        if self.change_log is None:
            self.change_log = []
        return self.change_log

    def widen(self, schema: ResourceSchema) -> None:
        """Switch to a schema with more extended resources (columns are appended, never removed)."""
        if schema == self.schema:
            return
        extra = [name for name in schema.scalars if name not in self.schema.scalars]
        if not extra or any(name not in schema.scalars for name in self.schema.scalars):
            raise ValueError("a table's schema can only grow")
        order = [4 + self.schema.scalars.index(n) if n in self.schema.scalars else -1 for n in schema.scalars]

        def pad(values: Vector) -> Vector:
            out = np.zeros(values.shape[:-1] + (schema.width,))
            out[..., :4] = values[..., :4]
            for j, source in enumerate(order):
                if source >= 0:
                    out[..., 4 + j] = values[..., source]
            return out

        self.alloc, self.held = pad(self.alloc), pad(self.held)
        self.idle, self.future = pad(self.idle), pad(self.future)
        self.schema = schema
        for row in range(len(self.names)):
            self.refresh(row)

    # ---------------------------------------------------------------- helpers
    def is_cpu_only(self) -> npt.NDArray[np.bool_]:
        return self.gpu_count <= 0

    def new_group_id(self, row: int) -> str:
        """A deterministic id for a GPU that starts being shared on this node."""
        taken = self.groups[row]
        k = 0
        while f"{self.names[row]}-gpu{k}" in taken:
            k += 1
        return f"{self.names[row]}-gpu{k}"

    def whole_gpus_free(self, row: int) -> tuple[int, int]:
        """Whole devices free now, and free once releasing pods finish (KAI floors both)."""
        idle = int(np.floor(self.idle[row, GPU] + 1e-9))
        return idle, idle + int(np.floor(self.future[row, GPU] - self.idle[row, GPU] + 1e-9))


def _mig_mode(node: Node) -> int:
    if node.mig_mode is not None:  # as its reader worked it out
        return int(node.mig_mode)
    return int(node_mig_mode(node.labels, bool(mig_instances(node.allocatable.scalars))))
