"""The allocate action: place pending jobs in fair order, gangs all-or-nothing.

A job's pods are placed one at a time on the best-scoring node; if any pod cannot be
placed the whole attempt is rolled back. If some pod had to be pipelined (it fits only
once releasing pods finish) and the gang would not otherwise be complete, every pod
placed in the attempt is pipelined too, so half a gang is never bound. Elastic jobs
that still have pods to place go back into the order and get one more pod per turn.
"""

from __future__ import annotations

from coordinator.actions.node_holds import HeldNodes
from coordinator.actions.topology_allocate import TreeAllocation
from coordinator.job_order import JobOrder
from coordinator.jobs import Job
from coordinator.session import SessionState, accepted_on
from coordinator.statement import Statement
from coordinator.tasks import Status, Task
from placement.placer import Choice, Mask
from placement.shapes import TaskShape


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
    verdict = state.capacity(job, total)
    if not verdict.ok:
        if not pipeline_only:
            job.fit_errors["allocate"] = f"{verdict.reason}: {verdict.message}"
        return False
    checkpoint = stmt.checkpoint()
    if job.tree is not None:  # the coordinator opens such sessions on every node's row
        return _allocate_tree(state, stmt, job, tasks, pipeline_only, allowed, checkpoint)
    if stmt.source is not None and allowed is None and not pipeline_only:
        if not state.quota_may_refuse(job, tasks):
            return _place_from_streams(state, stmt, job, tasks, checkpoint)
        # The shards pick a pod's best node without the per-node capacity predicate, which may
        # refuse the pod the nodes with small GPUs here: it places on every node's row instead.
        state.every_node()
    for placed, task in enumerate(tasks):
        problem = state.claim_problem(task)
        if problem:  # KAI's DRA PreFilter: the pod cannot go anywhere
            if not pipeline_only:
                job.fit_errors["allocate"] = f"pod {task.pod.name}: {problem}"
            stmt.rollback(checkpoint)
            return False
        shape = state.shape_for(task)
        nodes = within_quota(state, job, task, allowed)
        choice = state.placer.best_node(shape, pipeline_only=pipeline_only, allowed=nodes)
        if choice is None:
            if not pipeline_only:
                job.fit_errors["allocate"] = _task_failure(state, job, task, placed, shape)
            stmt.rollback(checkpoint)
            return False
        if pipeline_only and stmt.is_back_home(task, choice) and _uneviction_fits(state, stmt, task, choice, shape):
            stmt.unevict(task)  # KAI: a victim put back where it ran was not moved, it keeps running
            continue
        claims = state.claims_of(task) if task.pod.resource_claims else None
        stmt.place(task, choice, state.accepted_quota(task, choice.node), claims)
    return True


def within_quota(state: SessionState, job: Job, task: Task, allowed: Mask | None) -> Mask | None:
    """``allowed`` narrowed to the nodes where KAI's per-node capacity predicate lets the task go
    (its queues' limits and non-preemptible quota, with its portion of that node's GPU)."""
    rows = state.quota_rows(job, task)
    if rows is None:
        return allowed
    return rows if allowed is None else rows & allowed


def _uneviction_fits(state: SessionState, stmt: Statement, task: Task, choice: Choice, shape: TaskShape) -> bool:
    """Whether taking the pod's eviction back leaves its node within capacity.

    KAI takes back the statement's eviction of the pod even when that put it on another node
    than the one it was found back on, and gives the hold back there unchecked: two pods can
    then wait on the same releasing capacity. kai-ray does what KAI does where the pod still
    fits on that node and otherwise pipelines it where the search found room. A fraction
    must find its own GPU group, which the node-level check cannot see, so it moves only
    when found back on that very node."""
    node = stmt.restores_on(task)
    if node is None or node == choice.node:
        return True
    return shape.share is None and state.placer.fit_row(shape, node)[1]


