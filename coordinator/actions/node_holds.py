"""What allocate asks of the session's node holds (``SessionState.hooks.node_holds``): which rows
a job may use, why the held ones were not for it, and what a job holding nodes is told."""

from __future__ import annotations

from coordinator.jobs import Job
from coordinator.plugins import NodeHolds
from coordinator.session import SessionState
from coordinator.topology import Mask

REASON_KEY = "reservation"  # the part of a job's pending reason that speaks of held nodes


class HeldNodes:
    def __init__(self, holds: list[NodeHolds]) -> None:
        self.holds = holds

    @staticmethod
    def of(state: SessionState) -> HeldNodes:
        made = (hook.make(state) for hook in state.hooks.node_holds)
        return HeldNodes([holds for holds in made if holds is not None])

    def closed_to(self, job: Job) -> Mask | None:
        closed: Mask | None = None
        for holds in self.holds:
            rows = holds.closed_to(job)
            if rows is not None:
                closed = rows if closed is None else closed | rows
        return closed

    def explain(self, state: SessionState, job: Job, closed: Mask) -> None:
        """Say why a job that found no room did not get held capacity, when some of it would
        have taken one of its pods (a job that fits nowhere is not told about holds)."""
        tasks = job.tasks_to_allocate(real=True)
        if not tasks:
            return
        fit = state.placer.fit(state.shape_for(tasks[0]), allowed=closed)
        where = fit.now | fit.future
        if not where.any():
            return
        words = [text for holds in self.holds if (text := holds.refusal(job, where))]
        if words:
            job.fit_errors[REASON_KEY] = "; ".join(words)

    def tell_holders(self, jobs: list[Job]) -> None:
        """Each job still pending that holds nodes says so in its reason."""
        if not self.holds:
            return
        for job in jobs:
            if not job.has_pending():
                continue
            said = [text for holds in self.holds if (text := holds.holding(job))]
            if said:
                job.fit_errors[REASON_KEY] = "; ".join(said)
