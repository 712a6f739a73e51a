"""A cycle's gate removals on their way to the API server.

The coordinator names the pods whose queue has room for them (``CycleResult.ungates``); each
gets one PATCH that removes its scheduling gates and stamps when it was admitted (the
coordinator reserves the queue room of an admitted pod that still waits, for a while, from that
stamp). A pod is checked against the cache just before: it must still carry kai-ray's gate and
no other. Since gates can only be removed after creation, that pod's gates are at most kai-ray's
own, so the PATCH cannot drop anyone else's. A removal that fails is not retried here: the pod
stays gated, and the next cycle names it again.
"""

from __future__ import annotations

import asyncio
import logging
import time

from k8s_adapter.api import KubeApi, KubeError, describe
from k8s_adapter.cache import ClusterCache
from k8s_adapter.job_clocks import rfc3339
from k8s_adapter.kinds import PODS
from k8s_adapter.metrics import SchedulerMetrics
from kai_ray import labels as L

log = logging.getLogger(__name__)


class UngateSender:
    def __init__(self, api: KubeApi, cache: ClusterCache, metrics: SchedulerMetrics) -> None:
        self.api = api
        self.cache = cache
        self.metrics = metrics
        self.in_flight: set[str] = set()  # a cycle that repeats a removal still on its way adds none
        # Removed, and the cache not told yet: a cycle that runs before the watch brings the pod
        # back without its gate names it again, and a second PATCH would only re-stamp it.
        self.sent: set[str] = set()
        self.removed = 0
        self.failed = 0

    async def send(self, pods: list[str]) -> int:
        """Remove kai-ray's gate from these pods; returns how many PATCHes went through."""
        self.sent = {pod for pod in self.sent if self._still_gated(pod)}
        todo = [pod for pod in pods if pod not in self.in_flight and pod not in self.sent and self._still_gated(pod)]
        if not todo:
            return 0
        self.in_flight.update(todo)
        try:
            stamp = rfc3339(time.time())
            done = await asyncio.gather(*(self._remove(pod, stamp) for pod in todo))
        finally:
            self.in_flight.difference_update(todo)
        self.sent.update(pod for pod, ok in zip(todo, done, strict=True) if ok)
        sent = sum(done)
        self.removed += sent
        self.failed += len(todo) - sent
        self.metrics.observe_ungates(sent, len(todo) - sent)
        return sent

    def _still_gated(self, key: str) -> bool:
        pod = self.cache.pods.get(key)
        return pod is not None and pod.node is None and pod.scheduling_gates == (L.ADMISSION_GATE,)

    async def _remove(self, key: str, stamp: str) -> bool:
        namespace, _, name = key.partition("/")
        body = {"metadata": {"annotations": {L.ADMITTED_ANNOTATION: stamp}}, "spec": {"schedulingGates": None}}
        try:
            await self.api.request(
                "PATCH", PODS.item(name, namespace), body=body, content_type="application/merge-patch+json"
            )
        except KubeError as exc:
            if exc.status != 404:  # a pod that is gone has no gate to remove
                log.warning("removing the scheduling gate of %s failed: %s; tried again next cycle", key, describe(exc))
            return False
        return True