def _place_from_streams(state: SessionState, stmt: Statement, job: Job, tasks: list[Task], checkpoint: int) -> bool:
    """Each task takes the next placement of its shape from the shards' merged streams."""
    source = state.source
    assert source is not None
    for placed, task in enumerate(tasks):
        pick = source.take(task.shape)
        if pick is None:
            # Why it does not fit is asked of the shards once allocate is done (every node's state
            # then), and written in when the session's decisions are collected; how the reason
            # begins (short of its gang or not) is judged now, before the rollback, as KAI does.
            state.unplaced[job.key] = (task, _failure_prefix(job, task, placed))
            job.fit_errors["allocate"] = ""
            stmt.rollback(checkpoint)
            return False
        stmt.place_pick(task, pick, accepted_on(task, pick.gpu_mem))
    return True


def explain_unplaced(job: Job, prefix: str, why: str) -> None:
    """The allocate reason of a job the shards found no room for, once their diagnosis is in."""
    job.fit_errors["allocate"] = prefix + why


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
    return _failure_prefix(job, task_failed, placed) + state.explain(shape)


def _failure_prefix(job: Job, task_failed: Task, placed: int) -> str:
    """KAI's words for a job whose pod found no node (actions/common/allocate.go), so tools and
    runbooks that read KAI's messages read kai-ray's, up to the why. Judged as the job stands
    when the pod failed: a gang short of its minimum is described as such."""
    pod_set = job.pod_sets.get(task_failed.subgroup)
    minimum = pod_set.min_available if pod_set else 1
    gang = any(ps.min_available > 1 for ps in job.pod_sets.values())
    if gang and pod_set is not None and pod_set.active_used < minimum:
        if len(job.pod_sets) == 1:
            return (
                f"Resources were found for {placed} pods while {minimum} are required for gang scheduling. "
                "Additional pods cannot be scheduled due to: "
            )
        return (
            f"Resources were found for {placed} pods from all sub-groups while sub-group {pod_set.name} "
            f"requires {minimum} pods for gang scheduling. "
            "Additional pods cannot be scheduled in this sub-group due to: "
        )
    return f"Resources were not found for pod {task_failed.pod.key} due to: "


class AllocateAction:
    name = "allocate"
    time_bounded = False

    def execute(self, state: SessionState, stmt: Statement) -> None:
        jobs = eligible_jobs(state, pending_only=True)
        # Nodes held for some jobs (reservations): a hold moves the session onto every node's row,
        # so no job below takes the shards' streams, which know nothing of holds.
        holds = HeldNodes.of(state)
        order = JobOrder(state.queues, lambda j: state.job_request(j, real=False), keys=state.hooks.job_keys)
        order.push_all(jobs)
        later: dict[tuple[str, bool], list[float]] = {}  # queue allocations of simple placements, summed
        try:
            while not order.empty():
                # The shards place while the session has no node's row; a job the per-node capacity
                # predicate may refuse some nodes moves it onto every row (``allocate_job``), and so
                # do streams that keep changing one another (sizes sharing nodes, taking turns).
                if stmt.source is not None and stmt.source.interfering():
                    _add_allocations(state, later)
                    state.every_node()
                alone = stmt.source is not None and order.alone()
                if not alone:
                    _add_allocations(state, later)
                job = order.pop_alone() if alone else order.pop()
                assert job is not None
                state.deciding = job.key
                if stmt.source is not None and _place_single_pod(state, stmt, job, later):
                    continue  # its queue's allocation is booked before the next pop judges queues
                _add_allocations(state, later)
                checkpoint = stmt.checkpoint()
                already_running = job.active_allocated() > 0
                ok, pipelined = self._attempt(state, stmt, job, holds)
                if not ok:
                    stmt.rollback(checkpoint)
                    continue
                stmt.commit()
                if not pipelined and not already_running:
                    state.last_start[job.key] = state.now
                if job.has_pending() and job.tasks_to_allocate(real=True):  # only pending pods are placed for real
                    order.push(job)
        finally:  # placements made directly stand if a later job raises: their queues must know
            _add_allocations(state, later)
        state.deciding = None
        holds.tell_holders(jobs)

    @staticmethod
    def _attempt(state: SessionState, stmt: Statement, job: Job, holds: HeldNodes) -> tuple[bool, bool]:
        placing = job.tasks_to_allocate(real=True)  # the pods this attempt places, if it succeeds
        closed = holds.closed_to(job)
        allowed = None if closed is None else ~closed
        if not allocate_job(state, stmt, job, pipeline_only=False, real=True, allowed=allowed):
            if closed is not None:
                holds.explain(state, job, closed)
            return False, False
        if job.should_pipeline():
            for task in placing:
                if task.status is Status.ALLOCATED:
                    stmt.to_pipelined(task)
            return True, True
        return True, False


