"""Which running jobs may be victims, and in which order they are offered."""

from __future__ import annotations

from collections.abc import Callable

from coordinator.job_order import JobOrder
from coordinator.jobs import Job
from coordinator.session_state import SessionState


def victims_queue(state: SessionState, accept: Callable[[Job], bool]) -> JobOrder:
    """KAI's victims queue: jobs with a live placed pod that pass ``accept``, most over-served
    queue first and, inside a queue, the job that would be scheduled last."""
    order = JobOrder(state.queues, lambda j: state.job_request(j, real=False), victims=True,
                     allocated_of=state.job_allocated)
    for job in state.jobs.values():
        if not any(t.status.alive and t.node for t in job.tasks):
            continue
        if accept(job):
            order.push(job)
    return order


def min_runtime_protected(state: SessionState, job: Job, minimum: float | None) -> bool:
    """A victim that started less than ``minimum`` seconds ago is protected (KAI's minruntime)."""
    if not minimum:
        return False
    started = state.last_start.get(job.key)
    return started is not None and state.now - started < minimum
