"""The preempt action: inside one queue, a job evicts strictly lower-priority preemptible jobs.

A job that preempt searched for and that still waits afterwards says what the plugins kept out
of its reach, when they kept anything (jobs inside their preempt minimum runtime, the protected
minimum of semi-preemptible jobs): otherwise only allocate's reason would show, and it names no
rule.
"""

from __future__ import annotations

import numpy as np

from coordinator.actions.solver import Validator
from coordinator.actions.victim_search import Precheck, VictimSearchAction
from coordinator.actions.victims import VictimPool
from coordinator.job_order import JobOrder
from coordinator.job_timers import may_preempt
from coordinator.jobs import Job
from coordinator.plugins import VictimAccept
from coordinator.session import SessionState
from coordinator.statement import Statement
from coordinator.tasks import Status


class PreemptAction(VictimSearchAction):
    name = "preempt"

    def __init__(self) -> None:
        # job key -> its pending pods when its search started, and what the plugins kept out
        self._notes: dict[str, tuple[int, set[str]]] = {}

    def execute(self, state: SessionState, stmt: Statement) -> None:
        super().execute(state, stmt)
        for key, (pending_before, kept_out) in self._notes.items():
            job = state.jobs.get(key)
            if key in state.searches.skipped:
                continue  # its search stopped at the time budget and says so
            if job is not None and kept_out and _pending_pods(job) >= pending_before:
                job.fit_errors[self.name] = (
                    f"no lower-priority job of queue {job.queue} it may take makes room for it "
                    f"(some are {'; '.join(sorted(kept_out))})"
                )

    def precheck(self, state: SessionState, job: Job, request: np.ndarray) -> Precheck:
        # Victims come from the job's own queue, so evicting them makes room under its limits;
        # they are all preemptible, so they free no non-preemptible quota: that rule decides now.
        verdict = state.capacity(job, request, limits=False)
        if verdict.ok:
            self._notes[job.key] = (_pending_pods(job), set())
            return Precheck.SEARCH
        job.fit_errors["preempt"] = f"{verdict.reason}: {verdict.message}"
        return Precheck.FAILED

    def victims(self, state: SessionState, pool: VictimPool, job: Job, request: np.ndarray) -> JobOrder:
        """Preemptible running jobs of the same queue with strictly lower priority
        (``job_timers.may_preempt`` has the opt-in exceptions) that the plugins' victim filters
        accept (``minruntime``: past their queue's preempt minimum runtime)."""
        plugins_accept = self.plugin_filter(state, job, self._kept_out(job))

        def accept(victim: Job) -> bool:
            return victim.key != job.key and may_preempt(job, victim) and plugins_accept(victim)

        return pool.queue(lambda queue: queue == job.queue, accept)

    def keeper(self, state: SessionState, job: Job) -> VictimAccept:
        return self.plugin_keeper(state, job, self._kept_out(job))

    def validator(self, state: SessionState, job: Job) -> Validator:
        return self.plugin_validator(state, job)

    def _kept_out(self, job: Job) -> set[str] | None:
        notes = self._notes.get(job.key)
        return notes[1] if notes is not None else None


def _pending_pods(job: Job) -> int:
    return sum(1 for task in job.tasks if task.status is Status.PENDING)
