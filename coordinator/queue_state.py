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
from kai_ray.model.fairshare import UNLIMITED, Array

DRF_NO_SHARE_MULTIPLIER = 1000.0
# What ``QueueState.order_prefix`` gives: see there.
OrderPrefix = tuple[bool, bool, int, bool, float, float]
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


def _at_most(x: float, y: float) -> bool:
    """``less_equal`` for one resource (unlimited is -1 on either side)."""
    if x == UNLIMITED:
        return y == UNLIMITED
    return y == UNLIMITED or x <= y + 1e-9


def _share(amount: float, divisor: float) -> float:
    """One resource's part of the DRF share (x1000 where nothing is allocatable)."""
    return amount * DRF_NO_SHARE_MULTIPLIER if divisor == 0 else amount / divisor


@dataclass(frozen=True, slots=True)
class CapacityVerdict:
    ok: bool
    reason: str = ""  # OverLimit | NonPreemptibleOverQuota
    message: str = ""


class QueueState:
    def __init__(
        self, tree: QueueTree, fair_share: Array, request: Array, allocated: Array, allocated_np: Array, total: Array
    ) -> None:
        self.tree = tree
        self.fair_share = fair_share
        self.request = request
        self._allocated = allocated
        self._allocated_np = allocated_np
        self.total = total
        deserved, limit = tree.deserved, tree.limit
        share = np.maximum(deserved, fair_share)
        share = np.where(limit == UNLIMITED, share, np.minimum(limit, share))
        self.allocatable = np.where(deserved == UNLIMITED, limit, share)
        # Plain-float rows, what ``add_allocation`` changes: a victim search books and unbooks
        # every victim of every scenario, and numpy's cost per call on a 3-vector is most of such
        # a booking. The arrays are brought up to date from the rows (only those changed) when
        # read.
        self.alloc_rows: list[list[float]] = allocated.tolist()
        self.alloc_np_rows: list[list[float]] = allocated_np.tolist()
        self._stale: set[int] = set()
        self._stale_np: set[int] = set()
        self._fair_rows: list[list[float]] = fair_share.tolist()
        self._deserved_rows: list[list[float]] = deserved.tolist()
        self._allocatable_rows: list[list[float]] = self.allocatable.tolist()
        self._total: list[float] = total.tolist()
        # What a dominant share divides by: the allocatable amount, or the cluster's where it is unlimited.
        self._share_divisors: list[list[float]] = [
            [self._total[r] if amount == UNLIMITED else amount for r, amount in enumerate(row)]
            for row in self._allocatable_rows
        ]
        self._paths: dict[str, list[int]] = {}
        self._unbounded: dict[tuple[str, bool], bool] = {}
        self._ties: dict[tuple[int, int], int] = {}  # compare_tie reads nothing a session changes
        self._priority_keys: list[int] = [-int(p) for p in tree.priority]

    def has(self, queue: str) -> bool:
        return queue in self.tree.index

    def is_leaf(self, queue: str) -> bool:
        return self.tree.is_leaf(self.tree.index[queue])

    def path(self, queue: str) -> list[int]:
        path = self._paths.get(queue)
        if path is None:
            path = self._paths[queue] = self.tree.path_to_root(self.tree.index[queue])
        return path

    # ------------------------------------------------------------ accounting
    @property
    def allocated(self) -> Array:
        """Each queue's allocation, its descendants' included (gpu, cpu, memory)."""
        return _brought_up_to_date(self._allocated, self.alloc_rows, self._stale)

    @property
    def allocated_np(self) -> Array:
        """The non-preemptible part of ``allocated``."""
        return _brought_up_to_date(self._allocated_np, self.alloc_np_rows, self._stale_np)

    def add_allocation(self, queue: str, amount: Sequence[float], preemptible: bool, sign: float = 1.0) -> None:
        path = self.path(queue)
        _add_on_path(self.alloc_rows, self._stale, path, amount, sign)
        if not preemptible:
            _add_on_path(self.alloc_np_rows, self._stale_np, path, amount, sign)

    def add_non_preemptible(self, queue: str, amount: Sequence[float], sign: float = 1.0) -> None:
        """Non-preemptible allocation alone: the core of a semi-preemptible job, whose whole
        allocation ``add_allocation`` booked as preemptible."""
        _add_on_path(self.alloc_np_rows, self._stale_np, self.path(queue), amount, sign)

    # ------------------------------------------------------------ capacity
    def never_full(self, queue: str, preemptible: bool) -> bool:
        """Whether no request can fail ``check_capacity`` for this queue: no limit on its path and,
        for non-preemptible work, no quota either."""
        key = (queue, preemptible)
        known = self._unbounded.get(key)
        if known is None:
            path = self.path(queue)
            known = bool(np.all(self.tree.limit[path] == UNLIMITED))
            if not preemptible:
                known = known and bool(np.all(self.tree.deserved[path] == UNLIMITED))
            self._unbounded[key] = known
        return known

    def check_capacity(
        self,
        queue: str,
        request: Sequence[float] | Array,
        preemptible: bool,
        limits: bool = True,
        subject: str = "non-preemptible job",
    ) -> CapacityVerdict:
        """KAI's IsJobOverQueueCapacity: limits at every level, then non-preemptible quota
        (``subject`` names the non-preemptible work in the message)."""
        tree = self.tree
        path = self.path(queue)
        if limits:
            for i in path:
                for r, amount in enumerate(request):
                    limit = tree.limit[i, r]
                    if limit == UNLIMITED or amount == 0:
                        continue
                    if limit < self.alloc_rows[i][r] + amount - 1e-9:
                        name = RESOURCE_NAMES[r]
                        return CapacityVerdict(
                            False,
                            "OverLimit",
                            (
                                f"queue {tree.names[i]} would exceed its {name} limit: limit {_fmt(name, limit)}, "
                                f"allocated {_fmt(name, self.alloc_rows[i][r])}, requested {_fmt(name, amount)}"
                            ),
                        )
        if preemptible:
            return CapacityVerdict(True)
        for i in path:
            for r, amount in enumerate(request):
                deserved = tree.deserved[i, r]
                if deserved == UNLIMITED or amount == 0:
                    continue
                allocated_np = self.alloc_np_rows[i][r]
                if deserved < allocated_np + amount - 1e-9:
                    name = RESOURCE_NAMES[r]
                    return CapacityVerdict(
                        False,
                        "NonPreemptibleOverQuota",
                        (
                            f"{subject} would take queue {tree.names[i]} over its {name} quota: quota "
                            f"{_fmt(name, deserved)}, non-preemptible allocated {_fmt(name, allocated_np)}, "
                            f"requested {_fmt(name, amount)}"
                        ),
                    )
        return CapacityVerdict(True)

    # ------------------------------------------------------------ ordering
    def compare(
        self,
        left: int,
        right: int,
        left_request: Array,
        right_request: Array,
        left_victims: Array | None = None,
        right_victims: Array | None = None,
    ) -> int:
        """KAI's queue order between two sibling queues, given each one's next job request;
        -1 when ``left`` goes first."""
        first = self.order_prefix(left, left_request, left_victims)
        second = self.order_prefix(right, right_request, right_victims)
        if first != second:
            return -1 if first < second else 1
        return self.compare_tie(left, right)

    def order_prefix(self, i: int, request: Array, victims: Array | None = None) -> OrderPrefix:
        """The rules of the queue order that judge each queue alone, as a tuple that sorts the
        way they order (least first): over its fair share; not within its deserved quota with
        the request; lower priority; the request taking a resource it has none of; its dominant
        share with the request (less what ``victims`` give back); its dominant share now. Two
        queues whose prefixes are equal are ordered by ``compare_tie``.

        It reads nothing of the session but the queue's own allocation, so a caller that orders
        the same queues many times (``JobOrder``) keeps it while that allocation stays put.
        Plain floats: this runs several times per pod."""
        # Written out for the three resources (gpu, cpu, memory).
        alloc = self.alloc_rows[i]
        a0, a1, a2 = alloc
        r0, r1, r2 = request.tolist()
        w0, w1, w2 = a0 + r0, a1 + r1, a2 + r2
        f0, f1, f2 = self._fair_rows[i]
        s0, s1, s2 = self._allocatable_rows[i]
        q0, q1, q2 = self._deserved_rows[i]
        d0, d1, d2 = self._share_divisors[i]
        over_fair = f0 < a0 and f1 < a1 and f2 < a2
        within = _at_most(w0, q0) and _at_most(w1, q1) and _at_most(w2, q2)
        lacking = (s0 == 0 and w0 > 0) or (s1 == 0 and w1 > 0) or (s2 == 0 and w2 > 0)
        if victims is not None:
            b0, b1, b2 = victims.tolist()
            w0, w1, w2 = w0 - b0, w1 - b1, w2 - b2
        # KAI's DRF share with and without the request: the largest allocated/allocatable ratio.
        return (
            over_fair,
            not within,
            self._priority_keys[i],
            lacking,
            max(0.0, _share(w0, d0), _share(w1, d1), _share(w2, d2)),
            max(0.0, _share(a0, d0), _share(a1, d1), _share(a2, d2)),
        )

    def compare_tie(self, left: int, right: int) -> int:
        """The queue order's pairwise rules, for two queues ``order_prefix`` cannot tell apart:
        the one whose allocatable amount is strictly less goes first, then the older, then by name."""
        tie = self._ties.get((left, right))
        if tie is None:
            tie = self._ties[(left, right)] = self._compare_tie(left, right)
        return tie

    def _compare_tie(self, left: int, right: int) -> int:
        la, ra = self._allocatable_rows[left], self._allocatable_rows[right]
        if not less_equal(ra, la) and less_equal(la, ra):
            return -1
        if not less_equal(la, ra) and less_equal(ra, la):
            return 1
        tree = self.tree
        if tree.created[left] != tree.created[right]:
            return -1 if tree.created[left] < tree.created[right] else 1
        return -1 if tree.names[left] < tree.names[right] else 1


def _or_zero(value: Array | None) -> Array:
    return np.zeros(3) if value is None else value


def _add_on_path(
    rows: list[list[float]], stale: set[int], path: list[int], amount: Sequence[float], sign: float
) -> None:
    """``amount`` times ``sign`` added to the rows of every queue on ``path`` (then stale)."""
    gpu, cpu, memory = float(amount[0]) * sign, float(amount[1]) * sign, float(amount[2]) * sign
    for i in path:
        row = rows[i]
        row[0] += gpu
        row[1] += cpu
        row[2] += memory
    stale.update(path)


def _brought_up_to_date(array: Array, rows: list[list[float]], stale: set[int]) -> Array:
    """``array`` with its ``stale`` rows copied from ``rows`` (then none is stale)."""
    for i in stale:
        array[i] = rows[i]
    stale.clear()
    return array


def _fmt(resource: str, value: float) -> str:
    if resource == "cpu":
        return f"{value / 1000:g} cores"
    if resource == "memory":
        return f"{value / 1e9:g} GB"
    return f"{value:g}"
