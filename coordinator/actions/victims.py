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
    sorts, if it still passes: the cost of a commit does not grow with the jobs of the cluster.
    ``rebind`` carries the lists into the next session the same way (``VictimLists``)."""

    def __init__(
        self,
        state: SessionState,
        jobs: Callable[[SessionState], Iterable[Job]],
        key: JobKey,
        admits: Callable[[SessionState, Job], bool],
    ):
        self.state = state
        self._jobs = jobs
        self.key = key  # what the lists are sorted by
        self._admits = admits
        self._by_queue: dict[str, list[Entry]] | None = None
        self._entries: dict[str, Entry] = {}  # job key -> its entry in its queue's list
        self._seq: dict[str, int] = {}  # job key -> its place in the session
        self._built_on: dict[str, Job] | None = None  # the session's job map the lists hold jobs of

    def rebind(self, state: SessionState, changed: Iterable[str] | None) -> None:
        """Carry the lists into ``state``'s session: re-place the jobs that may have changed since
        the lists were last refreshed, or start over when that is unknown (None) or the session's
        jobs are other objects (a session opened from scratch)."""
        same_jobs = state.jobs is self._built_on and state.queues.tree is self.state.queues.tree
        self.state = state
        if changed is None or not same_jobs:
            self._by_queue, self._entries, self._seq, self._built_on = None, {}, {}, None
        else:
            self.refresh(changed)

    def by_queue(self) -> dict[str, list[Entry]]:
        """Queue -> its jobs' entries in order. ``refresh`` edits the lists in place: an order
        built from them (a search step's victims queue, a simulation's pending jobs) must not be
        walked after the next commit; the victim search builds them afresh for every step."""
        if self._by_queue is None:
            self._by_queue = {}
            self._built_on = self.state.jobs
            self._seq = {key: seq for seq, key in enumerate(self.state.jobs)}
            for job in self._jobs(self.state):
                if self._admits(self.state, job):
                    entry = (self.key(job), self._seq[job.key], job)
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
        jobs = self.state.jobs
        for key in changed:
            old = self._entries.pop(key, None)
            if old is not None:
                queue = old[2].queue
                entries = by_queue[queue]
                at = bisect.bisect_left(entries, _rank(old), key=_rank)
                if at >= len(entries) or entries[at] is not old:  # keys that do not order: look it up
                    at = next(i for i, entry in enumerate(entries) if entry is old)
                del entries[at]
                if not entries:
                    del by_queue[queue]
            job = jobs.get(key)
            if job is not None and self._admits(self.state, job):
                seq = self._seq.get(key)
                if seq is None:  # a job new since the lists were built: after every other
                    seq = self._seq[key] = len(self._seq)
                entry = (self.key(job), seq, job)
                bisect.insort(by_queue.setdefault(job.queue, []), entry, key=_rank)
                self._entries[key] = entry


def _rank(entry: Entry) -> tuple[tuple[object, ...], int]:
    """An entry's place: its key, then its place in the session (jobs never compare)."""
    return entry[0], entry[1]


class VictimPool:
    """Jobs that could be victims, per leaf queue, in victim order: one list per session, shared
    by the victim-search actions and their searches, refreshed after each commit."""

    def __init__(self, jobs: SortedJobs) -> None:
        self.jobs = jobs

    @staticmethod
    def sorted_jobs(state: SessionState) -> SortedJobs:
        return SortedJobs(state, _all_jobs, state.hooks.job_keys.victim, _candidate)

    def queue(self, accept_queue: Callable[[str], bool], accept_job: Callable[[Job], bool]) -> JobOrder:
        """KAI's victims queue: most over-served queue first and, inside a queue, the job that
        would be scheduled last; ``accept_job`` is applied lazily, as jobs come up."""
        state = self.jobs.state
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


def _all_jobs(state: SessionState) -> Iterable[Job]:
    return state.jobs.values()


def _candidate(state: SessionState, job: Job) -> bool:
    # A semi-preemptible job may give its surplus: it is here, and the session's victim filters
    # and minimum keepers (``coordinator.plugins.semipreemptible``) say how much it may give.
    return (
        (job.preemptible or job.semi_preemptible)
        and bool(job.active_allocated())
        # its queue was deleted (or left the tree) while it ran: no queue to reclaim from
        and state.queues.has(job.queue)
        and any(t.status.alive and t.node for t in job.tasks)
    )


def pending_pool(state: SessionState) -> SortedJobs:
    """Jobs with pending pods, per leaf queue, in job order: what a victim search's simulation
    walks past on its way to the jobs it acts on."""
    return SortedJobs(state, SessionState.pending_jobs, state.hooks.job_keys.order, _has_pending)


def _has_pending(state: SessionState, job: Job) -> bool:
    return job.has_pending()


class VictimLists:
    """The victim pool and the pending jobs' lists, kept across the actions of a session and across
    sessions: the coordinator keeps one, and each session's first victim search carries it over
    (``for_session``), re-placing only the jobs that changed since. Building the victim pool is a
    pass over every running job of the cluster (its key and whether it may be a victim): tens of
    thousands of jobs, about half a second, in every cycle that searches for victims otherwise."""

    def __init__(self) -> None:
        self._victims: SortedJobs | None = None
        self._pending: SortedJobs | None = None
        self._session: SessionState | None = None

    def for_session(self, state: SessionState, changed_in_session: Iterable[str]) -> tuple[VictimPool, SortedJobs]:
        """The lists as ``state`` stands: ``changed_in_session`` names the jobs the session changed
        since the lists were last refreshed in it (the statement's changes so far)."""
        if self._victims is None or self._pending is None or not self._same_keys(state):
            self._victims, self._pending = VictimPool.sorted_jobs(state), pending_pool(state)
        elif self._session is not state:
            # What changed is known relative to the opener's previous session: only lists last
            # synced in that very session can be carried over (a session between, whose actions
            # never asked for them, would leave its changes out).
            changed = state.jobs_changed_since_last_session()
            last = self._session.opened if self._session is not None else None
            follows = state.opened is not None and last is not None and state.opened == (last[0], last[1] + 1)
            carried = changed | set(changed_in_session) if changed is not None and follows else None
            self._victims.rebind(state, carried)
            self._pending.rebind(state, carried)
        else:
            changed_now = set(changed_in_session)
            self._victims.refresh(changed_now)
            self._pending.refresh(changed_now)
        self._session = state
        return VictimPool(self._victims), self._pending

    def _same_keys(self, state: SessionState) -> bool:
        """Whether the lists were sorted by the keys this session's plugins order jobs by."""
        keys = state.hooks.job_keys
        assert self._victims is not None and self._pending is not None
        return self._victims.key is keys.victim and self._pending.key is keys.order
