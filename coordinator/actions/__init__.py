"""KAI's scheduling actions, run in the configured order within one session; the registry maps
the config's action names to their classes."""

from coordinator.actions.allocate import eligible_jobs, explain_unplaced
from coordinator.actions.registry import ACTIONS, Action, build_actions
from coordinator.actions.victim_search import VictimSearchAction

__all__ = ["ACTIONS", "Action", "VictimSearchAction", "build_actions", "eligible_jobs", "explain_unplaced"]
