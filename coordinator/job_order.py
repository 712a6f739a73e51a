"""Which job to try next: KAI's queue tree walk (JobsOrderByQueues).

Starting at the top level, the best queue among siblings is chosen by the queue order
(judged with each queue's own best pending job), then the walk descends to a leaf and
pops its best job. For victims the order is reversed: the most over-served queue first
and, inside it, the job that would be scheduled last.

Like KAI's heaps, siblings stay sorted and only the queues on the path of the last pop
or push are re-placed (their allocation or leading job is what changed), each with a
binary search, so a pop costs a few comparisons per level instead of a full scan.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

import numpy as np

from coordinator.fairshare.tree import Array
from coordinator.jobs import Job
from coordinator.queue_state import QueueState

RequestOf = Callable[[Job], Array]
ROOT = -1
OrderArgs = tuple[Array, Array | None]


class JobOrder:
    def __init__(self, queues: QueueState, request_of: RequestOf, victims: bool = False,
                 allocated_of: RequestOf | None = None) -> None:
        self.queues = queues
        self.request_of = request_of
        self.victims = victims
        self.allocated_of = allocated_of  # victim mode: what a popped job gives back
        self._jobs: dict[int, list[tuple[tuple[object, ...], int, Job]]] = {}  # leaf -> heap
        self._children: dict[int, list[int]] = {}  # queue (or ROOT) -> active children, best first
        self._dirty: set[int] = set()
        self._args: dict[int, OrderArgs] = {}
        self._popped: dict[int, list[Job]] = {}
        self._seq = 0

    def push_all(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            self.push(job)

    def __len__(self) -> int:
        return sum(len(heap) for heap in self._jobs.values())

    def empty(self) -> bool:
        return not self._children.get(ROOT)

    def push(self, job: Job) -> None:
        tree = self.queues.tree
        leaf = tree.index.get(job.queue)
        if leaf is None or not tree.is_leaf(leaf):
            return
        key: tuple[object, ...] = job.order_key()
        if self.victims:
            key = tuple(_Reversed(k) for k in key)
        self._seq += 1
        heap = self._jobs.setdefault(leaf, [])
        heapq.heappush(heap, (key, self._seq, job))
        self._mark_path(leaf)
        if len(heap) == 1:
            self._link(leaf)

    def pop(self) -> Job | None:
        node = ROOT
        while node not in self._jobs:
            children = self._sorted_children(node)
            if not children:
                return None
            node = children[0]
        heap = self._jobs[node]
        _, _, job = heapq.heappop(heap)
        if self.victims:
            self._popped.setdefault(node, []).append(job)
        self._mark_path(node)
        if not heap:
            del self._jobs[node]
            self._unlink(node)
        return job

    # -------------------------------------------------------------- tree upkeep
    def _parent(self, node: int) -> int:
        parent = int(self.queues.tree.parent[node])
        return parent if parent >= 0 else ROOT

    def _mark_path(self, node: int) -> None:
        while node != ROOT:
            self._dirty.add(node)
            node = self._parent(node)

    def _link(self, node: int) -> None:
        while True:
            parent = self._parent(node)
            siblings = self._children.setdefault(parent, [])
            fresh = not siblings
            self._dirty.add(node)
            siblings.append(node)  # placed properly when the parent's children are next sorted
            if parent == ROOT or not fresh:
                return
            node = parent

    def _unlink(self, node: int) -> None:
        while True:
            parent = self._parent(node)
            siblings = self._children[parent]
            siblings.remove(node)
            self._dirty.discard(node)
            self._args.pop(node, None)
            if siblings or parent == ROOT:
                return
            del self._children[parent]
            node = parent

    def _sorted_children(self, node: int) -> list[int]:
        """The node's active children, best first, re-placing those that changed."""
        children = self._children.get(node, [])
        stale = [c for c in children if c in self._dirty]
        if not stale:
            return children
        kept = [c for c in children if c not in self._dirty]
        for child in sorted(stale, key=lambda c: (self.queues.tree.created[c], self.queues.tree.names[c])):
            self._dirty.discard(child)
            self._args[child] = self._compute_args(child)
            self._insert(kept, child)
        self._children[node] = kept
        return kept

    def _insert(self, ordered: list[int], child: int) -> None:
        low, high = 0, len(ordered)
        while low < high:
            mid = (low + high) // 2
            if self._before(child, ordered[mid]):
                high = mid
            else:
                low = mid + 1
        ordered.insert(low, child)

    def _before(self, left: int, right: int) -> bool:
        la, ra = self._args[left], self._args[right]
        result = self.queues.compare(left, right, la[0], ra[0], la[1], ra[1])
        return result > 0 if self.victims else result < 0

    def _compute_args(self, node: int) -> OrderArgs:
        leaf = node
        while leaf not in self._jobs:
            leaf = self._sorted_children(leaf)[0]
        job = self._jobs[leaf][0][2]
        if not self.victims:
            return self.request_of(job), None
        assert self.allocated_of is not None
        given_back = np.zeros(3)
        for popped in [*self._popped.get(leaf, []), job]:
            given_back = given_back + self.allocated_of(popped)
        return np.zeros(3), given_back


class _Reversed:
    """Inverts the order of one key component (victims: the job scheduled last comes first)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __lt__(self, other: _Reversed) -> bool:
        return bool(other.value < self.value)  # type: ignore[operator]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and bool(self.value == other.value)

    def __hash__(self) -> int:
        return hash(self.value)
