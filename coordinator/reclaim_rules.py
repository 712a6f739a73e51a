"""When one queue may take resources back from another (KAI's proportion reclaim rules).

Three checks, as KAI applies them:

1. ``can_reclaim`` (before searching): the reclaimer's queue, with the job, stays within
   its fair share; a non-preemptible job also stays within its queue's deserved quota.
2. Strategies, per victim chunk, comparing the two queues where their paths diverge
   (siblings under their lowest common ancestor): *maintain fair share* (the victim's
   queue keeps more than its allocatable share) or *guarantee deserved quota* (the
   reclaimer stays within deserved and the victim's queue keeps more than deserved).
3. Saturation: at every level of the reclaimer's path, a reclaimer above its fair share
   may only take from a sibling that is even more saturated (allocated / fair share).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from coordinator.jobs import Job
from coordinator.queue_state import QueueState, less_equal
from coordinator.tasks import Task
from kai_ray.model.fairshare import UNLIMITED, Array


def can_reclaim(queues: QueueState, queue: str, request: Array, preemptible: bool) -> bool:
    i = queues.tree.index[queue]
    if not less_equal(queues.allocated[i] + request, queues.fair_share[i]):
        return False
    return preemptible or less_equal(queues.allocated_np[i] + request, queues.tree.deserved[i])


def may_reclaim_from(queues: QueueState, reclaimer_queue: str, request: Array, victim_queue: str) -> bool:
    """KAI v0.17's victim filter, applied before any scenario is built, comparing the two queues
    where their paths part: a reclaimer that would go above its deserved quota may only take
    from a queue above its allocatable share; otherwise the victim's queue must be over its
    deserved quota in some resource the reclaimer asks for, or under it in none of them
    (unlimited quotas are left out of that comparison)."""
    tree = queues.tree
    mine, theirs = _leveled(queues, tree.index[reclaimer_queue], tree.index[victim_queue])
    allocated = queues.allocated[theirs]
    if not less_equal(queues.allocated[mine] + request, tree.deserved[mine]):
        return not less_equal(allocated, queues.allocatable[theirs])
    under = False
    for r in range(3):
        deserved = tree.deserved[theirs, r]
        if request[r] <= 0 or deserved == UNLIMITED:
            continue
        if allocated[r] > deserved:
            return True
        under = under or allocated[r] < deserved
    return not under


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """Queue allocations frozen when a job's search starts (KAI's job-simulation queues)."""

    allocated: Array
    allocated_np: Array


def victim_chunks(victims: dict[str, list[Task]], jobs: dict[str, Job], ignore_moved: bool) -> dict[str, list[Array]]:
    """Resources each victim queue gives back, chunked as KAI counts them: pods above a
    pod set's minimum one by one, the pods that make its gang together."""
    by_queue: dict[str, list[Array]] = {}
    for job_key, tasks in victims.items():
        job = jobs[job_key]
        by_set: dict[str, list[Task]] = {}
        for task in tasks:
            name = task.subgroup if task.subgroup in job.pod_sets else next(iter(job.pod_sets))
            by_set.setdefault(name, []).append(task)
        core: list[Task] = []
        elastic: list[Task] = []
        for name, set_tasks in by_set.items():
            minimum = job.pod_sets[name].min_available
            if minimum >= len(set_tasks):
                core.extend(set_tasks)
            else:
                core.extend(set_tasks[:minimum])
                elastic.extend(set_tasks[minimum:])
        chunks = [
            c
            for c in [_given_back([t], ignore_moved) for t in elastic] + [_given_back(core, ignore_moved)]
            if c is not None
        ]
        if chunks:  # a job that only moves gives nothing back: KAI leaves its queue out of the rules
            by_queue.setdefault(job.queue, []).extend(chunks)
    return by_queue


def _given_back(tasks: Iterable[Task], ignore_moved: bool) -> Array | None:
    kept = [t for t in tasks if not (ignore_moved and t.status.active_allocated)]
    if not kept:
        return None
    total: Array = np.sum([np.asarray(t.accepted, dtype=np.float64) for t in kept], axis=0)
    return total


def reclaimable(
    queues: QueueState,
    frozen: QueueSnapshot,
    reclaimer_queue: str,
    request: Array,
    preemptible: bool,
    chunks_by_queue: dict[str, list[Array]],
    multiplier: float = 1.0,
) -> bool:
    tree = queues.tree
    reclaimer = tree.index[reclaimer_queue]
    remaining: dict[int, Array] = {}
    involved: dict[int, set[int]] = {}
    for victim_queue, chunks in chunks_by_queue.items():
        victim = tree.index[victim_queue]
        mine, theirs = _leveled(queues, reclaimer, victim)
        involved[victim] = _involved(chunks)
        remaining.setdefault(theirs, frozen.allocated[theirs].copy())
        for chunk in chunks:
            if not _fits_strategy(queues, frozen, request, mine, theirs, remaining[theirs]):
                return False
            for q in tree.path_to_root(victim):
                remaining.setdefault(q, frozen.allocated[q].copy())
                remaining[q] -= chunk
                involved.setdefault(q, set()).update(involved[victim])
    mine_involved = _involved([request])
    for level in tree.path_to_root(reclaimer):
        own = remaining.get(level)
        if own is None:
            own = frozen.allocated[level] + request
        else:
            own += request  # KAI adds the request in place when the level already lost victims
        for sibling, left in remaining.items():
            if sibling == level or tree.parent[sibling] != tree.parent[level]:
                continue
            resources = involved.get(sibling, set()) | mine_involved
            if not _saturation_ok(
                resources, own, queues.fair_share[level], left, queues.fair_share[sibling], multiplier
            ):
                return False
        if not preemptible and not less_equal(frozen.allocated_np[level] + request, tree.deserved[level]):
            return False
    return True


def _leveled(queues: QueueState, a: int, b: int) -> tuple[int, int]:
    """The first ancestors of ``a`` and ``b`` (from the top) that differ."""
    path_a = list(reversed(queues.tree.path_to_root(a)))
    path_b = list(reversed(queues.tree.path_to_root(b)))
    pair = (path_a[0], path_b[0])
    for x, y in zip(path_a, path_b, strict=False):
        pair = (x, y)
        if x != y:
            break
    return pair


def _involved(amounts: Sequence[Array]) -> set[int]:
    return {r for amount in amounts for r in range(3) if amount[r] > 0}


def _fits_strategy(
    queues: QueueState, frozen: QueueSnapshot, request: Array, mine: int, theirs: int, left: Array
) -> bool:
    if not less_equal(left, queues.allocatable[theirs]):
        return True  # maintain fair share: the victim's queue keeps more than its allocatable share
    deserved = queues.tree.deserved
    if not less_equal(frozen.allocated[mine] + request, deserved[mine]):
        return False
    return not less_equal(left, deserved[theirs])  # guarantee deserved quota


def _saturation_ok(
    resources: set[int], mine: Array, my_fair: Array, theirs: Array, their_fair: Array, multiplier: float
) -> bool:
    for r in resources:
        if my_fair[r] == UNLIMITED and their_fair[r] == UNLIMITED:
            continue
        mine_ratio = _ratio(mine[r], my_fair[r])
        their_ratio = _ratio(theirs[r], their_fair[r])
        if mine_ratio > 1 and their_fair[r] > 0 and mine_ratio * multiplier >= their_ratio:
            return False
    return True


def _ratio(allocated: float, fair: float) -> float:
    if fair == 0:
        return math.inf if allocated > 0 else 0.0
    if fair == UNLIMITED:
        return 0.0
    return float(allocated / fair)
