"""Which running jobs may be victims, and in which order they are offered."""

from __future__ import annotations

from collections.abc import Callable

from coordinator.job_order import Entry, JobOrder
from coordinator.jobs import Job
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
            if not self.state.queues.has(job.queue):
                continue  # its queue was deleted (or left the tree) while it ran: no queue to reclaim from
            if not any(t.status.alive and t.node for t in job.tasks):
                continue
            by_queue.setdefault(job.queue, []).append((order.key_of(job), seq, job))
        for entries in by_queue.values():
            entries.sort()
        return by_queue
