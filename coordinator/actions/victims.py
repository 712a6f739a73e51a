"""Which running jobs may be victims, and in which order they are offered."""

from __future__ import annotations

from collections.abc import Callable

from coordinator.job_order import Entry, JobOrder
from coordinator.jobs import Job, Task
from coordinator.session import SessionState


class VictimPool:
    """Jobs that could be victims, per leaf queue, sorted once in victim order. An action
    builds one and shares it across all its searches; a commit changes who runs, so the
    action throws the pool away after every commit."""

    def __init__(self, state: SessionState) -> None:
        self.state = state
        self._by_queue: dict[str, list[Entry]] | None = None

    def invalidate(self) -> None:
        self._by_queue = None

    def queue(self, accept_queue: Callable[[str], bool], accept_job: Callable[[Job], bool]) -> JobOrder:
        """KAI's victims queue: most over-served queue first and, inside a queue, the job that
        would be scheduled last; ``accept_job`` is applied lazily, as jobs come up."""
        order = self._order()
        if self._by_queue is None:
            self._by_queue = self._build(order)
        for queue, entries in self._by_queue.items():
            if accept_queue(queue):
                order.push_sorted(queue, entries, accept_job)
        return order

    def _order(self) -> JobOrder:
        state = self.state
        return JobOrder(
            state.queues, lambda j: state.job_request(j, real=False), victims=True, allocated_of=state.job_allocated
        )

    def _build(self, order: JobOrder) -> dict[str, list[Entry]]:
        by_queue: dict[str, list[Entry]] = {}
        for seq, job in enumerate(self.state.jobs.values()):
            if not job.preemptible or not job.active_allocated():
                continue
            if not any(t.status.alive and t.node for t in job.tasks):
                continue
            by_queue.setdefault(job.queue, []).append((order.key_of(job), seq, job))
        for entries in by_queue.values():
            entries.sort()
        return by_queue


def min_runtime_protected(state: SessionState, job: Job, minimum: float | None) -> bool:
    """A victim that started less than ``minimum`` seconds ago is protected (KAI's minruntime)."""
    if not minimum:
        return False
    started = state.last_start.get(job.key)
    return started is not None and state.now - started < minimum


def _path(state: SessionState, queue: str) -> list[str]:
    """Queue names from the top of the tree down to ``queue``."""
    tree = state.queues.tree
    i = tree.index.get(queue)
    path: list[str] = []
    while i is not None and i >= 0:
        path.append(tree.names[i])
        i = int(tree.parent[i])
    return path[::-1]


def preempt_min_runtime(state: SessionState, victim_queue: str) -> float:
    """KAI: the victim's queue's preemptMinRuntime, else its nearest ancestor's, else the default."""
    for name in reversed(_path(state, victim_queue)):
        own = state.queue_min_runtimes.get(name, (None, None))[0]
        if own is not None:
            return own
    return state.config.defaultPreemptMinRuntime


def reclaim_min_runtime(state: SessionState, reclaimer_queue: str, victim_queue: str) -> float:
    """KAI's "lca" resolution: start at the victim-side child of the two queues' lowest common
    ancestor (the victim's top queue when they share none) and take the first reclaimMinRuntime
    found walking up, else the default."""
    mine, theirs = _path(state, reclaimer_queue), _path(state, victim_queue)
    default = state.config.defaultReclaimMinRuntime
    if not mine or not theirs:
        return default
    if mine[0] != theirs[0]:
        own = state.queue_min_runtimes.get(theirs[0], (None, None))[1]
        return default if own is None else own
    start = 0
    for i in range(min(len(mine), len(theirs))):
        if mine[i] != theirs[i]:
            break
        start = i
    if start + 1 < len(theirs):
        start += 1
    for name in reversed(theirs[: start + 1]):
        own = state.queue_min_runtimes.get(name, (None, None))[1]
        if own is not None:
            return own
    return default


def is_elastic(job: Job) -> bool:
    """KAI: some pod set has more pods than its minimum."""
    return any(ps.min_available < len(ps.tasks) for ps in job.pod_sets.values())


def keeps_its_minimum(job: Job, victims: list[Task]) -> bool:
    """KAI's check for a protected elastic victim: taking ``victims`` leaves every pod set with at
    least its minimum of pods in use (evicted pods still count as in use while they release)."""
    taken: dict[str, int] = {}
    for task in victims:
        name = task.subgroup if task.subgroup in job.pod_sets else next(iter(job.pod_sets))
        taken[name] = taken.get(name, 0) + 1
    return all(job.pod_sets[name].active_used - n >= job.pod_sets[name].min_available for name, n in taken.items())
