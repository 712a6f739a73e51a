"""Which running jobs may be victims, and in which order they are offered."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable

from coordinator.job_order import Entry, JobOrder
from coordinator.jobs import Job
from coordinator.session import SessionState


class VictimPool:
    """Jobs that could be victims, per leaf queue, sorted in victim order. An action builds one
    and shares it across all its searches. A commit changes only the jobs it touched (the
    preemptor, its victims, the victims' jobs moved elsewhere): ``refresh`` takes each of them
    out of its queue's list and puts it back where its new key sorts, if it is still a
    candidate, so the cost of a commit does not grow with the number of running jobs."""

    def __init__(self, state: SessionState) -> None:
        self.state = state
        self._by_queue: dict[str, list[Entry]] | None = None
        self._entries: dict[str, Entry] = {}  # job key -> its entry in its queue's list
        self._seq: dict[str, int] = {}  # job key -> tie-break, the job's place in the session

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

    def refresh(self, changed: Iterable[str]) -> None:
        """Re-place the jobs whose tasks changed. A queue's list is replaced, not edited: an
        order built earlier may still walk the old one."""
        if self._by_queue is None:
            return
        by_queue = self._by_queue
        edited: dict[str, list[Entry]] = {}
        for key in changed:
            job = self.state.jobs.get(key)
            if job is None:
                continue
            old = self._entries.pop(key, None)
            if old is not None:
                entries = edited.get(job.queue)
                if entries is None:
                    entries = edited[job.queue] = list(by_queue.get(job.queue, ()))
                del entries[bisect.bisect_left(entries, old[:2], key=_rank)]
            if self._candidate(job):
                entry = (job.victim_key(), self._seq[key], job)
                entries = edited.get(job.queue)
                if entries is None:
                    entries = edited[job.queue] = list(by_queue.get(job.queue, ()))
                bisect.insort(entries, entry, key=_rank)
                self._entries[key] = entry
        for queue, entries in edited.items():
            if entries:
                by_queue[queue] = entries
            else:
                by_queue.pop(queue, None)

    def _order(self) -> JobOrder:
        state = self.state
        return JobOrder(
            state.queues, lambda j: state.job_request(j, real=False), victims=True, allocated_of=state.job_allocated
        )

    def _candidate(self, job: Job) -> bool:
        return (
            job.preemptible
            and bool(job.active_allocated())
            # its queue was deleted (or left the tree) while it ran: no queue to reclaim from
            and self.state.queues.has(job.queue)
            and any(t.status.alive and t.node for t in job.tasks)
        )

    def _build(self, order: JobOrder) -> dict[str, list[Entry]]:
        by_queue: dict[str, list[Entry]] = {}
        self._seq = {key: seq for seq, key in enumerate(self.state.jobs)}
        for key, job in self.state.jobs.items():
            if self._candidate(job):
                entry = (order.key_of(job), self._seq[key], job)
                by_queue.setdefault(job.queue, []).append(entry)
                self._entries[key] = entry
        for entries in by_queue.values():
            entries.sort(key=_rank)
        return by_queue


def _rank(entry: Entry) -> tuple[tuple[object, ...], int]:
    """An entry's place: its key, then its place in the session (jobs never compare)."""
    return entry[0], entry[1]
