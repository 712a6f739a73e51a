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
from coordinator.actions.victims import (
    VictimPool,
    is_elastic,
    keeps_its_minimum,
    min_runtime_protected,
    reclaim_min_runtime,
)
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
    """Preemptible running jobs of other queues that KAI's victim filter lets reclaim touch; a job
    inside its minimum runtime (resolved from the queues, KAI's "lca" method) only when it is
    elastic, and then the validator guards its minimum."""

    def accept_queue(queue: str) -> bool:
        return queue != reclaimer.queue and may_reclaim_from(state.queues, reclaimer.queue, request, queue)

    def accept_job(job: Job) -> bool:
        return is_elastic(job) or not min_runtime_protected(state, job, _minimum(state, reclaimer, job))

    return pool.queue(accept_queue, accept_job)


def _minimum(state: SessionState, reclaimer: Job, victim: Job) -> float:
    return reclaim_min_runtime(state, reclaimer.queue, victim.queue)


def _validator(state: SessionState, job: Job, frozen: QueueSnapshot) -> Validator:
    def valid(scenario: Scenario) -> bool:
        for key, tasks in scenario.victims.items():
            victim = state.jobs[key]
            protected = min_runtime_protected(state, victim, _minimum(state, job, victim))
            if is_elastic(victim) and protected and not keeps_its_minimum(victim, tasks):
                return False
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