def _add_allocations(state: SessionState, later: dict[tuple[str, bool], list[float]]) -> None:
    """Book the summed allocations of simple placements (before anyone reads them)."""
    for (queue, preemptible), amount in later.items():
        state.queues.add_allocation(queue, amount, preemptible)
    later.clear()


def _place_single_pod(
    state: SessionState, stmt: Statement, job: Job, later: dict[tuple[str, bool], list[float]]
) -> bool:
    """The common case, done directly: a job with one pod left to place, popped while its queue
    is the only one with work (no queue order to keep). What the general path would do, step by
    step, without the bookkeeping a rollback needs (a single pod is placed whole or not at all).
    False when the job is not that simple (the caller takes the general path): a semi-preemptible
    job's queue books depend on its other pods, which the statement works out."""
    if len(job.pod_sets) != 1 or job.semi_preemptible:
        return False
    (pod_set,) = job.pod_sets.values()
    active, _, _, pending, pipelined, _ = pod_set.counts()
    if pending != 1 or pipelined:
        return False
    (task,) = pod_set.candidates(1, real=True)  # what tasks_to_allocate gives: the one pending pod
    queues = state.queues
    if not queues.never_full(job.queue, job.preemptible):
        _add_allocations(state, later)
        verdict = queues.check_capacity(job.queue, state.requested_quota(task), job.preemptible)
        if not verdict.ok:
            job.fit_errors["allocate"] = f"{verdict.reason}: {verdict.message}"
            return True
        if state.quota_may_refuse(job, [task]):  # the general path checks it node by node
            return False
    source = state.source
    assert source is not None
    pick = source.take(task.shape)
    if pick is None:
        state.unplaced[job.key] = (task, _failure_prefix(job, task, 0))
        job.fit_errors["allocate"] = ""
        return True
    already_running = active > 0
    task.status = Status.PIPELINED if pick.pipelined else Status.ALLOCATED
    task.node = pick.node
    task.gpu_groups = tuple(g for g, _ in pick.shares)
    accepted = accepted_on(task, pick.gpu_mem)
    task.accepted = accepted
    stmt.picks[task.key] = pick
    job.version += 1
    total = later.get((job.queue, job.preemptible))
    if total is None:
        later[(job.queue, job.preemptible)] = list(accepted)
    else:
        total[0] += accepted[0]
        total[1] += accepted[1]
        total[2] += accepted[2]
    # job.should_pipeline(), worked out: its only pipelined pod is this one, and the others
    # allocated before it are ``active``.
    if not (pick.pipelined and active < pod_set.min_available) and not already_running:
        state.last_start[job.key] = state.now
    return True


def eligible_jobs(state: SessionState, pending_only: bool, preemptible_only: bool = False) -> list[Job]:
    """KAI's job filters: ready, with pending pods, in an existing leaf queue; and not set aside
    after an action failed while deciding it (``coordinator/action_shares.py``)."""
    out = []
    set_aside = state.set_aside
    for job in state.pending_jobs() if pending_only else state.jobs.values():
        if pending_only and not job.has_pending():
            continue
        if set_aside and job.key in set_aside:
            continue
        if not job.ready_for_scheduling():
            continue
        if preemptible_only and not state.placing_preemptible(job):
            continue
        if not state.queues.has(job.queue) or not state.queues.is_leaf(job.queue):
            continue
        out.append(job)
    return out
