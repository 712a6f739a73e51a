"""What a shard's nodes hold, recounted from scratch from its recorded holdings.

The shard keeps running sums (``held``, MiB per shared GPU) and derived views (``idle``,
``future``) that it updates row by row as pods come and go. The checks here never read
those sums: they add up every live ``Holding`` again and derive the two views from the
node's allocatable alone, so a hold that was counted twice, released twice or leaked by
some code path shows up as a difference.

Definitions (what "over-committed" means, in KAI's terms):

- A holding is *live* when it belongs to a placed pod (``Shard.pods``) or to a reservation
  that is still PREPARED. Holdings of committed reservations are the pods' holdings.
- ``idle`` (free now) = allocatable - active - releasing, where a shared GPU takes one whole
  device while any active or releasing fraction sits on it.
- ``future`` (free once releasing pods finish) = allocatable - active - pipelined, where a
  shared GPU takes one device while any active or pipelined fraction sits on it: pipelined
  pods may use what releasing pods free, active ones may not.
- A shared GPU that kai-ray opened (``owns_slot``) has a reservation pod, which takes one pod
  slot in a view exactly when the GPU takes a device in it (KAI deletes it when no fraction is
  left, and creates it when the first one binds). Which groups kai-ray opened is history, not
  a sum, so that flag is the one thing read from the shard.
- A node is over-committed when any column of either view is below zero, or a shared GPU's
  active + releasing or active + pipelined MiB exceed the device's memory.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from placement.holdings import Holding, Kind
from placement.node_table import NodeTable
from placement.placer import Placer
from placement.shapes import GPU, PODS
from shards.messages import ShardDeltas
from shards.shard import Shard

TOLERANCE = 1e-6
Floats = npt.NDArray[np.float64]
GroupMib = dict[str, list[int]]  # group -> MiB held by active, releasing, pipelined fractions


@dataclass(frozen=True, slots=True)
class Recount:
    held: Floats  # (3, rows, width), indexed by Kind
    groups: list[GroupMib]
    idle: Floats
    future: Floats


def live_holdings(shard: Shard) -> list[Holding]:
    proposed = shard.proposal.holdings() if shard.proposal is not None else []
    return [*shard.pods.values(), *(h for r in shard.book.prepared() for h in r.holdings), *proposed]


def recount(table: NodeTable, holdings: Iterable[Holding]) -> Recount:
    rows, width = len(table), table.schema.width
    held = np.zeros((3, rows, width))
    groups: list[GroupMib] = [{} for _ in range(rows)]
    for holding in holdings:
        held[holding.kind, holding.node] += holding.vector
        for gid, mib in holding.shares:
            groups[holding.node].setdefault(gid, [0, 0, 0])[holding.kind] += mib
    idle = table.alloc - held[Kind.ACTIVE] - held[Kind.RELEASING]
    future = table.alloc - held[Kind.ACTIVE] - held[Kind.PIPELINED]
    for row in range(rows):
        owned = {gid for gid, usage in table.groups[row].items() if usage.owns_slot}
        for gid, (active, releasing, pipelined) in groups[row].items():
            device_now, device_later = active + releasing > 0, active + pipelined > 0
            idle[row, GPU] -= device_now
            future[row, GPU] -= device_later
            if gid in owned:
                idle[row, PODS] -= device_now
                future[row, PODS] -= device_later
    return Recount(held, groups, idle, future)


def overcommitted(table: NodeTable, counted: Recount) -> list[str]:
    """Every way a node is over-committed, by the definitions above (empty: none)."""
    names = ["cpu", "memory", "gpu", "pods", *table.schema.scalars]
    problems = []
    for view, values in (("idle", counted.idle), ("future", counted.future)):
        for row, column in zip(*np.nonzero(values < -TOLERANCE), strict=True):
            problems.append(f"{table.names[row]}: {view} {names[column]} is {values[row, column]:g}")
    for row, groups in enumerate(counted.groups):
        device = int(table.gpu_mem[row])
        for gid, (active, releasing, pipelined) in groups.items():
            if active + releasing > device or active + pipelined > device:
                problems.append(
                    f"{table.names[row]}: shared GPU {gid} holds {active}+{releasing}+{pipelined} MiB of {device}"
                )
    return problems


def bookkeeping_errors(table: NodeTable, counted: Recount) -> list[str]:
    """Where the shard's own sums and views differ from the recount (empty: none)."""
    problems = []
    for label, mine, theirs in (
        ("held", counted.held, table.held),
        ("idle", counted.idle, table.idle),
        ("future", counted.future, table.future),
    ):
        if mine.shape != theirs.shape:
            problems.append(f"{label}: shape {theirs.shape}, recount {mine.shape}")
        elif np.max(np.abs(mine - theirs), initial=0.0) > TOLERANCE:
            rows = sorted({int(r) for r in np.argwhere(np.abs(mine - theirs) > TOLERANCE)[:, -2]})
            problems.append(f"{label} differs on {[table.names[r] for r in rows]}")
    for row, groups in enumerate(counted.groups):
        recorded = {gid: [u.active, u.releasing, u.pipelined] for gid, u in table.groups[row].items()}
        if recorded != groups:
            problems.append(f"{table.names[row]}: shared GPUs {recorded}, recount {groups}")
    return problems


def shard_problems(shard: Shard) -> list[str]:
    """Over-commitment and bookkeeping errors of one shard, recounted from its live holdings."""
    counted = recount(shard.table, live_holdings(shard))
    return overcommitted(shard.table, counted) + bookkeeping_errors(shard.table, counted)


def would_overcommit(shard: Shard, deltas: ShardDeltas) -> bool:
    """Whether ``deltas`` by themselves would over-commit a node of ``shard`` (tried on a copy).

    A real cluster never reports that (a kubelet admits only pods that fit), so the property
    tests drop such deltas; a copy whose bookkeeping breaks is let through to fail the test."""
    trial = Shard(shard.shard_id, shard.placer.policy, shard.ttl, shard.table.schema)
    trial.table = copy.deepcopy(shard.table)
    trial.placer = Placer(trial.table, shard.placer.policy)  # caches hold frozen records deepcopy refuses
    trial.pods = dict(shard.pods)  # holdings are frozen
    trial.book = copy.deepcopy(shard.book)
    trial.apply(deltas)
    counted = recount(trial.table, live_holdings(trial))
    return bool(overcommitted(trial.table, counted)) and not bookkeeping_errors(trial.table, counted)
