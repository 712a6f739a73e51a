"""Stale-gang eviction: a gang that lost pods below its minimum is evicted after a grace period."""

from __future__ import annotations

from coordinator.jobs import Job
from coordinator.session import SessionState
from coordinator.statement import Statement


class StaleGangEvictionAction:
    name = "stalegangeviction"

    def execute(self, state: SessionState, stmt: Statement) -> None:
        for job in state.jobs.values():
            if not job.is_stale():
                job.stale_since = None
                continue
            if job.stale_since is None:
                job.stale_since = state.now  # the clock starts now; the adapter records it on the PodGroup
            grace = _grace_period(state, job)
            if grace < 0 or state.now - job.stale_since < grace:
                continue
            for task in job.tasks:
                if task.status.active_allocated:
                    stmt.evict(task, self.name, None)
        stmt.commit()


def _grace_period(state: SessionState, job: Job) -> float:
    own = job.group.staleness_grace_seconds
    return own if own is not None else state.config.defaultStalenessGracePeriod
