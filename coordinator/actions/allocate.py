"""The allocate action: place pending jobs in fair order, gangs all-or-nothing.

A job's pods are placed one at a time on the best-scoring node; if any pod cannot be
placed the whole attempt is rolled back. If some pod had to be pipelined (it fits only
once releasing pods finish) and the gang would not otherwise be complete, every pod
placed in the attempt is pipelined too, so half a gang is never bound. Elastic jobs
that still have pods to place go back into the order and get one more pod per turn.
"""

from __future__ import annotations

from coordinator.actions.topology_allocate import TreeAllocation
from coordinator.job_order import JobOrder
from coordinator.jobs import Job, Status, Task
from coordinator.session import SessionState
from coordinator.statement import Statement
from shards.placement import Mask
from shards.shapes import TaskShape


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
    if job.tree is not None:
        return _allocate_tree(state, stmt, job, tasks, pipeline_only, allowed, checkpoint)
    for placed, task in enumerate(tasks):
        problem = state.claim_problem(task)
        if problem:  # KAI's DRA PreFilter: the pod cannot go anywhere
            if not pipeline_only:
                job.fit_errors["allocate"] = f"pod {task.pod.name}: {problem}"
            stmt.rollback(checkpoint)
            return False
        shape = state.shape_for(task)
        choice = state.placer.best_node(shape, pipeline_only=pipeline_only, allowed=allowed)
        if choice is None:
            if not pipeline_only:
                job.fit_errors["allocate"] = _task_failure(state, job, task, placed, shape)
            stmt.rollback(checkpoint)
            return False
        if pipeline_only and stmt.is_back_home(task, choice):
            stmt.unevict(task)  # KAI: a victim put back where it ran was not moved, it keeps running
            continue
        claims = state.claims_of(task) if task.pod.resource_claims else None
        stmt.place(task, choice, state.accepted_quota(task, choice.node), claims)
    return True


def _allocate_tree(
    state: SessionState,
    stmt: Statement,
    job: Job,
    tasks: list[Task],
    pipeline_only: bool,
    allowed: Mask | None,
    checkpoint: int,
) -> bool:
    """A job with a sub-group tree or topology constraints (coordinator/actions/topology_allocate.py)."""
    attempt = TreeAllocation(state, stmt, job, pipeline_only)
    if attempt.run(tasks, allowed):
        return True
    stmt.rollback(checkpoint)
    failure = attempt.failure
    if not pipeline_only:
        if failure.task is not None:
            why = _task_failure(state, job, failure.task, failure.placed, state.shape_for(failure.task))
            job.fit_errors["allocate"] = f"{why} (within {failure.where})" if failure.where else why
        else:
            job.fit_errors["allocate"] = failure.topology or "no node set satisfies the job's topology constraints"
    return False


def _task_failure(state: SessionState, job: Job, task_failed: Task, placed: int, shape: TaskShape) -> str:
    """KAI's words for a job whose pod found no node (actions/common/allocate.go), so tools and
    runbooks that read KAI's messages read kai-ray's."""
    why = state.explain(shape)
    pod_set = job.pod_sets.get(task_failed.subgroup)
    minimum = pod_set.min_available if pod_set else 1
    gang = any(ps.min_available > 1 for ps in job.pod_sets.values())
    if gang and pod_set is not None and pod_set.active_used < minimum:
        if len(job.pod_sets) == 1:
            return (
                f"Resources were found for {placed} pods while {minimum} are required for gang scheduling. "
                f"Additional pods cannot be scheduled due to: {why}"
            )
        return (
            f"Resources were found for {placed} pods from all sub-groups while sub-group {pod_set.name} "
            f"requires {minimum} pods for gang scheduling. "
            f"Additional pods cannot be scheduled in this sub-group due to: {why}"
        )
    return f"Resources were not found for pod {task_failed.pod.key} due to: {why}"


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
        before = set(id(t) for t in job.tasks if t.status in (Status.ALLOCATED, Status.PIPELINED))
        if not allocate_job(state, stmt, job, pipeline_only=False, real=True):
            return False, False
        if job.should_pipeline():
            for task in job.tasks:
                if task.status is Status.ALLOCATED and id(task) not in before:
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
