"""The reclaim action: a queue below its fair share takes resources back from other queues.

Victims are preemptible running jobs of other queues; a solution must satisfy KAI's
reclaim strategies and saturation rule (see ``coordinator.reclaim_rules``).

A job that reclaim searched for and that still waits afterwards gets a reason naming what
held it: the jobs other queues run are not preemptible, the victim filter admitted no queue
(and which rule refused each), every scenario broke a reclaim rule (which one, between which
queues), or no victim it may take made room for its pods. KAI only logs that no strategy was found; without
the reason the job would show allocate's alone ("no nodes with enough resources"), which hides
the rule that keeps a queue below its fair share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from coordinator.actions.solver import Validator
from coordinator.actions.victim_search import Precheck, VictimSearchAction
from coordinator.actions.victims import VictimPool
from coordinator.job_order import JobOrder
from coordinator.jobs import Job
from coordinator.plugins import ScenarioValidatorHook, VictimAccept
from coordinator.reclaim_rules import (
    FilterRefusal,
    explain_filter_refusals,
    may_reclaim_from,
    reclaimer_refusal,
    victim_filter_refusal,
)
from coordinator.session import SessionState
from coordinator.statement import Statement
from coordinator.tasks import Status

NOT_PREEMPTIBLE = "the jobs other queues run are not preemptible"


@dataclass(slots=True)
class SearchNotes:
    """What one job's reclaim search met, for its reason if it still waits afterwards."""

    pending_before: int  # the job's pending pods when its search started
    filter_seen: bool = False  # the victim filter's verdicts below were taken (first step only)
    admitted: set[str] = field(default_factory=set)  # queues the victim filter let it take from
    refused: list[FilterRefusal] = field(default_factory=list)
    # What the plugins' victim filters and protective validators said of jobs it could have
    # taken ("within their reclaim minimum runtime").
    kept_out: set[str] = field(default_factory=set)
    rule_broken: str | None = None  # the last scenario's refusal by the reclaim rules

    @property
    def saw_no_queue(self) -> bool:
        """The search looked at victims and the victim filter met no queue: no other queue runs
        a preemptible job (KAI's victims queue leaves the others out)."""
        return self.filter_seen and not self.admitted and not self.refused

    def reason(self, unpreemptible_elsewhere: bool = False) -> str | None:
        """Why the search found nothing; None when there was nothing to take from at all (no
        other queue runs a job, or a precheck failed the job before it looked at victims), which
        allocate's reason already covers. ``unpreemptible_elsewhere``: another queue runs a job
        that is not preemptible."""
        if not self.admitted:
            if not self.refused:
                return NOT_PREEMPTIBLE if self.saw_no_queue and unpreemptible_elsewhere else None
            return f"no queue to take from: {explain_filter_refusals(self.refused)}"
        if self.rule_broken is not None:
            return f"refused by the reclaim rules: {self.rule_broken}"
        taken_from = ", ".join(sorted(self.admitted))
        if self.kept_out:
            return f"no victims in {taken_from} that make room for it (some are {'; '.join(sorted(self.kept_out))})"
        return f"evicting what it may take from {taken_from} does not make room for its pods"


class ReclaimAction(VictimSearchAction):
    name = "reclaim"

    def __init__(self) -> None:
        self._notes: dict[str, SearchNotes] = {}  # job key -> what its search met, this session

    def execute(self, state: SessionState, stmt: Statement) -> None:
        super().execute(state, stmt)
        unpreemptible: set[str] | None = None  # queues running a job that is not preemptible
        for key, notes in self._notes.items():
            job = state.jobs.get(key)
            if key in state.searches.skipped:
                continue  # its search stopped at the time budget and says so
            # A successful search placed pods; a failed one left the job as it was.
            if job is not None and _pending_pods(job) >= notes.pending_before:
                elsewhere = False
                if notes.saw_no_queue:
                    if unpreemptible is None:
                        unpreemptible = {
                            j.queue for j in state.jobs.values() if not j.preemptible and j.active_allocated()
                        }
                    elsewhere = bool(unpreemptible - {job.queue})
                reason = notes.reason(elsewhere)
                if reason is not None:
                    job.fit_errors[self.name] = reason

    def screen(self, state: SessionState, job: Job, request: np.ndarray) -> bool:
        refusal = reclaimer_refusal(
            state.queues, job.queue, request, state.placing_preemptible(job), state.protected_subject(job)
        )
        if refusal is None:
            return True
        job.fit_errors["reclaim"] = f"queue {job.queue} cannot reclaim: {refusal}"
        return False

    def precheck(self, state: SessionState, job: Job, request: np.ndarray) -> Precheck:
        self._notes[job.key] = SearchNotes(_pending_pods(job))
        return Precheck.SEARCH

    def victims(self, state: SessionState, pool: VictimPool, job: Job, request: np.ndarray) -> JobOrder:
        """Preemptible running jobs of other queues that KAI's victim filter lets reclaim touch
        and the plugins' victim filters accept (``minruntime``: past the reclaim minimum runtime
        that applies between the two queues)."""
        notes = self._notes.get(job.key)
        plugins_accept = self.plugin_filter(state, job, notes.kept_out if notes is not None else None)
        # Every step of the search asks the same filter of the same queues (a step leaves the
        # session as it found it): the first step's verdicts are noted, the later ones not.
        first_look = notes if notes is not None and not notes.filter_seen else None
        if first_look is not None:
            first_look.filter_seen = True

        def accept_queue(queue: str) -> bool:
            if queue == job.queue:
                return False
            if may_reclaim_from(state.queues, job.queue, request, queue):
                if first_look is not None:
                    first_look.admitted.add(queue)
                return True
            if first_look is not None:
                refusal = victim_filter_refusal(state.queues, job.queue, request, queue)
                if refusal is not None:  # None only where a test stands in for the filter
                    first_look.refused.append(refusal)
            return False

        return pool.queue(accept_queue, plugins_accept)

    def keeper(self, state: SessionState, job: Job) -> VictimAccept:
        notes = self._notes.get(job.key)
        return self.plugin_keeper(state, job, notes.kept_out if notes is not None else None)

    def validator(self, state: SessionState, job: Job) -> Validator:
        """The plugins' reclaim scenario validators (``proportion``: the reclaim rules between
        queues; ``minruntime``: elastic victims inside their minimum runtime keep their minimum)."""
        notes = self._notes.get(job.key)
        if notes is None:
            return self.plugin_validator(state, job)

        def refused(hook: ScenarioValidatorHook, why: str) -> None:
            if hook.protects:
                notes.kept_out.add(why)
            else:
                notes.rule_broken = why

        return self.plugin_validator(state, job, refused)


def _pending_pods(job: Job) -> int:
    return sum(1 for task in job.tasks if task.status is Status.PENDING)
