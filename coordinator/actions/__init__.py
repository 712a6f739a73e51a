"""KAI's scheduling actions, run in the configured order within one session; the registry maps
the config's action names to their classes. The victim searches' sorted lists (``VictimLists``)
and the searches stopped at the time budget (``PausedSearches``) outlive a session: the
coordinator keeps them across cycles."""

from coordinator.actions.allocate import eligible_jobs, explain_unplaced
from coordinator.actions.paused_searches import PausedSearches
from coordinator.actions.registry import ACTIONS, Action, build_actions
from coordinator.actions.victim_search import VictimSearchAction
from coordinator.actions.victims import VictimLists

__all__ = [
    "ACTIONS",
    "Action",
    "PausedSearches",
    "VictimLists",
    "VictimSearchAction",
    "build_actions",
    "eligible_jobs",
    "explain_unplaced",
]
