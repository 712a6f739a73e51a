"""The preempt action: inside one queue, a job evicts strictly lower-priority preemptible jobs."""

from __future__ import annotations

from coordinator.actions.allocate import eligible_jobs
from coordinator.actions.scenario import Scenario
from coordinator.actions.search_pruning import FailedSearches, search_failed, should_search
from coordinator.actions.solver import JobSolver, SearchBudget, Validator
from coordinator.actions.victims import (
    VictimPool,
    is_elastic,
    keeps_its_minimum,
    min_runtime_protected,
    preempt_min_runtime,
)
from coordinator.job_order import JobOrder
from coordinator.jobs import Job
from coordinator.session import SessionState
from coordinator.statement import Statement


class PreemptAction:
    name = "preempt"

    def execute(self, state: SessionState, stmt: Statement) -> None:
        order = JobOrder(state.queues, lambda j: state.job_request(j, real=False))
        order.push_all(eligible_jobs(state, pending_only=True))
        budget = SearchBudget(state.config.maxScenariosPerJob, state.config.maxScenariosPerAction)
        pool = VictimPool(state)
        failed = FailedSearches(per_queue=True)
        while not order.empty():
            job = order.pop()
            assert job is not None
            if not should_search(state, job, failed, self.name):
                continue
            request = state.job_request(job, real=False)
            verdict = state.queues.check_capacity(job.queue, request, job.preemptible, limits=False)
            if not verdict.ok:
                job.fit_errors["preempt"] = f"{verdict.reason}: {verdict.message}"
                search_failed(state, job, failed)
                continue
            victims = lambda job=job: _victims(state, pool, job)  # noqa: E731
            solver = JobSolver(state, stmt, self.name, _validator(state), victims, budget)
            if solver.solve(job):
                stmt.commit()
                pool.invalidate()
            else:
                search_failed(state, job, failed)


def _validator(state: SessionState) -> Validator:
    """KAI's minruntime check: an elastic victim still inside its minimum runtime may only lose
    pods above its minimum."""

    def valid(scenario: Scenario) -> bool:
        for key, tasks in scenario.victims.items():
            job = state.jobs[key]
            protected = min_runtime_protected(state, job, preempt_min_runtime(state, job.queue))
            if is_elastic(job) and protected and not keeps_its_minimum(job, tasks):
                return False
        return True

    return valid


def _victims(state: SessionState, pool: VictimPool, preemptor: Job) -> JobOrder:
    """Preemptible running jobs of the same queue with strictly lower priority; a job inside its
    minimum runtime (its queue's preemptMinRuntime, else the nearest ancestor's, else the
    default) only when it is elastic, and then the validator guards its minimum."""

    def accept(job: Job) -> bool:
        if job.priority >= preemptor.priority or job.key == preemptor.key:
            return False
        return is_elastic(job) or not min_runtime_protected(state, job, preempt_min_runtime(state, job.queue))

    return pool.queue(lambda queue: queue == preemptor.queue, accept)
