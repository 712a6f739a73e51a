"""Stopping jobs past their expected runtime (beyond KAI; ``expectedRuntimeExceeded: stop``).

A job whose pod group sets ``kai.scheduler/expected-runtime`` and that has run longer than that
since its last start is evicted whole, preemptible or not: a maximum runtime. It runs after the
configured actions (``SchedulerConfig.effective_actions`` adds it), so that the capacity it
frees is seen by the next session. With any other setting the action does nothing.
"""

from __future__ import annotations

from coordinator.session import SessionState
from coordinator.statement import Statement


class RuntimeLimitAction:
    name = "runtimelimit"
    time_bounded = False

    def execute(self, state: SessionState, stmt: Statement) -> None:
        if state.config.expectedRuntimeExceeded != "stop":
            return
        for job in state.jobs.values():
            if not job.overrun:
                continue
            state.every_node()  # evicting takes the pods off their nodes' rows
            for task in job.tasks:
                if task.status.active_allocated:
                    stmt.evict(task, self.name, None)
        stmt.commit()
