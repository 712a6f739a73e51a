"""KAI v0.12's job order as its code runs it, heaps and all: a test-only stand-in for
``coordinator.job_order.JobOrder``.

kai-ray picks the best department, queue and job by KAI's documented order every time. KAI v0.12
(``JobsOrderByQueues``, ``pkg/scheduler/actions/utils/job_order_by_queue.go``) keeps three levels
of Go heaps and re-places only the top entry of a heap it flagged, and its comparison of two
departments takes each department's best queue by popping that department's queue heap, whose top
may be the queue just served, flagged but not yet re-placed. Which queue is then on top depends on
the heap's shape, and the shape on the order in which Go walked two maps when the heaps were built
(``ssn.Queues`` and the departments' map), which Go draws anew each run. So KAI's choice of
department can differ from the documented order, and from run to run.

This class does what that code does, with the two map walks drawn from a seeded generator, so the
oracle tier can ask: is there a map order under which kai-ray, running KAI's heaps, decides what
KAI decided? Only leaf queues and their parents ("departments") take part, as in KAI v0.12.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import numpy as np

from coordinator.job_order import ROOT, Entry, JobOrder, OrderArgs
from coordinator.jobs import Job

T = TypeVar("T")


class GoHeap(Generic[T]):
    """Go's ``container/heap`` on a list: the same sift steps, so a less function that has gone
    stale leaves the same shape Go's would."""

    def __init__(self, less: Callable[[T, T], bool]) -> None:
        self.items: list[T] = []
        self._less = less

    def __len__(self) -> int:
        return len(self.items)

    def peek(self) -> T:
        return self.items[0]

    def push(self, item: T) -> None:
        self.items.append(item)
        self._up(len(self.items) - 1)

    def pop(self) -> T:
        last = len(self.items) - 1
        self._swap(0, last)
        self._down(0, last)
        return self.items.pop()

    def fix(self, index: int) -> None:
        if not self._down(index, len(self.items)):
            self._up(index)

    def _before(self, i: int, j: int) -> bool:
        return self._less(self.items[i], self.items[j])

    def _swap(self, i: int, j: int) -> None:
        self.items[i], self.items[j] = self.items[j], self.items[i]

    def _up(self, child: int) -> None:
        while child > 0:
            parent = (child - 1) // 2
            if not self._before(child, parent):
                return
            self._swap(parent, child)
            child = parent

    def _down(self, start: int, size: int) -> bool:
        node = start
        while True:
            left = 2 * node + 1
            if left >= size:
                break
            best = left
            if left + 1 < size and self._before(left + 1, left):
                best = left + 1
            if not self._before(best, node):
                break
            self._swap(node, best)
            node = best
        return node > start


