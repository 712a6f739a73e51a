"""The reclaim action: a queue below its fair share takes resources back from other queues.

Victims are preemptible running jobs of other queues; a solution must satisfy KAI's
reclaim strategies and saturation rule (see ``coordinator.reclaim_rules``).
"""

from __future__ import annotations

import numpy as np

from coordinator.actions.scenario import Scenario
from coordinator.actions.solver import Validator
from coordinator.actions.victim_search import VictimSearchAction
from coordinator.actions.victims import VictimPool
from coordinator.job_order import JobOrder
from coordinator.jobs import Job
from coordinator.min_runtime import scenario_validator, victim_filter
from coordinator.reclaim_rules import QueueSnapshot, can_reclaim, may_reclaim_from, reclaimable, victim_chunks
from coordinator.session import SessionState


class ReclaimAction(VictimSearchAction):
    name = "reclaim"

    def screen(self, state: SessionState, job: Job, request: np.ndarray) -> bool:
        if can_reclaim(state.queues, job.queue, request, job.preemptible):
            return True
        job.fit_errors["reclaim"] = f"queue {job.queue} cannot reclaim: it would go above its fair share"
        return False

    def victims(self, state: SessionState, pool: VictimPool, job: Job, request: np.ndarray) -> JobOrder:
        """Preemptible running jobs of other queues that KAI's victim filter lets reclaim touch,
        past the reclaim minimum runtime that applies between the two queues."""
        rules = state.min_runtimes
        runtime_ok = victim_filter(state.now, state.last_start, lambda victim: rules.reclaim(job.queue, victim.queue))

        def accept_queue(queue: str) -> bool:
            return queue != job.queue and may_reclaim_from(state.queues, job.queue, request, queue)

        return pool.queue(accept_queue, runtime_ok)

    def validator(self, state: SessionState, job: Job) -> Validator:
        # Queue allocations as they were before the search: the rules compare against them.
        frozen = QueueSnapshot(state.queues.allocated.copy(), state.queues.allocated_np.copy())
        rules = state.min_runtimes
        runtime_ok = scenario_validator(
            state.now, state.last_start, state.jobs, lambda victim: rules.reclaim(job.queue, victim.queue)
        )

        def valid(scenario: Scenario) -> bool:
            if not runtime_ok(scenario.victims):
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
