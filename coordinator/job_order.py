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

from coordinator.jobs import Job
from coordinator.plugins import KAI_KEYS, JobKeys
from coordinator.queue_state import OrderPrefix, QueueState
from kai_ray.model.fairshare import Array

RequestOf = Callable[[Job], Array]
ROOT = -1
OrderArgs = tuple[Array, Array | None]
Entry = tuple[tuple[object, ...], int, Job]
_NOTHING = np.zeros(3)


class _Leaf:
    """A leaf queue's jobs: a heap of pushed jobs plus, optionally, a list sorted once and
    walked with a cursor (victim candidates shared by many searches), filtered lazily."""

    __slots__ = ("heap", "sorted", "cursor", "accept", "accepted")

    def __init__(self) -> None:
        self.heap: list[Entry] = []
        self.sorted: list[Entry] = []
        self.cursor = 0
        self.accept: Callable[[Job], bool] | None = None
        # The cursor's entry once ``accept`` took it: the head is asked for several times per pop
        # (by the queue order at each level, then by the pop), and each victim filter behind
        # ``accept`` is not free.
        self.accepted = -1

    def head(self) -> Entry | None:
        listed = self._listed()
        if listed is None:
            return self.heap[0] if self.heap else None
        return listed if not self.heap or listed < self.heap[0] else self.heap[0]

    def _listed(self) -> Entry | None:
        while self.cursor < len(self.sorted):
            entry = self.sorted[self.cursor]
            if self.accepted == self.cursor or self.accept is None or self.accept(entry[2]):
                self.accepted = self.cursor
                return entry
            self.cursor += 1
        return None

    def pop(self) -> Job:
        listed = self._listed()
        if listed is not None and (not self.heap or listed < self.heap[0]):
            self.cursor += 1
            return listed[2]
        return heapq.heappop(self.heap)[2]

    def empty(self) -> bool:
        return self.head() is None