class KaiHeapJobOrder(JobOrder):
    """``JobOrder``'s interface over KAI v0.12's heaps. Jobs pushed before the first ``pop`` or
    ``empty`` are KAI's ``InitializeWithJobs``; later pushes are its ``PushJob``."""

    def __init__(self, *args: Any, map_order: random.Random, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # JobOrder's own parameters, as its callers pass them
        self._map_order = map_order
        self._built = False
        self._queue_jobs: dict[int, GoHeap[Job]] = {}  # leaf -> its jobs
        self._department_queues: dict[int, GoHeap[int]] = {}  # department -> its leaves with jobs
        self._departments: GoHeap[int] = GoHeap(self._department_first)
        self._stale_queue: set[int] = set()
        self._stale_department: set[int] = set()
        self._popped: dict[int, list[Job]] = {}  # victims: each leaf's jobs popped so far

    # ------------------------------------------------------------------ JobOrder's interface
    def push(self, job: Job) -> None:
        leaf = self._leaf(job)
        if leaf is None:
            return
        if not self._built:
            self._jobs_of(leaf).push(job)
            return
        department = self._department(leaf)
        if department not in self._department_queues:
            self._department_queues[department] = GoHeap(self._queue_first)
            self._departments.push(department)
        if leaf not in self._queue_jobs:
            self._queue_jobs[leaf] = GoHeap(self._job_first)
            self._department_queues[department].push(leaf)
        self._queue_jobs[leaf].push(job)
        self._stale_queue.add(leaf)
        self._stale_department.add(department)

    def push_sorted(self, queue: str, entries: list[Entry], accept: Callable[[Job], bool] | None = None) -> None:
        # KAI filters its victims when it builds their queue, not as it walks it.
        self.push_all(entry[2] for entry in entries if accept is None or accept(entry[2]))

    def push_all(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            self.push(job)

    def empty(self) -> bool:
        self._build()
        return not self._departments

    def alone(self) -> bool:
        return False

    def pop_alone(self) -> Job:
        job = self.pop()
        assert job is not None
        return job

    def __len__(self) -> int:
        return sum(len(heap) for heap in self._queue_jobs.values())

    def remaining(self) -> list[Job]:
        return [job for heap in self._queue_jobs.values() for job in heap.items]

    def pop(self) -> Job | None:
        """``PopNextJob``."""
        self._build()
        if not self._departments:
            return None
        department = self._next_department()
        leaf = self._next_queue(department) if department is not None else None
        if department is None or leaf is None:
            return None
        jobs = self._queue_jobs[leaf]
        job = jobs.pop()
        if self.victims:
            self._popped.setdefault(leaf, []).append(job)
        queues = self._department_queues[department]
        if jobs:
            self._stale_queue.add(leaf)
        else:
            queues.pop()
            del self._queue_jobs[leaf]
        if queues:
            self._stale_department.add(department)
        else:
            self._departments.pop()
            del self._department_queues[department]
        return job

    # ------------------------------------------------------------------ KAI's steps
    def _build(self) -> None:
        """``buildActiveJobOrderPriorityQueues``: leaves pushed into their department's heap in
        one walk of a Go map, departments into theirs in another."""
        if self._built:
            return
        self._built = True
        leaves = [leaf for leaf, jobs in self._queue_jobs.items() if jobs]
        self._map_order.shuffle(leaves)
        for leaf in leaves:
            department = self._department(leaf)
            self._department_queues.setdefault(department, GoHeap(self._queue_first)).push(leaf)
        departments = list(self._department_queues)
        self._map_order.shuffle(departments)
        for department in departments:
            self._departments.push(department)

    def _next_department(self) -> int | None:
        while True:
            department = self._departments.peek()
            if department not in self._stale_department:
                return department if self._department_queues[department] else None
            self._departments.fix(0)
            self._stale_department.discard(department)

    def _next_queue(self, department: int) -> int | None:
        queues = self._department_queues[department]
        while True:
            leaf = queues.peek()
            if leaf not in self._stale_queue:
                return leaf if self._queue_jobs[leaf] else None
            queues.fix(0)
            self._stale_queue.discard(leaf)

    def _job_first(self, left: Job, right: Job) -> bool:
        return self.key_of(left) < self.key_of(right)

    def _queue_first(self, left: int, right: int) -> bool:
        """``buildFuncOrderBetweenQueuesWithJobs``: a queue without jobs goes first."""
        left_jobs, right_jobs = self._queue_jobs.get(left), self._queue_jobs.get(right)
        if not left_jobs:
            return not self.victims
        if not right_jobs:
            return self.victims
        return self._ordered(left, right, left, right, _top(left_jobs), _top(right_jobs))

    def _department_first(self, left: int, right: int) -> bool:
        """``buildFuncOrderBetweenDepartmentsWithJobs``: each department judged by the queue on
        top of its heap, taken off and put back, whether or not that top is up to date."""
        left_queues, right_queues = self._department_queues[left], self._department_queues[right]
        if not left_queues:
            return not self.victims
        if not right_queues:
            return self.victims
        left_best, right_best = left_queues.pop(), right_queues.pop()
        left_job, right_job = _top(self._queue_jobs[left_best]), _top(self._queue_jobs[right_best])
        left_queues.push(left_best)
        right_queues.push(right_best)
        return self._ordered(left, right, left_best, right_best, left_job, right_job)

    def _ordered(self, left: int, right: int, left_leaf: int, right_leaf: int, left_job: Job, right_job: Job) -> bool:
        """``ssn.QueueOrderFn`` between two queues, each judged with a leaf's job, reversed for
        victims as KAI reverses it (``!less``)."""
        la, ra = self._kai_args(left_leaf, left_job), self._kai_args(right_leaf, right_job)
        first = self.queues.compare(left, right, la[0], ra[0], la[1], ra[1]) < 0
        return not first if self.victims else first

    def _kai_args(self, leaf: int, job: Job) -> OrderArgs:
        if not self.victims:
            return self.request_of(job), None
        assert self.allocated_of is not None
        given_back = sum((self.allocated_of(p) for p in self._popped.get(leaf, ())), np.zeros(3))
        return np.zeros(3), given_back + self.allocated_of(job)

    def _jobs_of(self, leaf: int) -> GoHeap[Job]:
        return self._queue_jobs.setdefault(leaf, GoHeap(self._job_first))

    def _leaf(self, job: Job) -> int | None:
        tree = self.queues.tree
        leaf = tree.index.get(job.queue)
        return leaf if leaf is not None and tree.is_leaf(leaf) else None

    def _department(self, leaf: int) -> int:
        parent = int(self.queues.tree.parent[leaf])
        return parent if parent >= 0 else ROOT


def _top(jobs: GoHeap[Job]) -> Job:
    """A queue's next job as KAI reads it: popped and pushed back."""
    job = jobs.pop()
    jobs.push(job)
    return job
