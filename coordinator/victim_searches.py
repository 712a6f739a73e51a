"""What a session's victim searches (reclaim, preempt, consolidation) share and leave behind: the
jobs the backoff holds back, the searches that failed or did not run and why, the cycle's time
budget, the sorted lists of jobs they carry from action to action and cycle to cycle, and the
searches stopped at the budget to be taken up again."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from coordinator.actions import PausedSearches, VictimLists


@dataclass(slots=True)
class VictimSearches:
    paused: frozenset[tuple[str, str]] = frozenset()  # (job, action) searches backed off this session
    # Per paused job, what its last real victim search said (action -> reason): a paused job keeps
    # naming the cause, so its message does not change while nothing else does.
    paused_reasons: dict[str, dict[str, str]] = field(default_factory=dict)
    failed: set[tuple[str, str]] = field(default_factory=set)  # (job, action) searches that failed this session
    skipped: dict[str, str] = field(default_factory=dict)  # job -> why no victim search ran for it
    # The cycle's time budget (config sessionTimeBudget), as a time.perf_counter() deadline: past
    # it, victim searches take no new job and the jobs left are searched next cycle.
    deadline: float | None = None
    # The running time-bounded action's deadline: the time left to the session's deadline less
    # what the time-bounded actions after it expect to need (``coordinator/action_shares.py``).
    action_deadline: float | None = None
    cut_short: bool = False  # a victim-search action stopped at the deadline this session
    # The sorted lists of running and pending jobs, kept by the coordinator across cycles (None:
    # each action builds its own, as a session run once does).
    lists: VictimLists | None = None
    # The searches stopped at the time budget, kept by the coordinator to be taken up again next
    # cycle (None: a search runs to its end, as in a session run once).
    resumable: PausedSearches | None = None

    def out_of_time(self) -> bool:
        """Past the running action's share of the budget (or the session's, if it has none)."""
        deadline = self.action_deadline if self.action_deadline is not None else self.deadline
        return deadline is not None and time.perf_counter() > deadline
