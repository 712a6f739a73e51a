"""Semi-preemptible jobs: which of their pods are the protected core and which the surplus.

A semi-preemptible PodGroup (``spec.preemptibility: semi-preemptible``, KAI's designed third
mode) is non-preemptible up to its gang minimum and preemptible beyond it. Per pod set, the
*core* is the first ``minMember`` of its placed pods in KAI's task order and the *surplus* is
the rest. A victim search takes a job's pods in reverse task order, so it meets the surplus
first; for these jobs it stops there (``coordinator.plugins.semipreemptible``).

Quota follows the same split, as KAI's design asks: the core counts as non-preemptible
allocation (it must fit the queue's deserved quota), the surplus as preemptible (it may go over
quota, within the limits). The pods a job places next are core while one of its pod sets is
below its minimum and surplus once none is (``places_core``); what its queue holds
non-preemptibly is the core's sum (``core_quota``), counted again around every change to the
job, so a rollback gives back exactly what was booked.

The readers never make a group with a sub-group tree semi-preemptible (which whole sub-groups
would be core is not settled), so pod sets side by side are all this module meets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from coordinator.jobs import Job, PodSet
from coordinator.tasks import DEFAULT_SUBGROUP, Task, pod_order_key
from kai_ray.model import Pod, PodGroup

Quota = tuple[float, float, float]
T = TypeVar("T")


def core_tasks(job: Job) -> list[Task]:
    """The job's placed pods (active allocated) that make its minimum, pod set by pod set."""
    return [task for ps in job.pod_sets.values() for task in _core_of(ps)]


def _core_of(ps: PodSet) -> list[Task]:
    if ps.min_available <= 0:
        return []
    if ps.active_allocated <= ps.min_available:  # all of them: no order needed
        return [t for t in ps.tasks if t.status.active_allocated]
    return first_in_task_order((t for t in ps.in_task_order() if t.status.active_allocated), ps.min_available)


def first_in_task_order(ordered: Iterable[T], count: int) -> list[T]:
    out: list[T] = []
    for item in ordered:
        if len(out) == count:
            break
        out.append(item)
    return out


def core_quota(job: Job) -> Quota:
    """What the core holds of the job's queue: its non-preemptible allocation."""
    return _sum(t.accepted for t in core_tasks(job))


def core_quota_at_open(job: Job) -> Quota:
    """The same as a session opens, where only bound and running pods count as the queue's
    allocation (pipelined and releasing ones do not, in KAI's books)."""
    return _sum(t.accepted for t in core_tasks(job) if t.status.counts_as_queue_allocation)


def _sum(amounts: Iterable[Sequence[float]]) -> Quota:
    g = c = m = 0.0
    for amount in amounts:
        g += amount[0]
        c += amount[1]
        m += amount[2]
    return (g, c, m)


def places_core(job: Job) -> bool:
    """Whether the pods the job places next make its minimum: a pod set is below it."""
    return any(ps.active_allocated < ps.min_available for ps in job.pod_sets.values())


def protected_subject(job: Job) -> str:
    """How a reason names a semi-preemptible job's core (``check_capacity``'s subject)."""
    sets = [ps for ps in job.pod_sets.values() if ps.min_available > 0]
    which = f"its first {sets[0].min_available} pods" if len(sets) == 1 else "minMember pods of each sub-group"
    return f"semi-preemptible job's protected minimum ({which})"


def has_surplus(job: Job) -> bool:
    return any(ps.active_allocated > ps.min_available for ps in job.pod_sets.values())


def surplus_tasks(job: Job) -> list[Task]:
    core = {id(t) for t in core_tasks(job)}
    return [t for t in job.tasks if t.status.active_allocated and id(t) not in core]


def protected_pods(group: PodGroup, pods: Iterable[Pod], held: Callable[[Pod], bool]) -> list[Pod]:
    """The same core over pod records, pod sets made as a session makes them (a pod naming no
    sub-group of the group is in ``default``, minimum 0 beside sub-groups): the pods ``held``
    admits that the adapter reports as the group's non-preemptible part."""
    if group.sub_groups:
        minimum = {s.name: s.min_member for s in group.sub_groups}
    else:
        minimum = {DEFAULT_SUBGROUP: max(group.min_member, 1)}
    by_set: dict[str, list[Pod]] = {}
    for pod in pods:
        if held(pod):
            name = pod.subgroup if pod.subgroup in minimum else DEFAULT_SUBGROUP
            by_set.setdefault(name or DEFAULT_SUBGROUP, []).append(pod)
    out: list[Pod] = []
    for name, members in by_set.items():
        members.sort(key=pod_order_key)
        out.extend(members[: minimum.get(name, 0)])
    return out
