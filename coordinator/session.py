"""One scheduling session: open, run the configured actions in order, close with decisions."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Protocol

from coordinator.decisions import Decisions, collect
from coordinator.session_state import SessionState, open_session
from coordinator.statement import Statement
from kai_ray.io.config import SchedulerConfig
from kai_ray.model import ClusterSnapshot


class Action(Protocol):
    name: str

    def execute(self, state: SessionState, stmt: Statement) -> None: ...


ACTION_MODULES = {
    "allocate": ("coordinator.actions.allocate", "AllocateAction"),
    "consolidation": ("coordinator.actions.consolidation", "ConsolidationAction"),
    "reclaim": ("coordinator.actions.reclaim", "ReclaimAction"),
    "preempt": ("coordinator.actions.preempt", "PreemptAction"),
    "stalegangeviction": ("coordinator.actions.stale_gang", "StaleGangEvictionAction"),
}


def build_actions(names: Sequence[str]) -> list[Action]:
    actions: list[Action] = []
    for name in names:
        module_name, class_name = ACTION_MODULES[name]
        module = importlib.import_module(module_name)
        actions.append(getattr(module, class_name)())
    return actions


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
