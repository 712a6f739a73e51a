"""The reclaim action: a queue below its fair share takes resources back from other queues.

Victims are preemptible running jobs of other queues; a solution must satisfy KAI's
reclaim strategies and saturation rule (see ``coordinator.reclaim_rules``).
"""

from __future__ import annotations

import numpy as np

from coordinator.actions.allocate import eligible_jobs
from coordinator.actions.scenario import Scenario
from coordinator.actions.search_pruning import FailedSearches, search_failed, should_search
from coordinator.actions.solver import JobSolver, SearchBudget, Validator
from coordinator.actions.victims import VictimPool, min_runtime_protected
from coordinator.job_order import JobOrder
from coordinator.jobs import Job
from coordinator.reclaim_rules import QueueSnapshot, can_reclaim, may_reclaim_from, reclaimable, victim_chunks
from coordinator.session import SessionState
from coordinator.statement import Statement


class ReclaimAction:
    name = "reclaim"

    def execute(self, state: SessionState, stmt: Statement) -> None:
        order = JobOrder(state.queues, lambda j: state.job_request(j, real=False))
        order.push_all(eligible_jobs(state, pending_only=True))
        budget = SearchBudget(state.config.maxScenariosPerJob, state.config.maxScenariosPerAction)
        pool = VictimPool(state)
        failed = FailedSearches(per_queue=True)
        while not order.empty():
            job = order.pop()
            assert job is not None
            request = state.job_request(job, real=False)
            if not can_reclaim(state.queues, job.queue, request, job.preemptible):
                job.fit_errors["reclaim"] = f"queue {job.queue} cannot reclaim: it would go above its fair share"
                continue
            if not should_search(state, job, failed, self.name):
                continue
            frozen = QueueSnapshot(state.queues.allocated.copy(), state.queues.allocated_np.copy())
            solver = JobSolver(
                state,
                stmt,
                self.name,
                _validator(state, job, frozen),
                lambda job=job, request=request: _victims(state, pool, job, request),  # type: ignore[misc]
                budget,
            )
            if solver.solve(job):
                stmt.commit()
                pool.invalidate()
            else:
                search_failed(state, job, failed)


def _victims(state: SessionState, pool: VictimPool, reclaimer: Job, request: np.ndarray) -> JobOrder:
    """Preemptible running jobs of other queues that KAI's victim filter lets reclaim touch."""
    minimum = state.config.defaultReclaimMinRuntime

    def accept_queue(queue: str) -> bool:
        return queue != reclaimer.queue and may_reclaim_from(state.queues, reclaimer.queue, request, queue)

    return pool.queue(accept_queue, lambda job: not min_runtime_protected(state, job, minimum))


def _validator(state: SessionState, job: Job, frozen: QueueSnapshot) -> Validator:
    def valid(scenario: Scenario) -> bool:
        request = np.zeros(3)
        for task in scenario.pending:
            request += state.requested_quota(task)
        chunks = victim_chunks(scenario.victims, state.jobs, state.config.allowConsolidatingReclaim)
        return reclaimable(
            state.queues,
            frozen,
            job.queue,
            request,
            job.preemptible,
            chunks,
            state.config.reclaimerSaturationMultiplier,
        )

    return valid
