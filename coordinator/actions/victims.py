"""The jobs a victim search walks, kept sorted across its commits: running jobs that could be
victims (in victim order) and jobs with pending pods (in job order), per leaf queue."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable

from coordinator.job_order import Entry, JobOrder
from coordinator.jobs import Job
from coordinator.session import SessionState

JobKey = Callable[[Job], tuple[object, ...]]


class SortedJobs:
    """The jobs that pass ``admits``, per leaf queue, each queue's list sorted by ``key`` (then by
    the job's place in the session: no two entries tie). Built on first use; a commit changes only
    the jobs it touched (the preemptor, its victims, the victims' jobs moved elsewhere), so
    ``refresh`` takes each of those out of its queue's list and puts it back where its new key
    sorts, if it still passes: the cost of a commit does not grow with the jobs of the cluster."""

    def __init__(
        self, state: SessionState, jobs: Callable[[], Iterable[Job]], key: JobKey, admits: Callable[[Job], bool]
    ):
        self.state = state
        self._jobs = jobs
        self._key = key
        self._admits = admits
        self._by_queue: dict[str, list[Entry]] | None = None
        self._entries: dict[str, Entry] = {}  # job key -> its entry in its queue's list
        self._seq: dict[str, int] = {}  # job key -> its place in the session

    def by_queue(self) -> dict[str, list[Entry]]:
        """Queue -> its jobs' entries in order. ``refresh`` edits the lists in place: an order
        built from them (a search step's victims queue, a simulation's pending jobs) must not be
        walked after the next commit; the victim search builds them afresh for every step."""
        if self._by_queue is None:
            self._by_queue = {}
            self._seq = {key: seq for seq, key in enumerate(self.state.jobs)}
            for job in self._jobs():
                if self._admits(job):
                    entry = (self._key(job), self._seq[job.key], job)
                    self._by_queue.setdefault(job.queue, []).append(entry)
                    self._entries[job.key] = entry
            for entries in self._by_queue.values():
                entries.sort(key=_rank)
        return self._by_queue

    def refresh(self, changed: Iterable[str]) -> None:
        """Re-place the jobs whose tasks changed (in place: a list of tens of thousands of running
        jobs is not copied for each commit)."""
        if self._by_queue is None:
            return  # built later, from the session as it will be then
        by_queue = self._by_queue
        for key in changed:
            job = self.state.jobs.get(key)
            if job is None:
                continue
            old = self._entries.pop(key, None)
            if old is not None:
                entries = by_queue[job.queue]
                at = bisect.bisect_left(entries, _rank(old), key=_rank)
                if at >= len(entries) or entries[at] is not old:  # keys that do not order: look it up
                    at = next(i for i, entry in enumerate(entries) if entry is old)
                del entries[at]
                if not entries:
                    del by_queue[job.queue]
            if self._admits(job):
                entry = (self._key(job), self._seq[key], job)
                bisect.insort(by_queue.setdefault(job.queue, []), entry, key=_rank)
                self._entries[key] = entry


def _rank(entry: Entry) -> tuple[tuple[object, ...], int]:
    """An entry's place: its key, then its place in the session (jobs never compare)."""
    return entry[0], entry[1]


class VictimPool:
    """Jobs that could be victims, per leaf queue, in victim order. An action builds one and
    shares it across all its searches, refreshed after each commit."""

    def __init__(self, state: SessionState) -> None:
        self.state = state
        self.jobs = SortedJobs(state, state.jobs.values, state.hooks.job_keys.victim, self._candidate)

    def queue(self, accept_queue: Callable[[str], bool], accept_job: Callable[[Job], bool]) -> JobOrder:
        """KAI's victims queue: most over-served queue first and, inside a queue, the job that
        would be scheduled last; ``accept_job`` is applied lazily, as jobs come up."""
        state = self.state
        order = JobOrder(
            state.queues,
            lambda j: state.job_request(j, real=False),
            victims=True,
            allocated_of=state.job_allocated,
            keys=state.hooks.job_keys,
        )
        for queue, entries in self.jobs.by_queue().items():
            if accept_queue(queue):
                order.push_sorted(queue, entries, accept_job)
        return order

    def refresh(self, changed: Iterable[str]) -> None:
        self.jobs.refresh(changed)

    def _candidate(self, job: Job) -> bool:
        return (
            job.preemptible
            and bool(job.active_allocated())
            # its queue was deleted (or left the tree) while it ran: no queue to reclaim from
            and self.state.queues.has(job.queue)
            and any(t.status.alive and t.node for t in job.tasks)
        )


def pending_pool(state: SessionState) -> SortedJobs:
    """Jobs with pending pods, per leaf queue, in job order: what a victim search's simulation
    walks past on its way to the jobs it acts on."""
    return SortedJobs(state, state.pending_jobs, state.hooks.job_keys.order, Job.has_pending)
