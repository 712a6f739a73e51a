"""Victim searches (reclaim, preempt, consolidation) that are not worth running.

Two rules, one from KAI and one of kai-ray's own:

**Scheduling signatures (KAI), within one session.**

Jobs whose pods carry the same placement constraints (node selector, affinity, tolerations)
and the same pod priority class compete for the same nodes. KAI hashes the pods' specs only,
so two jobs whose PodGroups have different priorities but whose pods look alike share a
signature, even though preempt offers them different victims. Once the search for one of
them fails, a later job with the same signature is only searched for when it is *easier*
than the smallest job that failed: it has fewer pending pods, or, pod by pod in ascending
size, it is strictly smaller somewhere before it runs out of pods. That is KAI's rule
(``--use-scheduling-signatures``, on by default), and it is what keeps reclaim, preempt and
consolidation from repeating hundreds of identical searches in a busy cluster.

**Backoff (kai-ray), across sessions.** KAI searches again for every pending job in every
cycle, and in a busy cluster almost all of those searches fail the same way again. kai-ray
pauses an action's search for a job after it failed: 10 s after the first failure, doubling
with each further one up to ``victimSearchBackoff`` (120 s by default; 0 searches every cycle,
as KAI). Each action counts on its own: that consolidation or preempt found nothing for a job
does not hold back reclaim, which KAI would try next. kube-scheduler treats unschedulable pods
alike: they wait for a relevant cluster event or up to five minutes before they are tried
again. The coordinator keeps the failure counts (``coordinator.search_backoff``); a session
only sees which searches are paused. Plain allocation is never paused.
"""

from __future__ import annotations

from collections.abc import Hashable

from coordinator.jobs import Job
from coordinator.session import SessionState
from coordinator.tasks import Status, Task

Request = tuple[float, ...]


def signature(job: Job) -> Hashable:
    """KAI's scheduling-constraints signature: per pod set with pods that were not placed when
    the session opened (KAI computes it then), the topology constraints from that pod set up to
    the PodGroup, and one entry per such pod saying what its spec allows (node selector,
    affinity, tolerations, priority class). Requests, the PodGroup's priority and the sub-groups'
    names are not part of it, and a pod set with nothing waiting adds nothing (its signature is
    empty in KAI): a gang with sub-groups waiting for one pod is like a plain job waiting for one
    pod. The count of waiting pods is part of it: a job waiting for two is not like one waiting
    for one."""
    per_set = []
    for pod_set in job.pod_sets.values():
        waiting = sorted(
            repr((t.shape.constraints, t.pod.priority_class_name))
            for t in pod_set.tasks
            if not t.original_status.active_allocated
        )
        if waiting:
            per_set.append((repr(_topology_chain(job, pod_set.name)), tuple(waiting)))
    return tuple(sorted(per_set))


def _topology_chain(job: Job, pod_set: str | None) -> tuple[object, ...]:
    """The topology constraints a pod set is placed under: its own (none for the pod set of a
    job without sub-groups), its parents', the PodGroup's. KAI's pod sets all hang under a root
    that carries the PodGroup's constraint, so a plain job's chain has the same two links as a
    sub-group directly under the root."""
    by_name = {sub.name: sub for sub in job.group.sub_groups}
    sub = by_name.get(pod_set or "")
    if sub is None:
        return (None, job.group.topology)
    chain: list[object] = []
    seen: set[str] = set()
    while sub is not None and sub.name not in seen:
        seen.add(sub.name)
        chain.append(sub.topology)
        sub = by_name.get(sub.parent or "")
    chain.append(job.group.topology)
    return tuple(chain)


def _request(task: Task) -> Request:
    pod = task.pod
    share = pod.gpu_share
    gpus = pod.requests.gpu
    gpu_memory = 0.0
    if share is not None:
        if share.fraction is not None:
            gpus += share.devices * share.fraction
        else:
            gpu_memory = float(share.devices * (share.memory_mib or 0))
    scalars = tuple(v for _, v in sorted(pod.requests.scalars.items()))
    return (gpus, gpu_memory, pod.requests.cpu, pod.requests.memory, *scalars)


def _pending_requests(job: Job) -> list[Request]:
    # Lexicographic order extends the component-wise one, so comparable requests keep their order.
    return sorted(_request(t) for t in job.tasks if t.status is Status.PENDING)


def _less_equal(a: Request, b: Request) -> bool:
    return len(a) == len(b) and all(x <= y for x, y in zip(a, b, strict=True))


def _easier(candidate: list[Request], failed: list[Request]) -> bool:
    if not candidate or not failed:
        return False
    if len(failed) > len(candidate):
        return True
    for index, request in enumerate(candidate):
        if index >= len(failed):
            return False
        if _less_equal(request, failed[index]) and not _less_equal(failed[index], request):
            return True
    return False


def _smaller_footprint(new: list[Request], current: list[Request]) -> bool:
    if not new or not current or len(new) > len(current):
        return False
    return all(_less_equal(a, b) for a, b in zip(new, current, strict=False))


class FailedSearches:
    """The smallest job that failed, per signature (and per queue where the action says so)."""

    def __init__(self, per_queue: bool) -> None:
        self.per_queue = per_queue
        self._smallest: dict[Hashable, tuple[str, list[Request]]] = {}

    def _key(self, job: Job) -> Hashable:
        return (job.queue, signature(job)) if self.per_queue else signature(job)

    def worth_trying(self, job: Job) -> str | None:
        """None if the job should be searched for, else the name of the job that rules it out."""
        known = self._smallest.get(self._key(job))
        if known is None or _easier(_pending_requests(job), known[1]):
            return None
        return known[0]

    def failed(self, job: Job) -> None:
        key, requests = self._key(job), _pending_requests(job)
        known = self._smallest.get(key)
        if known is None or _smaller_footprint(requests, known[1]):
            self._smallest[key] = (job.key, requests)


def should_search(state: SessionState, job: Job, failed: FailedSearches, action: str) -> bool:
    """Whether ``action`` should look for victims for ``job``.

    A skipped search changes nothing about why the job waits, so the job's reason does not say
    "skipped": a paused job keeps what its last real search said (the message stays the same, and
    with it the job's event), and a job ruled out by a similar one keeps its own allocate reason,
    as in KAI. Why the search was skipped goes to ``state.searches.skipped`` (logged, and tested).
    """
    if (job.key, action) in state.searches.paused:
        last = state.searches.paused_reasons.get(job.key, {}).get(action)
        if last:
            job.fit_errors.setdefault(action, last)
        state.searches.skipped[job.key] = "victim search paused after failing in recent cycles"
        return False
    if not state.config.useSchedulingSignatures:
        return True
    like = failed.worth_trying(job)
    if like is None:
        return True
    state.searches.skipped[job.key] = (
        f"not searched: {like} has the same constraints, is no bigger and found no room in this session"
    )
    return False


def search_failed(state: SessionState, job: Job, failed: FailedSearches, action: str) -> None:
    failed.failed(job)
    state.searches.failed.add((job.key, action))