class JobOrder:
    def __init__(
        self,
        queues: QueueState,
        request_of: RequestOf,
        victims: bool = False,
        allocated_of: RequestOf | None = None,
        keys: JobKeys = KAI_KEYS,
    ) -> None:
        self.queues = queues
        self.request_of = request_of
        self.victims = victims
        self._key = keys.victim if victims else keys.order
        self.allocated_of = allocated_of  # victim mode: what a popped job gives back
        self._jobs: dict[int, _Leaf] = {}  # active leaf queues only
        self._children: dict[int, list[int]] = {}  # queue (or ROOT) -> active children, best first
        self._dirty: set[int] = set()
        self._args: dict[int, OrderArgs] = {}
        # Each child's ``order_prefix`` with the allocation it was worked out on: it holds while
        # that allocation (the one thing of the session it reads) and the child's arguments stay
        # put, so a pop re-places its queue with one prefix worked out instead of two per look.
        self._prefixes: dict[int, tuple[list[float], OrderPrefix]] = {}
        # Victim mode: what the jobs popped from each leaf so far give back, summed as they are
        # popped. Summing the popped list again for every order decision made a long search
        # (thousands of victims popped before one node holds enough) quadratic in its victims.
        self._given_back: dict[int, Array] = {}
        self._seq = 0
        self._unmarked: int | None = None  # a leaf popped from alone whose path is not marked yet

    def push_all(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            self.push(job)

    def __len__(self) -> int:
        return sum(len(leaf.heap) + len(leaf.sorted) - leaf.cursor for leaf in self._jobs.values())

    def remaining(self) -> list[Job]:
        """The jobs still to come, in no particular order: popping them in order costs a walk of
        the queue tree each, which a caller that gives them all the same answer does not need."""
        out = [entry[2] for leaf in self._jobs.values() for entry in leaf.heap]
        for leaf in self._jobs.values():
            out.extend(e[2] for e in leaf.sorted[leaf.cursor :] if leaf.accept is None or leaf.accept(e[2]))
        return out

    def empty(self) -> bool:
        return not self._children.get(ROOT)

    def push(self, job: Job) -> None:
        if self._unmarked is not None:
            self._mark_path(self._unmarked)
            self._unmarked = None
        tree = self.queues.tree
        leaf = tree.index.get(job.queue)
        if leaf is None or not tree.is_leaf(leaf):
            return
        self._seq += 1
        fresh = leaf not in self._jobs
        heapq.heappush(self._jobs.setdefault(leaf, _Leaf()).heap, (self.key_of(job), self._seq, job))
        self._mark_path(leaf)
        if fresh:
            self._link(leaf)

    def key_of(self, job: Job) -> tuple[object, ...]:
        return self._key(job)

    def push_sorted(self, queue: str, entries: list[Entry], accept: Callable[[Job], bool] | None = None) -> None:
        """Offer a queue's jobs already sorted by ``key_of`` (shared lists are not copied)."""
        tree = self.queues.tree
        leaf_index = tree.index.get(queue)
        if leaf_index is None or not tree.is_leaf(leaf_index) or leaf_index in self._jobs:
            return
        leaf = _Leaf()
        leaf.sorted, leaf.accept = entries, accept
        if leaf.empty():
            return
        self._jobs[leaf_index] = leaf
        self._mark_path(leaf_index)
        self._link(leaf_index)

    def alone(self) -> bool:
        """Whether one leaf queue is all that is left (then no queue order needs working out)."""
        node = ROOT
        while node not in self._jobs:
            children = self._children.get(node)
            if not children or len(children) != 1:
                return False
            node = children[0]
        return True

    def pop_alone(self) -> Job:
        """``pop`` when ``alone()``: the only leaf's next job, without judging queues against
        siblings they do not have."""
        node = ROOT
        while node not in self._jobs:
            node = self._children[node][0]
        leaf = self._jobs[node]
        job = leaf.pop()
        self._unmarked = node  # its head changed: marked dirty before anyone compares queues again
        if leaf.empty():
            del self._jobs[node]
            self._unlink(node)
            self._unmarked = None
        return job

    def pop(self) -> Job | None:
        if self._unmarked is not None:
            self._mark_path(self._unmarked)
            self._unmarked = None
        node = ROOT
        while node not in self._jobs:
            children = self._sorted_children(node)
            if not children:
                return None
            node = children[0]
        leaf = self._jobs[node]
        job = leaf.pop()
        if self.victims:
            assert self.allocated_of is not None
            self._given_back[node] = self._given_back.get(node, _NOTHING) + self.allocated_of(job)
        self._mark_path(node)
        if leaf.empty():
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
            self._prefixes.pop(node, None)
            if siblings or parent == ROOT:
                return
            del self._children[parent]
            node = parent

    def _sorted_children(self, node: int) -> list[int]:
        """The node's active children, best first, re-placing those that changed."""
        children = self._children.get(node, [])
        if len(children) == 1:
            # Nothing to place it against: its order arguments are worked out (it stays marked)
            # once a sibling joins. A search whose victims are all in one queue pops through a
            # chain of only children thousands of times per pending job.
            return children
        stale = [c for c in children if c in self._dirty]
        if not stale:
            return children
        kept = [c for c in children if c not in self._dirty]
        if len(stale) > 1:
            stale.sort(key=lambda c: (self.queues.tree.created[c], self.queues.tree.names[c]))
        for child in stale:
            self._dirty.discard(child)
            self._args[child] = self._compute_args(child)
            self._prefixes.pop(child, None)
            self._insert(kept, child)
        self._children[node] = kept
        return kept

    def _insert(self, ordered: list[int], child: int) -> None:
        """``child`` placed among ``ordered`` by a binary search (its prefix worked out once)."""
        prefix = self._prefix(child)
        low, high = 0, len(ordered)
        while low < high:
            mid = (low + high) // 2
            if self._before(child, prefix, ordered[mid]):
                high = mid
            else:
                low = mid + 1
        ordered.insert(low, child)

    def _before(self, left: int, first: OrderPrefix, right: int) -> bool:
        """Whether ``left`` (whose prefix is ``first``) goes before ``right``."""
        second = self._prefix(right)
        if first == second:
            result = self.queues.compare_tie(left, right)
            return result > 0 if self.victims else result < 0
        return first > second if self.victims else first < second

    def _prefix(self, node: int) -> OrderPrefix:
        """``QueueState.order_prefix`` of the child, as ``compare`` would work it out now."""
        allocated = self.queues.alloc_rows[node]
        kept = self._prefixes.get(node)
        if kept is not None and kept[0] == allocated:
            return kept[1]
        request, victims = self._args[node]
        prefix = self.queues.order_prefix(node, request, victims)
        self._prefixes[node] = (list(allocated), prefix)
        return prefix

    def _compute_args(self, node: int) -> OrderArgs:
        leaf = node
        while leaf not in self._jobs:
            leaf = self._sorted_children(leaf)[0]
        head = self._jobs[leaf].head()
        assert head is not None
        job = head[2]
        if not self.victims:
            return self.request_of(job), None
        assert self.allocated_of is not None
        # The jobs of a search do not change between its pops (each scenario it tries is rolled
        # back before the next pop), so the sums taken at each pop still hold.
        return np.zeros(3), self._given_back.get(leaf, _NOTHING) + self.allocated_of(job)
