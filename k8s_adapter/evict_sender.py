"""A cycle's evictions on their way to the API server.

Each eviction is checked again just before it is sent: the pod it names may be gone, re-created
or finished since the cycle decided, or the job it made room for may no longer wait; then it is
dropped. What was evicted is counted and told (events and conditions through the status writer).
"""

from __future__ import annotations

from coordinator.results import CycleResult
from k8s_adapter.cache import ClusterCache
from k8s_adapter.evictor import Evictor, EvictRequest
from k8s_adapter.metrics import SchedulerMetrics
from k8s_adapter.status import Eviction, StatusWriter, describe_evictions
from kai_ray.model import PodState


class EvictSender:
    def __init__(self, evictor: Evictor, status: StatusWriter, cache: ClusterCache, metrics: SchedulerMetrics) -> None:
        self.evictor = evictor
        self.status = status
        self.cache = cache
        self.metrics = metrics
        self._evicting: dict[str, Eviction] = {}  # pod -> what its eviction events will say, until evicted
        self._queued: list[EvictRequest] = []  # handed out, not sent yet

    def hand_out(self, outcome: CycleResult) -> None:
        """Take the cycle's evictions to send: their pods read as releasing from the next deltas on."""
        self._queued.extend(EvictRequest(e.pod, e.action, e.preemptor, self._uid(e.pod)) for e in outcome.evictions)
        self._evicting.update(describe_evictions(outcome, self.cache))
        self.cache.evicting([e.pod for e in outcome.evictions])

    async def send(self) -> int:
        """Send the evictions handed out (and retry those still waiting); returns how many went out."""
        requests, self._queued = self._queued, []
        if not requests and not self.evictor.waiting:
            return 0
        report = await self.evictor.evict_all(requests, self._still_wanted)
        sent = [self._evicting.pop(pod) for pod in report.evicted if pod in self._evicting]
        for eviction in sent:
            namespace, _, name = eviction.group.partition("/")
            self.metrics.observe_eviction(eviction.action, name, namespace, eviction.group_uid)
        for pod in (*report.failed, *report.dropped):
            self._evicting.pop(pod, None)
        # Not gone after all (a budget may let it go later): the next cycle sees it as it is.
        self.cache.evicting([*report.failed, *report.dropped, *report.blocked], sent=False)
        await self.status.evicted(sent)
        return len(report.evicted)

    def _uid(self, pod: str) -> str:
        record = self.cache.pods.get(pod)
        return record.uid if record is not None else ""

    def _still_wanted(self, request: EvictRequest) -> str | None:
        """Why an eviction must not be sent now (None: send it): the state it was decided on is gone."""
        victim = self.cache.pod_now(request.pod)
        if victim is None:
            return "the pod is gone"
        if request.uid and victim.uid != request.uid:
            return "the pod was re-created since"
        if victim.state not in (PodState.RUNNING, PodState.BINDING):
            return f"the pod is {victim.state.value} already"
        if request.preemptor is None:
            return None
        members = (self.cache.pod_now(p) for p in self.cache.members(request.preemptor))
        if not any(m is not None and m.state in (PodState.PENDING, PodState.PIPELINED) for m in members):
            return f"{request.preemptor}, which it made room for, no longer waits"
        return None
