"""When one queue may take resources back from another (KAI's proportion reclaim rules).

Three checks, as KAI applies them:

1. ``reclaimer_refusal`` (before searching): the reclaimer's queue, with the job, stays within
   its fair share; a non-preemptible job also stays within its queue's deserved quota.
   The victim filter (``may_reclaim_from``) then decides which queues may give back at all.
2. Strategies, per victim chunk, comparing the two queues where their paths diverge
   (siblings under their lowest common ancestor): *maintain fair share* (the victim's
   queue keeps more than its allocatable share) or *guarantee deserved quota* (the
   reclaimer stays within deserved and the victim's queue keeps more than deserved).
3. Saturation: at every level of the reclaimer's path, a reclaimer above its fair share
   may only take from a sibling that is even more saturated (allocated / fair share).

2 and 3 are ``reclaim_refusal``, for one scenario. Each check says which rule refused and which
queues it compared (None: it passes); the reclaim action puts that in the pending job's reason,
where KAI only logs that no strategy was found.
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


def reclaimer_refusal(
    queues: QueueState, queue: str, request: Array, preemptible: bool, subject: str = "non-preemptible job"
) -> str | None:
    """Why the queue may not reclaim for this request at all (None: it may); ``subject`` names
    the non-preemptible work the request is."""
    i = queues.tree.index[queue]
    if not less_equal(queues.allocated[i] + request, queues.fair_share[i]):
        return "it would go above its fair share"
    if preemptible or less_equal(queues.allocated_np[i] + request, queues.tree.deserved[i]):
        return None
    return f"a {subject} would take it above its deserved quota"


def may_reclaim_from(queues: QueueState, reclaimer_queue: str, request: Array, victim_queue: str) -> bool:
    """KAI v0.17's victim filter, applied before any scenario is built, comparing the two queues
    where their paths part: a reclaimer that would go above its deserved quota may only take
    from a queue above its allocatable share; otherwise the victim's queue must be over its
    deserved quota in some resource the reclaimer asks for, or under it in none of them
    (unlimited quotas are left out of that comparison)."""
    return victim_filter_refusal(queues, reclaimer_queue, request, victim_queue) is None


@dataclass(frozen=True, slots=True)
class FilterRefusal:
    """Why the victim filter keeps a reclaimer away from a queue, named where their paths part:
    ``reclaimer_side`` and ``victim_side`` are the two siblings the rule compared."""

    reclaimer_side: str
    victim_side: str
    over_deserved: bool  # the reclaimer's side would go above its deserved quota with the request

    @property
    def rule(self) -> str:
        if self.over_deserved:
            return f"{self.reclaimer_side} would go above its deserved quota: only a queue above its fair share"
        return f"{self.reclaimer_side} stays within its deserved quota: only a queue above its deserved quota"


def victim_filter_refusal(
    queues: QueueState, reclaimer_queue: str, request: Array, victim_queue: str
) -> FilterRefusal | None:
    """The victim filter of ``may_reclaim_from``, saying which rule refused (None: it may take)."""
    tree = queues.tree
    mine, theirs = _leveled(queues, tree.index[reclaimer_queue], tree.index[victim_queue])
    allocated = queues.allocated[theirs]
    if not less_equal(queues.allocated[mine] + request, tree.deserved[mine]):
        if not less_equal(allocated, queues.allocatable[theirs]):
            return None
        return FilterRefusal(tree.names[mine], tree.names[theirs], over_deserved=True)
    under = False
    for r in range(3):
        deserved = tree.deserved[theirs, r]
        if request[r] <= 0 or deserved == UNLIMITED:
            continue
        if allocated[r] > deserved:
            return None
        under = under or allocated[r] < deserved
    return FilterRefusal(tree.names[mine], tree.names[theirs], over_deserved=False) if under else None


def explain_filter_refusals(refusals: Iterable[FilterRefusal]) -> str:
    """One sentence for every queue the victim filter refused: grouped by the rule that applied
    (which side compared, and how), the victims' sides in name order, so it reads the same
    while the queues stand as they do."""
    by_rule: dict[str, set[str]] = {}
    for refusal in refusals:
        by_rule.setdefault(refusal.rule, set()).add(refusal.victim_side)
    parts = []
    for rule, sides in sorted(by_rule.items()):
        names = ", ".join(sorted(sides))
        parts.append(f"{rule} may give back, and {names} {'is' if len(sides) == 1 else 'are'} not")
    return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """Queue allocations frozen when a job's search starts (KAI's job-simulation queues)."""

    allocated: Array
    allocated_np: Array


def victim_chunks(victims: dict[str, list[Task]], jobs: dict[str, Job], ignore_moved: bool) -> dict[str, list[Array]]:
    """Resources each victim queue gives back, chunked as KAI counts them: pods above a
    pod set's minimum one by one, the pods that make its gang together. A semi-preemptible
    job's victims are all surplus (its gang is never taken): one by one."""
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
            minimum = 0 if job.semi_preemptible else job.pod_sets[name].min_available
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
    # Summed in plain floats, in the tasks' order (as numpy's sum over the rows would): this
    # runs for every victim of every scenario, mostly for one task.
    gpu, cpu, memory = kept[0].accepted
    for task in kept[1:]:
        gpu, cpu, memory = gpu + task.accepted[0], cpu + task.accepted[1], memory + task.accepted[2]
    return np.array((gpu, cpu, memory), dtype=np.float64)


def reclaim_refusal(
    queues: QueueState,
    frozen: QueueSnapshot,
    reclaimer_queue: str,
    request: Array,
    preemptible: bool,
    chunks_by_queue: dict[str, list[Array]],
    multiplier: float = 1.0,
    subject: str = "non-preemptible job",
) -> str | None:
    """Strategies and saturation for one scenario: None when it satisfies them, else which
    rule it breaks, naming the queues the rule compared (no figures: the text stays the same
    while the situation does)."""
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
                return _strategy_refusal(queues, frozen, request, mine, theirs)
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
                return (
                    f"{tree.names[level]} would be above its fair share and no less saturated than "
                    f"{tree.names[sibling]}, which it would take from"
                )
        if not preemptible and not less_equal(frozen.allocated_np[level] + request, tree.deserved[level]):
            return f"a {subject} would take {tree.names[level]} above its deserved quota"
    return None


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


def _strategy_refusal(queues: QueueState, frozen: QueueSnapshot, request: Array, mine: int, theirs: int) -> str:
    """Why a victim chunk fits neither strategy: its queue would be left at or below its fair
    share, and the reclaimer would go above its deserved quota or the victim's queue would be
    left at or below its own."""
    names = queues.tree.names
    if not less_equal(frozen.allocated[mine] + request, queues.tree.deserved[mine]):
        return (
            f"it would leave {names[theirs]} at or below its fair share while taking {names[mine]} "
            "above its deserved quota"
        )
    return f"it would leave {names[theirs]} at or below its fair share and its deserved quota"


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
