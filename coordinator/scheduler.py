"""One scheduling session on a snapshot, from scratch: open, run the actions in order, close.

This is KAI's ``Scheduler.runOnce`` without a cluster: ``kai-ray schedule`` and the tests use it;
the live loop (``coordinator.coordinator``) runs the same actions on state kept across cycles.
"""

from __future__ import annotations

from collections.abc import Sequence

from coordinator.actions.registry import build_actions
from coordinator.decisions import Decisions, collect
from coordinator.session_open import open_session
from coordinator.statement import Statement
from kai_ray.config import SchedulerConfig
from kai_ray.model import ClusterSnapshot


def run_session(
    snapshot: ClusterSnapshot, config: SchedulerConfig, now: float, actions: Sequence[str] | None = None
) -> Decisions:
    state = open_session(snapshot, config, now)
    names = config.effective_actions if actions is None else actions
    stmt = Statement(state.table, state.queues, state.jobs_by_task)
    for action in build_actions(names):
        action.execute(state, stmt)
        stmt.commit()
    return collect(state, stmt.evictions)
