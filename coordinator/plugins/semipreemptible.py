"""Semi-preemptible victims: a search may take their surplus, never the minimum they protect.

KAI's design builds this into its framework (the eviction order skips a semi-preemptible job's
whole-gang step) rather than a plugin; kai-ray registers it under its own name, and it always
applies. Two hooks, for reclaim, preempt and consolidation alike:

- a victim filter: a semi-preemptible job with nothing beyond its minimum is no victim at all;
- a minimum keeper: a semi-preemptible job offers its pods beyond the minimum, one at a time in
  reverse task order (the newest, least important first), and then nothing more.

Consolidation only moves pods, but a move restarts the pod: the minimum is kept in place too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.jobs import Job
from coordinator.plugins.hooks import MinimumKeeperHook, VictimAccept, VictimFilterHook
from coordinator.semi_preemptible import has_surplus

if TYPE_CHECKING:
    from coordinator.session import SessionState

NAME = "semipreemptible"
ACTIONS = ("reclaim", "preempt", "consolidation")
KEEPS_OUT = "semi-preemptible, whose pods up to minMember are protected"


def _with_surplus(state: SessionState, preemptor: Job) -> VictimAccept:
    return lambda victim: not victim.semi_preemptible or has_surplus(victim)


def _keeps_minimum(state: SessionState, preemptor: Job) -> VictimAccept:
    return lambda victim: victim.semi_preemptible


def victim_filters() -> dict[str, VictimFilterHook]:
    return {action: VictimFilterHook(NAME, KEEPS_OUT, _with_surplus) for action in ACTIONS}


def minimum_keepers() -> dict[str, MinimumKeeperHook]:
    return {action: MinimumKeeperHook(NAME, KEEPS_OUT, _keeps_minimum) for action in ACTIONS}
