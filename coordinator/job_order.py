"""Which job to try next: KAI's queue tree walk (JobsOrderByQueues).

Starting at the top level, the best queue among siblings is chosen by the queue order
(judged with each queue's own best pending job), then the walk descends to a leaf and
pops its best job. Every pick is made with fresh allocations, so a queue that just got
resources falls back behind its siblings on the next pop.

For victims the order is reversed: the most over-served queue first and, inside it,
the job that would be scheduled last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from coordinator.fairshare.tree import Array
from coordinator.jobs import Job
from coordinator.queue_state import QueueState

RequestOf = Callable[[Job], Array]


class JobOrder:
    def __init__(self, queues: QueueState, request_of: RequestOf, victims: bool = False,
                 allocated_of: RequestOf | None = None) -> None:
        self.queues = queues
        self.request_of = request_of
        self.victims = victims
        self.allocated_of = allocated_of  # victim mode: what a popped job gives back
        tree = queues.tree
        self._jobs: dict[int, list[Job]] = {}
        self._popped: dict[int, list[Job]] = {}
        self._active_children: list[set[int]] = [set() for _ in range(len(tree))]
        self._roots: set[int] = set()

    def push_all(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            self.push(job)

    def push(self, job: Job) -> None:
        tree = self.queues.tree
        leaf = tree.index.get(job.queue)
        if leaf is None or not tree.is_leaf(leaf):
            return
        self._jobs.setdefault(leaf, []).append(job)
        self._link(leaf)

    def __len__(self) -> int:
        return sum(len(j) for j in self._jobs.values())

    def empty(self) -> bool:
        return not self._roots

    def pop(self) -> Job | None:
        if not self._roots:
            return None
        node = self._best(self._roots)
        while node not in self._jobs:
            node = self._best(self._active_children[node])
        jobs = self._jobs[node]
        job = self._best_job(jobs)
        jobs.remove(job)
        if self.victims:
            self._popped.setdefault(node, []).append(job)
        if not jobs:
            del self._jobs[node]
            self._unlink(node)
        return job

    # -------------------------------------------------------------- internals
    def _link(self, node: int) -> None:
        parent = int(self.queues.tree.parent[node])
        while parent >= 0:
            children = self._active_children[parent]
            if node in children:
                return
            children.add(node)
            node, parent = parent, int(self.queues.tree.parent[parent])
        self._roots.add(node)

    def _unlink(self, node: int) -> None:
        tree = self.queues.tree
        while True:
            parent = int(tree.parent[node])
            if parent < 0:
                self._roots.discard(node)
                return
            children = self._active_children[parent]
            children.discard(node)
            if children:
                return
            node = parent

    def _best_job(self, jobs: list[Job]) -> Job:
        if self.victims:
            return max(jobs, key=Job.order_key)
        return min(jobs, key=Job.order_key)

    def _leading_job(self, node: int) -> tuple[Job, int]:
        """The job a subtree would yield next, and the leaf it comes from."""
        while node not in self._jobs:
            node = self._best(self._active_children[node])
        return self._best_job(self._jobs[node]), node

    def _best(self, nodes: set[int]) -> int:
        tree = self.queues.tree
        ordered = sorted(nodes, key=lambda i: (tree.created[i], tree.names[i]))
        best = ordered[0]
        best_args = self._order_args(best)
        for other in ordered[1:]:
            other_args = self._order_args(other)
            result = self.queues.compare(other, best, *_pair(other_args, best_args))
            if self.victims:
                result = -result
            if result < 0:
                best, best_args = other, other_args
        return best

    def _order_args(self, node: int) -> tuple[Array, Array | None]:
        job, leaf = self._leading_job(node)
        if not self.victims:
            return self.request_of(job), None
        assert self.allocated_of is not None
        given_back = np.zeros(3)
        for popped in [*self._popped.get(leaf, []), job]:
            given_back = given_back + self.allocated_of(popped)
        return np.zeros(3), given_back


def _pair(left: tuple[Array, Array | None], right: tuple[Array, Array | None]
          ) -> tuple[Array, Array, Array | None, Array | None]:
    return left[0], right[0], left[1], right[1]
