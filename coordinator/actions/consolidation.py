"""The consolidation action: move running preemptible pods so a pending preemptible job fits.

Only moves are allowed: a solution is valid when every victim is placed again
(pipelined on its new node); no pod loses its run.
"""

from __future__ import annotations

import math

import numpy as np

from coordinator.actions.scenario import Scenario, gpu_headroom_all
from coordinator.actions.solver import Validator
from coordinator.actions.victim_search import Precheck, VictimSearchAction
from coordinator.actions.victims import VictimPool
from coordinator.job_order import JobOrder
from coordinator.jobs import Job
from coordinator.session import SessionState
from coordinator.tasks import Status
from shards.shapes import GPU


class ConsolidationAction(VictimSearchAction):
    name = "consolidation"
    signatures_per_queue = False  # victims come from every queue
    preemptible_jobs_only = True

    def enabled(self, state: SessionState) -> bool:
        return state.config.maxConsolidationPreemptees != 0

    def precheck(self, state: SessionState, job: Job, request: np.ndarray) -> Precheck:
        # Moves leave every queue's allocation as it was, so a job its queue cannot take now
        # (over a limit) is not helped by any of them: no search. It counts as a failed one, as
        # in KAI (whose search fails for it), for the jobs that look like it.
        if not state.queues.check_capacity(job.queue, request, job.preemptible).ok:
            return Precheck.FAILED
        limit = state.config.maxConsolidationPreemptees
        if _enough_gpus(state, job) and _moves_could_make_room(state, job, limit):
            return Precheck.SEARCH
        return Precheck.FAILED

    def validator(self, state: SessionState, job: Job) -> Validator:
        return _all_moved

    def victims(self, state: SessionState, pool: VictimPool, job: Job, request: np.ndarray) -> JobOrder:
        return _victims(pool, job, state.config.maxConsolidationPreemptees)


def _all_moved(scenario: Scenario) -> bool:
    return all(t.status is not Status.RELEASING for tasks in scenario.victims.values() for t in tasks)


def _enough_gpus(state: SessionState, job: Job) -> bool:
    """KAI's precheck: the cluster's free and freeing GPUs can hold what the job asks for."""
    table = state.table
    available = float(gpu_headroom_all(state)[table.present & table.ready].sum())
    wanted = sum(t.pod.requests.gpu for t in job.tasks_to_allocate(real=False))
    return available >= wanted


def _moves_could_make_room(state: SessionState, job: Job, limit: int) -> bool:
    """A necessary condition, cheap to check, for moving at most ``limit`` (+1) jobs to make room
    for ``job``'s whole-GPU pods. Let g be the smallest whole-GPU request among them: no node can
    take more of them than it has free g-GPU "slots", and moving one pod of s GPUs off a node adds
    at most ceil(s/g) slots there (a fraction at most one). So the slots free now plus the most
    that the ``limit + 1`` richest movable jobs could add must cover the pods, or no search can
    succeed. It never rules out a move that would work, and it saves the searches for big gangs
    on a fragmented cluster, which the victim limit dooms."""
    tasks = job.tasks_to_allocate(real=False)
    sizes = [t.pod.requests.gpu for t in tasks if t.pod.gpu_share is None and t.pod.requests.gpu >= 1]
    if len(sizes) < len(tasks) or not sizes:
        return True  # fractions and CPU pods: slots do not describe them
    g = min(sizes)
    table = state.table
    usable = table.present & table.ready
    slots = int(np.floor(table.future[usable, GPU] / g + 1e-9).sum())
    if slots >= len(tasks):
        return True
    gains = []
    for other in state.jobs.values():
        if other is job or not other.preemptible:
            continue
        gain = sum(
            1 if t.pod.gpu_share is not None else math.ceil(t.pod.requests.gpu / g - 1e-9)
            for t in other.tasks
            if t.status.active_allocated and t.node
        )
        if gain:
            gains.append(gain)
    gains.sort(reverse=True)
    return slots + sum(gains[: limit + 1]) >= len(tasks)


def _victims(pool: VictimPool, preemptor: Job, limit: int) -> JobOrder:
    """Preemptible running jobs of any queue, at most ``limit`` (+1, as KAI counts) of them."""
    decided: dict[str, bool] = {}

    def accept(job: Job) -> bool:
        if job.key not in decided:  # asked again each time the job is at the head: decide once
            decided[job.key] = job.key != preemptor.key and sum(decided.values()) <= limit
        return decided[job.key]

    return pool.queue(lambda _: True, accept)
