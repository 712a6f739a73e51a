"""KAI's ``proportion`` plugin as far as victim searches see it: its reclaim scenario validator
(the reclaim strategies and the saturation rule, ``coordinator.reclaim_rules``). The fair share
itself and the queue order are the session's own (``coordinator.fairshare``, ``queue_state``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from coordinator.jobs import Job
from coordinator.plugins.hooks import ScenarioCheck, ScenarioValidatorHook, ScenarioView
from coordinator.reclaim_rules import QueueSnapshot, reclaim_refusal, victim_chunks

if TYPE_CHECKING:
    from coordinator.session import SessionState


def _reclaim_rules(state: SessionState, reclaimer: Job) -> ScenarioCheck:
    # Queue allocations as they were before the search: the rules compare against them.
    frozen = QueueSnapshot(state.queues.allocated.copy(), state.queues.allocated_np.copy())
    config = state.config
    preemptible = state.placing_preemptible(reclaimer)  # as the search starts: what it places is core or not
    subject = state.protected_subject(reclaimer)

    def check(scenario: ScenarioView) -> str | None:
        request = np.zeros(3)
        for task in scenario.pending:
            request += state.requested_quota(task)
        chunks = victim_chunks(scenario.victims, state.jobs, config.allowConsolidatingReclaim)
        return reclaim_refusal(
            state.queues,
            frozen,
            reclaimer.queue,
            request,
            preemptible,
            chunks,
            config.reclaimerSaturationMultiplier,
            subject,
        )

    return check


def scenario_validators() -> dict[str, ScenarioValidatorHook]:
    return {"reclaim": ScenarioValidatorHook("proportion", False, _reclaim_rules)}
