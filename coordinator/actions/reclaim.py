"""The reclaim action: a queue below its fair share takes resources back from other queues.

Victims are preemptible running jobs of other queues; a solution must satisfy KAI's
reclaim strategies and saturation rule (see ``coordinator.reclaim_rules``).
"""

from __future__ import annotations

import numpy as np

from coordinator.actions.allocate import eligible_jobs
from coordinator.actions.scenario import Scenario
from coordinator.actions.solver import JobSolver, Validator
from coordinator.actions.victims import min_runtime_protected, victims_queue
from coordinator.job_order import JobOrder
from coordinator.jobs import Job
from coordinator.reclaim_rules import QueueSnapshot, can_reclaim, reclaimable, victim_chunks
from coordinator.session_state import SessionState
from coordinator.statement import Statement


class ReclaimAction:
    name = "reclaim"

    def execute(self, state: SessionState, stmt: Statement) -> None:
        order = JobOrder(state.queues, lambda j: state.job_request(j, real=False))
        order.push_all(eligible_jobs(state, pending_only=True))
        while not order.empty():
            job = order.pop()
            assert job is not None
            request = state.job_request(job, real=False)
            if not can_reclaim(state.queues, job.queue, request, job.preemptible):
                job.fit_errors["reclaim"] = f"queue {job.queue} cannot reclaim: it would go above its fair share"
                continue
            frozen = QueueSnapshot(state.queues.allocated.copy(), state.queues.allocated_np.copy())
            solver = JobSolver(state, stmt, self.name, _validator(state, job, frozen),
                               lambda job=job: _victims(state, job))  # type: ignore[misc]
            if solver.solve(job):
                stmt.commit()


def _victims(state: SessionState, reclaimer: Job) -> JobOrder:
    minimum = state.config.defaultReclaimMinRuntime

    def accept(job: Job) -> bool:
        if job.queue == reclaimer.queue or not job.preemptible or not job.active_allocated():
            return False
        return not min_runtime_protected(state, job, minimum)

    return victims_queue(state, accept)


def _validator(state: SessionState, job: Job, frozen: QueueSnapshot) -> Validator:
    def valid(scenario: Scenario) -> bool:
        request = np.zeros(3)
        for task in scenario.pending:
            request += state.requested_quota(task)
        chunks = victim_chunks(scenario.victims, state.jobs, state.config.allowConsolidatingReclaim)
        return reclaimable(state.queues, frozen, job.queue, request, job.preemptible, chunks,
                           state.config.reclaimerSaturationMultiplier)

    return valid
