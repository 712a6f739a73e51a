"""The consolidation action: move running preemptible pods so a pending preemptible job fits.

Only moves are allowed: a solution is valid when every victim is placed again
(pipelined on its new node); no pod loses its run.
"""

from __future__ import annotations

from coordinator.actions.allocate import eligible_jobs
from coordinator.actions.scenario import Scenario, gpu_headroom
from coordinator.actions.solver import JobSolver
from coordinator.actions.victims import victims_queue
from coordinator.job_order import JobOrder
from coordinator.jobs import Job, Status
from coordinator.session_state import SessionState
from coordinator.statement import Statement


class ConsolidationAction:
    name = "consolidation"

    def execute(self, state: SessionState, stmt: Statement) -> None:
        if state.config.maxConsolidationPreemptees == 0:
            return
        order = JobOrder(state.queues, lambda j: state.job_request(j, real=False))
        order.push_all(eligible_jobs(state, pending_only=True, preemptible_only=True))
        while not order.empty():
            job = order.pop()
            assert job is not None
            if not _enough_gpus(state, job):
                continue
            solver = JobSolver(state, stmt, self.name, _all_moved, lambda job=job: _victims(state, job))  # type: ignore[misc]
            if solver.solve(job):
                stmt.commit()


def _all_moved(scenario: Scenario) -> bool:
    return all(t.status is not Status.RELEASING for tasks in scenario.victims.values() for t in tasks)


def _enough_gpus(state: SessionState, job: Job) -> bool:
    """KAI's precheck: the cluster's free and freeing GPUs can hold what the job asks for."""
    table = state.table
    available = sum(gpu_headroom(state, r) for r in range(len(table)) if table.present[r] and table.ready[r])
    wanted = sum(t.pod.requests.gpu for t in job.tasks_to_allocate(real=False))
    return available >= wanted


def _victims(state: SessionState, preemptor: Job) -> JobOrder:
    limit = state.config.maxConsolidationPreemptees
    counted = 0

    def accept(job: Job) -> bool:
        nonlocal counted
        if not job.preemptible or job is preemptor:
            return False
        if counted > limit:
            return False
        if not job.active_allocated():
            return False
        counted += 1
        return True

    return victims_queue(state, accept)
