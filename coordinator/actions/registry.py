"""The actions a session can run, by the names the config uses (KAI's action registry)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from coordinator.actions.allocate import AllocateAction
from coordinator.actions.consolidation import ConsolidationAction
from coordinator.actions.preempt import PreemptAction
from coordinator.actions.reclaim import ReclaimAction
from coordinator.actions.runtime_limit import RuntimeLimitAction
from coordinator.actions.stale_gang import StaleGangEvictionAction
from coordinator.session import SessionState
from coordinator.statement import Statement


class Action(Protocol):
    name: str
    # Whether the action stops at the session's time budget (``VictimSearches.out_of_time``); such
    # actions share the time left between them.
    time_bounded: bool

    def execute(self, state: SessionState, stmt: Statement) -> None: ...


ACTIONS: dict[str, type[Action]] = {
    "allocate": AllocateAction,
    "consolidation": ConsolidationAction,
    "reclaim": ReclaimAction,
    "preempt": PreemptAction,
    "stalegangeviction": StaleGangEvictionAction,
    "runtimelimit": RuntimeLimitAction,
}


def build_actions(names: Sequence[str]) -> list[Action]:
    """Fresh action objects in the configured order (actions keep per-session state)."""
    return [ACTIONS[name]() for name in names]
