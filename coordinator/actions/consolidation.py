"""The consolidation action: move running preemptible pods so a pending preemptible job fits.

Only moves are allowed: a solution is valid when every victim is placed again
(pipelined on its new node); no pod loses its run.
"""

from __future__ import annotations

import math

import numpy as np

from coordinator.actions.gpu_headroom import gpu_headroom_all
from coordinator.actions.scenario import Scenario
from coordinator.actions.solver import Validator
from coordinator.actions.victim_search import Precheck, VictimSearchAction
from coordinator.actions.victims import VictimPool
from coordinator.job_order import JobOrder
from coordinator.jobs import Job
from coordinator.plugins import VictimAccept
from coordinator.semi_preemptible import surplus_tasks
from coordinator.session import SessionState
from coordinator.tasks import Status, Task
from kai_ray.model import mig_gpus
from placement.shapes import GPU


class ConsolidationAction(VictimSearchAction):
    name = "consolidation"
    signatures_per_queue = False  # victims come from every queue
    preemptible_jobs_only = True
    precheck_looks_at_nodes = True  # the GPUs free and movable on the nodes

    def enabled(self, state: SessionState) -> bool:
        return state.config.maxConsolidationPreemptees != 0

    def precheck(self, state: SessionState, job: Job, request: np.ndarray) -> Precheck:
        # Moves leave every queue's allocation as it was, so a job its queue cannot take now
        # (over a limit) is not helped by any of them: no search. It counts as a failed one, as
        # in KAI (whose search fails for it), for the jobs that look like it.
        if not state.capacity(job, request).ok:
            return Precheck.FAILED
        limit = state.config.maxConsolidationPreemptees
        if (
            _enough_gpus(state, job)
            and _moves_could_make_room(state, job, limit)
            and _big_nodes_could_be_freed(state, job, limit)
        ):
            return Precheck.SEARCH
        return Precheck.FAILED

    def validator(self, state: SessionState, job: Job) -> Validator:
        return _all_moved

    def victims(self, state: SessionState, pool: VictimPool, job: Job, request: np.ndarray) -> JobOrder:
        return _victims(pool, job, state.config.maxConsolidationPreemptees, self.plugin_filter(state, job))


def _all_moved(scenario: Scenario) -> bool:
    return all(t.status is not Status.RELEASING for tasks in scenario.victims.values() for t in tasks)


def _enough_gpus(state: SessionState, job: Job) -> bool:
    """KAI's precheck: the cluster's free and freeing GPUs can hold what the job asks for."""
    table = state.table
    available = float(gpu_headroom_all(state.table)[table.present & table.ready].sum())
    # KAI sums whole GPUs and MIG instances (as their profiles' GPUs) here, not fractions.
    wanted = sum(t.pod.requests.gpu + mig_gpus(t.pod.requests.scalars) for t in job.tasks_to_allocate(real=False))
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
        if other is job:
            continue
        gain = sum(
            1 if t.pod.gpu_share is not None else math.ceil(t.pod.requests.gpu / g - 1e-9)
            for t in _movable(other)
            if t.node
        )
        if gain:
            gains.append(gain)
    gains.sort(reverse=True)
    return slots + sum(gains[: limit + 1]) >= len(tasks)


def _big_nodes_could_be_freed(state: SessionState, job: Job, limit: int) -> bool:
    """A necessary condition on GPU totals, cheap to check, for moving at most ``limit`` (+1)
    jobs to make room for ``job``'s whole-GPU pods. They fit only on nodes with at least g GPUs
    (g: the smallest of them), the *big* nodes. Moves between big nodes leave the GPUs free on
    them as they are; only a pod moved to a smaller node frees some, and the smaller nodes can
    take no more whole GPUs than they have free (a fraction moved off frees at most one GPU,
    wherever it goes). So the free GPUs of the big nodes, plus what the richest movable jobs
    could shift onto smaller nodes, must cover the job's GPUs, or no search can succeed.

    It rules out what the slot count of ``_moves_could_make_room`` lets through: on a cluster
    whose 8-GPU nodes all run 8-GPU pods, an 8-GPU gang looked movable because every pod on a
    4-GPU node "freed a slot" there, and each search failed after seconds of scenarios."""
    tasks = job.tasks_to_allocate(real=False)
    sizes = [t.pod.requests.gpu for t in tasks if t.pod.gpu_share is None and t.pod.requests.gpu >= 1]
    if len(sizes) < len(tasks) or not sizes:
        return True  # fractions and CPU pods: the bound does not describe them
    table = state.table
    usable = table.present & table.ready
    big = usable & (table.gpu_count >= min(sizes))
    headroom = gpu_headroom_all(state.table)
    wanted = sum(sizes)
    free_big = float(headroom[big].sum())
    if free_big >= wanted:
        return True
    small = usable & ~big
    free_small = float(table.future[small, GPU].sum())
    largest_small = float(table.gpu_count[small].max()) if small.any() else 0.0
    shiftable: list[tuple[float, float]] = []  # per movable job: whole GPUs, fractions it could take off big nodes
    for other in state.jobs.values():
        if other is job:
            continue
        whole = fractions = 0.0
        for task in _movable(other):
            row = table.index.get(task.node or "")
            if row is None or not big[row]:
                continue
            if task.pod.gpu_share is not None:
                fractions += 1
            elif 0 < task.pod.requests.gpu <= largest_small:
                whole += task.pod.requests.gpu
        if whole or fractions:
            shiftable.append((whole, fractions))
    movable = limit + 1
    most_total = sum(sorted((w + f for w, f in shiftable), reverse=True)[:movable])
    most_fractions = sum(sorted((f for _, f in shiftable), reverse=True)[:movable])
    return free_big + min(most_total, free_small + most_fractions) >= wanted


def _movable(job: Job) -> list[Task]:
    """The placed pods a move may take: all of a preemptible job's, a semi-preemptible job's
    beyond its minimum (``coordinator.plugins.semipreemptible`` keeps the rest in place)."""
    if job.semi_preemptible:
        return surplus_tasks(job)
    if not job.preemptible:
        return []
    return [t for t in job.tasks if t.status.active_allocated]


def _victims(pool: VictimPool, preemptor: Job, limit: int, plugins_accept: VictimAccept) -> JobOrder:
    """Preemptible running jobs of any queue that the plugins' victim filters accept
    (``semipreemptible``: only those with pods beyond their minimum), at most ``limit`` (+1, as
    KAI counts) of them."""
    decided: dict[str, bool] = {}

    def accept(job: Job) -> bool:
        if job.key not in decided:  # asked again each time the job is at the head: decide once
            decided[job.key] = job.key != preemptor.key and plugins_accept(job) and sum(decided.values()) <= limit
        return decided[job.key]

    return pool.queue(lambda _: True, accept)
