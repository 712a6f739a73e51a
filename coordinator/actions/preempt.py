"""The preempt action: inside one queue, a job evicts strictly lower-priority preemptible jobs."""

from __future__ import annotations

import numpy as np

from coordinator.actions.solver import Validator
from coordinator.actions.victim_search import Precheck, VictimSearchAction
from coordinator.actions.victims import VictimPool
from coordinator.job_order import JobOrder
from coordinator.job_timers import may_preempt
from coordinator.jobs import Job
from coordinator.session import SessionState


class PreemptAction(VictimSearchAction):
    name = "preempt"

    def precheck(self, state: SessionState, job: Job, request: np.ndarray) -> Precheck:
        # Victims come from the job's own queue, so evicting them makes room under its limits;
        # they are all preemptible, so they free no non-preemptible quota: that rule decides now.
        verdict = state.queues.check_capacity(job.queue, request, job.preemptible, limits=False)
        if verdict.ok:
            return Precheck.SEARCH
        job.fit_errors["preempt"] = f"{verdict.reason}: {verdict.message}"
        return Precheck.FAILED

    def victims(self, state: SessionState, pool: VictimPool, job: Job, request: np.ndarray) -> JobOrder:
        """Preemptible running jobs of the same queue with strictly lower priority
        (``job_timers.may_preempt`` has the opt-in exceptions) that the plugins' victim filters
        accept (``minruntime``: past their queue's preempt minimum runtime)."""
        plugins_accept = self.plugin_filter(state, job)

        def accept(victim: Job) -> bool:
            return victim.key != job.key and may_preempt(job, victim) and plugins_accept(victim)

        return pool.queue(lambda queue: queue == job.queue, accept)

    def validator(self, state: SessionState, job: Job) -> Validator:
        return self.plugin_validator(state, job)
