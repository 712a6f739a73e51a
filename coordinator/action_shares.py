"""A cycle's actions, run in order, and how its time budget is shared between the time-bounded ones
(the victim searches).

Each such action may spend the time left to the session's deadline less what the actions after
it are expected to need. An action is expected to need what it spent last cycle, with a margin,
unless it was stopped at its deadline then or has not run yet: then it keeps an even share. An
even split for all left reclaim half of every cycle while preempt, with nothing to search, gave
its half back unused and the cycle ended early: a 500-pod gang's reclaim took about twice the
cycles its search needed.

An action that raises does not take the session with it: what it had not committed is rolled
back, the error is logged with its traceback and counted in the cycle's stats, and the actions
after it run. When the action was deciding a job (``SessionState.deciding``), that job is set
aside for the rest of the session, its pods wait with a reason naming the error, and the action
runs again without it, up to ``SET_ASIDE_PER_ACTION`` times: a bug met by one job (a cluster
state no test reached) costs that job a cycle, not the other jobs' decisions, and the job is
tried again next cycle. Tests set the environment variable ``RAISE_ACTION_ERRORS`` names, so
that the bug fails them where it happens.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from coordinator.actions.registry import Action
    from coordinator.results import CycleStats
    from coordinator.session import SessionState
    from coordinator.statement import Statement

log = logging.getLogger(__name__)

RAISE_ACTION_ERRORS = "KAI_RAY_RAISE_ACTION_ERRORS"  # set (non-empty): an action's exception fails the session

# Kept for each later action beyond what it spent last cycle, as a part of the budget: room for
# a few more jobs than last cycle's before the share it did not ask for is spent by another.
MARGIN = 0.05
SET_ASIDE_PER_ACTION = 3  # jobs set aside before an action that keeps failing gives up for the cycle


@dataclass(frozen=True, slots=True)
class ActionUse:
    seconds: float
    cut_short: bool  # stopped at its deadline with jobs left: it wants at least what it had


class ActionShares:
    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.last: dict[str, ActionUse] = {}  # per time-bounded action, its last cycle

    def run(self, actions: Sequence[Action], state: SessionState, stmt: Statement, stats: CycleStats) -> None:
        """Run the session's actions in order, each committed to the statement after it."""
        searches = state.searches
        later = [action.name for action in actions if action.time_bounded]
        for action in actions:
            started = time.perf_counter()
            if action.time_bounded and searches.deadline is not None:
                later.remove(action.name)
                searches.action_deadline = self.deadline(started, searches.deadline, later)
            cut_before, searches.cut_short = searches.cut_short, False
            self._run_setting_aside(action, state, stmt, stats)
            searches.action_deadline = None
            stmt.commit()
            stats.action_seconds[action.name] = seconds = time.perf_counter() - started
            if action.time_bounded and searches.deadline is not None:
                self.last[action.name] = ActionUse(seconds, searches.cut_short)
            searches.cut_short |= cut_before

    def _run_setting_aside(self, action: Action, state: SessionState, stmt: Statement, stats: CycleStats) -> None:
        """Run the action; if it raises while deciding a job, set that job aside and run it again."""
        for attempt in range(SET_ASIDE_PER_ACTION + 1):
            state.deciding = None
            try:
                action.execute(state, stmt)
                return
            except Exception as error:
                if os.environ.get(RAISE_ACTION_ERRORS):
                    raise
                stmt.rollback()  # the job it was deciding, back to the action's last commit
                what = f"{type(error).__name__}: {error}"
                stats.failed_actions[action.name] = what
                job = state.jobs.get(state.deciding) if state.deciding is not None else None
                if job is None or job.key in state.set_aside or attempt == SET_ASIDE_PER_ACTION:
                    log.exception("the %s action failed; the session goes on without the rest of it", action.name)
                    return
                log.exception("the %s action failed on job %s; it runs again without that job", action.name, job.key)
                state.set_aside[job.key] = what
                job.fit_errors[action.name] = (
                    f"kai-ray failed while deciding this job ({what}); it is set aside for this cycle "
                    "and tried again in the next (the scheduler's log has the traceback)"
                )

    def deadline(self, now: float, session_deadline: float, later: Sequence[str]) -> float:
        """The running action's deadline, given the time-bounded actions still to run after it."""
        left = max(0.0, session_deadline - now)
        even = left / (len(later) + 1)
        kept = sum(self._expected(name, even) for name in later)
        return now + max(even, left - kept)

    def _expected(self, name: str, even: float) -> float:
        use = self.last.get(name)
        if use is None or use.cut_short:
            return even
        return min(even, use.seconds + MARGIN * self.budget)
