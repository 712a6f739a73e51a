"""GPUs a victim search counts on a node: idle and releasing ones (shared GPUs and MIG
instances included, as KAI sums them), what a pod asks of KAI's idle-GPU filter, and an upper
bound of what any victim scenario could make available."""

from __future__ import annotations

import weakref

import numpy as np

from coordinator.session import SessionState
from coordinator.tasks import Task
from placement import mig_gpus_free
from placement.node_table import NodeTable
from placement.shapes import GPU


def required_gpus(task: Task) -> float:
    """The GPUs KAI's idle-GPU filter asks room for: whole devices, or a fraction times its
    devices (KAI's ResReq.GPUs(), in hundredths); a GPU-memory request asks none, its portion
    being known only on a node, and neither do MIG instances (KAI leaves them out of this sum
    while it counts the nodes' free instances in)."""
    share = task.pod.gpu_share
    if share is None or share.fraction is None:
        return task.pod.requests.gpu
    return task.pod.requests.gpu + round(share.fraction * 100) * share.devices / 100


def gpu_ceiling(state: SessionState) -> np.ndarray:
    """Per table row, at least as many GPUs as any victim scenario could make available there:
    the idle and releasing GPUs the idle-GPU filter starts from, plus the GPUs every placed pod
    holds (any victim is one of them). Valid while the session is as it was when computed."""
    table = state.table
    ceiling = np.where(table.present, gpu_headroom_all(table), 0.0)
    # One pass over every placed pod of the cluster, in comprehensions: at 160,000 running pods
    # a loop with a lookup and an add per pod cost most of a contended cycle.
    placed = [(task.node, task.accepted[0]) for task in state.tasks.values() if task.node and task.accepted[0] > 0]
    index = table.index
    rows = np.array([index.get(node, -1) for node, _ in placed], dtype=np.int64)
    gpus = np.array([gpu for _, gpu in placed], dtype=np.float64)
    known = rows >= 0
    np.add.at(ceiling, rows[known], gpus[known])
    return ceiling


# The last ``gpu_headroom_all`` of each table and the table's clock then: a victim search asks
# for it more than once per job (the feasible nodes, then the idle-GPU filter), and between two
# asks a commit changes a few rows; at thousands of nodes a pass over every row per ask would be
# most of a contended job's cost, so only the rows stamped after the last answer are worked out.
_HEADROOM: weakref.WeakKeyDictionary[NodeTable, tuple[int, np.ndarray]] = weakref.WeakKeyDictionary()


def gpu_headroom_all(table: NodeTable) -> np.ndarray:
    """``gpu_headroom`` for every row: whole devices vectorized, shared GPUs row by row. The
    array is shared by callers until the table changes: read it, do not write it."""
    known = _HEADROOM.get(table)
    if known is not None and known[0] == table.clock:
        return known[1]
    if known is not None and len(known[1]) == len(table):
        rows = np.flatnonzero(table.stamp > known[0])  # every change of a row stamps it (refresh)
        out = known[1].copy()  # callers may still hold the old answer
        out[rows] = table.future[rows, GPU] + mig_gpus_free(table, rows)
    else:
        rows = np.arange(len(table))
        out = table.future[:, GPU] + mig_gpus_free(table, rows)
    groups = table.groups
    for row in rows.tolist():
        if groups[row]:
            out[row] = gpu_headroom(table, row)
    out.flags.writeable = False
    _HEADROOM[table] = (table.clock, out)
    return out


def gpu_headroom(table: NodeTable, row: int) -> float:
    """Idle plus releasing GPUs of a node, partly free shared GPUs and free MIG instances
    included (KAI's sums)."""
    whole = float(table.future[row, GPU] + mig_gpus_free(table, np.array([row]))[0])
    device = int(table.gpu_mem[row]) or 1
    shared = 0.0
    for usage in table.groups[row].values():
        allocated = usage.active + usage.releasing
        if allocated > 0:
            shared += 1 - np.ceil(allocated / device * 100) / 100
        releasing_net = usage.releasing - usage.pipelined
        if releasing_net > 0 and not usage.frees_whole_device:
            shared += np.ceil(releasing_net / device * 100) / 100
    return whole + shared
