"""Stale-gang eviction: a gang that lost pods below its minimum is evicted after a grace period."""

from __future__ import annotations

from coordinator.jobs import Job
from coordinator.session import SessionState
from coordinator.statement import Statement


class StaleGangEvictionAction:
    name = "stalegangeviction"
    time_bounded = False

    def execute(self, state: SessionState, stmt: Statement) -> None:
        for job in _may_be_stale(state, stmt):
            if not job.is_stale():
                job.stale_since = None
                continue
            if job.stale_since is None:
                job.stale_since = state.now  # the clock starts now; the adapter records it on the PodGroup
            grace = _grace_period(state, job)
            if grace < 0 or state.now - job.stale_since < grace:
                continue
            state.every_node()  # evicting takes the pods off their nodes' rows
            for task in job.tasks:
                if task.status.active_allocated:
                    stmt.evict(task, self.name, None)
        stmt.commit()


def _grace_period(state: SessionState, job: Job) -> float:
    own = job.group.staleness_grace_seconds
    return own if own is not None else state.config.defaultStalenessGracePeriod


def _may_be_stale(state: SessionState, stmt: Statement) -> list[Job]:
    """In session order, the jobs stale now or with a staleness clock to clear: only among those
    the session may have changed (the others are as their records say)."""
    jobs = state.jobs
    keys = state.maybe_changed_keys(stmt.touched)
    return state.in_session_order(
        k for k in keys if (job := jobs.get(k)) is not None and (job.stale_since is not None or job.is_stale())
    )
