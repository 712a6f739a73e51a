"""The reclaim action: a queue below its fair share takes resources back from other queues.

Victims are preemptible running jobs of other queues; a solution must satisfy KAI's
reclaim strategies and saturation rule (see ``coordinator.reclaim_rules``).
"""

from __future__ import annotations

import numpy as np

from coordinator.actions.scenario import Scenario
from coordinator.actions.solver import Validator
from coordinator.actions.victim_search import VictimSearchAction
from coordinator.actions.victims import VictimPool, min_runtime_protected
from coordinator.job_order import JobOrder
from coordinator.jobs import Job
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
        """Preemptible running jobs of other queues that KAI's victim filter lets reclaim touch."""
        minimum = state.config.defaultReclaimMinRuntime

        def accept_queue(queue: str) -> bool:
            return queue != job.queue and may_reclaim_from(state.queues, job.queue, request, queue)

        return pool.queue(accept_queue, lambda victim: not min_runtime_protected(state, victim, minimum))

    def validator(self, state: SessionState, job: Job) -> Validator:
        # Queue allocations as they were before the search: the rules compare against them.
        frozen = QueueSnapshot(state.queues.allocated.copy(), state.queues.allocated_np.copy())

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
