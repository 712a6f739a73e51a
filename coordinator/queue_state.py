"""Queues during a session: fair shares, allocations, capacity checks and queue order.

Amounts are (gpu, cpu, memory) rows of numpy arrays indexed like the ``QueueTree``.
``allocated`` and ``allocated_np`` (non-preemptible) include every ancestor, as KAI
rolls allocations up the tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from coordinator.fairshare import QueueTree
from coordinator.fairshare.tree import UNLIMITED, Array

DRF_NO_SHARE_MULTIPLIER = 1000.0
RESOURCE_NAMES = ("gpu", "cpu", "memory")


def less_equal(a: Sequence[float] | Array, b: Sequence[float] | Array) -> bool:
    """KAI's ResourceQuantities.LessEqual where -1 means infinity on either side."""
    for x, y in zip(a, b, strict=True):
        if x == UNLIMITED and y == UNLIMITED:
            continue
        if x == UNLIMITED:
            return False
        if y == UNLIMITED:
            continue
        if x > y + 1e-9:
            return False
    return True


@dataclass(frozen=True, slots=True)
class CapacityVerdict:
    ok: bool
    reason: str = ""  # OverLimit | NonPreemptibleOverQuota
    message: str = ""


class QueueState:
    def __init__(self, tree: QueueTree, fair_share: Array, request: Array, allocated: Array,
                 allocated_np: Array, total: Array) -> None:
        self.tree = tree
        self.fair_share = fair_share
        self.request = request
        self.allocated = allocated
        self.allocated_np = allocated_np
        self.total = total
        deserved, limit = tree.deserved, tree.limit
        share = np.maximum(deserved, fair_share)
        share = np.where(limit == UNLIMITED, share, np.minimum(limit, share))
        self.allocatable = np.where(deserved == UNLIMITED, limit, share)

    def has(self, queue: str) -> bool:
        return queue in self.tree.index

    def is_leaf(self, queue: str) -> bool:
        return self.tree.is_leaf(self.tree.index[queue])

    def path(self, queue: str) -> list[int]:
        return self.tree.path_to_root(self.tree.index[queue])

    # ------------------------------------------------------------ accounting
    def add_allocation(self, queue: str, amount: Sequence[float], preemptible: bool, sign: float = 1.0) -> None:
        vector = np.asarray(amount) * sign
        for i in self.path(queue):
            self.allocated[i] += vector
            if not preemptible:
                self.allocated_np[i] += vector

    # ------------------------------------------------------------ capacity
    def check_capacity(self, queue: str, request: Sequence[float] | Array, preemptible: bool,
                       limits: bool = True) -> CapacityVerdict:
        """KAI's IsJobOverQueueCapacity: limits at every level, then non-preemptible quota."""
        tree = self.tree
        path = self.path(queue)
        if limits:
            for i in path:
                for r, amount in enumerate(request):
                    limit = tree.limit[i, r]
                    if limit == UNLIMITED or amount == 0:
                        continue
                    if limit < self.allocated[i, r] + amount - 1e-9:
                        name = RESOURCE_NAMES[r]
                        return CapacityVerdict(False, "OverLimit", (
                            f"queue {tree.names[i]} would exceed its {name} limit: limit {_fmt(name, limit)}, "
                            f"allocated {_fmt(name, self.allocated[i, r])}, requested {_fmt(name, amount)}"))
        if preemptible:
            return CapacityVerdict(True)
        for i in path:
            for r, amount in enumerate(request):
                deserved = tree.deserved[i, r]
                if deserved == UNLIMITED or amount == 0:
                    continue
                if deserved < self.allocated_np[i, r] + amount - 1e-9:
                    name = RESOURCE_NAMES[r]
                    return CapacityVerdict(False, "NonPreemptibleOverQuota", (
                        f"non-preemptible job would take queue {tree.names[i]} over its {name} quota: quota "
                        f"{_fmt(name, deserved)}, non-preemptible allocated {_fmt(name, self.allocated_np[i, r])}, "
                        f"requested {_fmt(name, amount)}"))
        return CapacityVerdict(True)

    # ------------------------------------------------------------ ordering
    def dominant_share(self, i: int, allocated: Array) -> float:
        share = self.allocatable[i]
        share = np.where(share == UNLIMITED, self.total, share)
        values = np.where(share == 0, allocated * DRF_NO_SHARE_MULTIPLIER,
                          np.divide(allocated, share, out=np.zeros(3), where=share != 0))
        return float(max(0.0, values.max()))

    def compare(self, left: int, right: int, left_request: Array, right_request: Array,
                left_victims: Array | None = None, right_victims: Array | None = None) -> int:
        """KAI's queue order between two sibling queues, given each one's next job request;
        -1 when ``left`` goes first."""
        for key in (self._over_utilized, self._not_starved):
            lv, rv = key(left, left_request), key(right, right_request)
            if lv != rv:
                return -1 if lv < rv else 1
        tree = self.tree
        if tree.priority[left] != tree.priority[right]:
            return -1 if tree.priority[left] > tree.priority[right] else 1
        lz, rz = self._zero_share_violation(left, left_request), self._zero_share_violation(right, right_request)
        if lz != rz:
            return -1 if not lz else 1
        ld = self.dominant_share(left, self.allocated[left] + left_request - _or_zero(left_victims))
        rd = self.dominant_share(right, self.allocated[right] + right_request - _or_zero(right_victims))
        if ld != rd:
            return -1 if ld < rd else 1
        ld, rd = self.dominant_share(left, self.allocated[left]), self.dominant_share(right, self.allocated[right])
        if ld != rd:
            return -1 if ld < rd else 1
        la, ra = self.allocatable[left], self.allocatable[right]
        if not less_equal(ra, la) and less_equal(la, ra):
            return -1
        if not less_equal(la, ra) and less_equal(ra, la):
            return 1
        if tree.created[left] != tree.created[right]:
            return -1 if tree.created[left] < tree.created[right] else 1
        return -1 if tree.names[left] < tree.names[right] else 1

    def _over_utilized(self, i: int, _: Array) -> int:
        return int(bool(np.all(self.fair_share[i] < self.allocated[i])))

    def _not_starved(self, i: int, request: Array) -> int:
        return int(not less_equal(self.allocated[i] + request, self.tree.deserved[i]))

    def _zero_share_violation(self, i: int, request: Array) -> bool:
        with_job = self.allocated[i] + request
        return bool(np.any((self.allocatable[i] == 0) & (with_job > 0)))


def _or_zero(value: Array | None) -> Array:
    return np.zeros(3) if value is None else value


def _fmt(resource: str, value: float) -> str:
    if resource == "cpu":
        return f"{value / 1000:g} cores"
    if resource == "memory":
        return f"{value / 1e9:g} GB"
    return f"{value:g}"
