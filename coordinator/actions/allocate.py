"""The allocate action: place pending jobs in fair order, gangs all-or-nothing.

A job's pods are placed one at a time on the best-scoring node; if any pod cannot be
placed the whole attempt is rolled back. If some pod had to be pipelined (it fits only
once releasing pods finish) and the gang would not otherwise be complete, every pod
placed in the attempt is pipelined too, so half a gang is never bound. Elastic jobs
that still have pods to place go back into the order and get one more pod per turn.
"""

from __future__ import annotations

from coordinator.job_order import JobOrder
from coordinator.jobs import Job, Status, Task
from coordinator.session import SessionState
from coordinator.statement import Statement
from shards.placement import Mask


def allocate_job(
    state: SessionState, stmt: Statement, job: Job, pipeline_only: bool, real: bool, allowed: Mask | None = None
) -> bool:
    """KAI's AllocateJob: queue capacity first, then every task to allocate, in order.
    All or nothing: a failure undoes the pods this call placed."""
    tasks = job.tasks_to_allocate(real)
    if not tasks:
        return False
    total = [0.0, 0.0, 0.0]
    for task in tasks:
        for i, amount in enumerate(state.requested_quota(task)):
            total[i] += amount
    verdict = state.queues.check_capacity(job.queue, total, job.preemptible)
    if not verdict.ok:
        if not pipeline_only:
            job.fit_errors["allocate"] = f"{verdict.reason}: {verdict.message}"
        return False
    checkpoint = stmt.checkpoint()
    for placed, task in enumerate(tasks):
        choice = state.placer.best_node(task.shape, pipeline_only=pipeline_only, allowed=allowed)
        if choice is None:
            if not pipeline_only:
                job.fit_errors["allocate"] = _task_failure(state, job, task, placed)
            stmt.rollback(checkpoint)
            return False
        stmt.place(task, choice, state.accepted_quota(task, choice.node))
    return True


def _task_failure(state: SessionState, job: Job, task_failed: Task, placed: int) -> str:
    why = state.explain(task_failed.shape)
    pod_set = job.pod_sets.get(task_failed.subgroup)
    minimum = pod_set.min_available if pod_set else 1
    gang = any(ps.min_available > 1 for ps in job.pod_sets.values())
    if gang and pod_set is not None and pod_set.active_used < minimum:
        scope = "" if len(job.pod_sets) == 1 else f" in sub-group {pod_set.name}"
        return (
            f"gang needs {minimum} pods{scope}; resources were found for {placed}; "
            f"pod {task_failed.pod.name} does not fit: {why}"
        )
    return f"pod {task_failed.pod.name} does not fit: {why}"


class AllocateAction:
    name = "allocate"

    def execute(self, state: SessionState, stmt: Statement) -> None:
        order = JobOrder(state.queues, lambda j: state.job_request(j, real=False))
        order.push_all(eligible_jobs(state, pending_only=True))
        while not order.empty():
            job = order.pop()
            assert job is not None
            checkpoint = stmt.checkpoint()
            already_running = job.active_allocated() > 0
            ok, pipelined = self._attempt(state, stmt, job)
            if not ok:
                stmt.rollback(checkpoint)
                continue
            stmt.commit()
            if not pipelined and not already_running:
                state.last_start[job.key] = state.now
            if job.tasks_to_allocate(real=True):
                order.push(job)

    @staticmethod
    def _attempt(state: SessionState, stmt: Statement, job: Job) -> tuple[bool, bool]:
        placing = job.tasks_to_allocate(real=True)  # the pods this attempt places, if it succeeds
        if not allocate_job(state, stmt, job, pipeline_only=False, real=True):
            return False, False
        if job.should_pipeline():
            for task in placing:
                if task.status is Status.ALLOCATED:
                    stmt.to_pipelined(task)
            return True, True
        return True, False


def eligible_jobs(state: SessionState, pending_only: bool, preemptible_only: bool = False) -> list[Job]:
    """KAI's job filters: ready, with pending pods, in an existing leaf queue."""
    out = []
    for job in state.jobs.values():
        if not job.ready_for_scheduling():
            continue
        if pending_only and not job.has_pending():
            continue
        if preemptible_only and not job.preemptible:
            continue
        if not state.queues.has(job.queue) or not state.queues.is_leaf(job.queue):
            continue
        out.append(job)
    return out
