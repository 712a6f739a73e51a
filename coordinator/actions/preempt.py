"""The preempt action: inside one queue, a job evicts strictly lower-priority preemptible jobs."""

from __future__ import annotations

from coordinator.actions.allocate import eligible_jobs
from coordinator.actions.scenario import Scenario
from coordinator.actions.solver import JobSolver
from coordinator.actions.victims import min_runtime_protected, victims_queue
from coordinator.job_order import JobOrder
from coordinator.jobs import Job
from coordinator.session_state import SessionState
from coordinator.statement import Statement


class PreemptAction:
    name = "preempt"

    def execute(self, state: SessionState, stmt: Statement) -> None:
        order = JobOrder(state.queues, lambda j: state.job_request(j, real=False))
        order.push_all(eligible_jobs(state, pending_only=True))
        while not order.empty():
            job = order.pop()
            assert job is not None
            request = state.job_request(job, real=False)
            verdict = state.queues.check_capacity(job.queue, request, job.preemptible, limits=False)
            if not verdict.ok:
                job.fit_errors["preempt"] = f"{verdict.reason}: {verdict.message}"
                continue
            solver = JobSolver(state, stmt, self.name, _always_valid, lambda job=job: _victims(state, job))  # type: ignore[misc]
            if solver.solve(job):
                stmt.commit()


def _always_valid(_: Scenario) -> bool:
    return True


def _victims(state: SessionState, preemptor: Job) -> JobOrder:
    minimum = state.config.defaultPreemptMinRuntime

    def accept(job: Job) -> bool:
        if not job.preemptible or job.priority >= preemptor.priority or job.queue != preemptor.queue:
            return False
        if job is preemptor or not job.active_allocated():
            return False
        return not min_runtime_protected(state, job, minimum)

    return victims_queue(state, accept)
