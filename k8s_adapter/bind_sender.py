"""A cycle's binds on their way to the API server.

Each bind the coordinator committed becomes the binder's request (a fraction's portion, the
claims' allocations, a bare pod's own PodGroup name riding on the binding); what came of it is
written where the rest of the loop reads it: the pods' status, the bind backoff (a pod whose
bind failed waits before the coordinator sees it again), the metrics. The failures go back to
the coordinator, whose model counted the pods as placed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable

from coordinator.results import BindIntent
from k8s_adapter.binder import POD_GONE, POD_RECREATED, BindBackoff, Binder, BindRequest, FractionBind
from k8s_adapter.cache import ClusterCache
from k8s_adapter.claims import ClaimBind, allocation_json
from k8s_adapter.metrics import SchedulerMetrics
from k8s_adapter.status import StatusWriter
from kai_ray import labels as L


class BindSender:
    def __init__(
        self,
        binder: Binder,
        status: StatusWriter,
        backoff: BindBackoff,
        cache: ClusterCache,
        metrics: SchedulerMetrics,
        pod_grouper: bool,
    ) -> None:
        self.binder = binder
        self.status = status
        self.backoff = backoff
        self.cache = cache
        self.metrics = metrics
        self.pod_grouper = pod_grouper  # on: bare pods' own PodGroup names go with their binds
        self.in_flight: set[str] = set()  # pods whose bind is in flight (the pod grouper leaves them)

    async def send(self, binds: list[BindIntent], give_back: Callable[[list[str]], Awaitable[object]]) -> int:
        """Bind these pods; those that failed go to ``give_back``. Returns how many were bound."""
        requests = [self.request(b) for b in binds]
        pods = [r.pod for r in requests]
        self.in_flight.update(pods)
        try:
            results = await self.binder.bind_all(requests)
        finally:
            self.in_flight.difference_update(pods)
        nodes = {b.pod: b.node for b in binds}
        uids = {r.pod: r.uid for r in requests}
        await self.status.bound([(r.pod, uids[r.pod], nodes[r.pod], r.ok, r.reason) for r in results])
        failed = [r.pod for r in results if not r.ok]
        clock = time.monotonic()
        for result in results:
            if result.ok:
                self.backoff.bound(result.pod)
            elif result.reason not in (POD_GONE, POD_RECREATED):  # a pod that is gone has nothing to wait for
                until = self.backoff.failed(result.pod, result.reason, clock)
                self.cache.hold_back(result.pod, until, result.reason)
        if failed:
            await give_back(failed)
        now = time.time()
        created = [self.cache.pods.get(r.pod) for r in results if r.ok]
        waited = [now - pod.created for pod in created if pod is not None]
        self.metrics.observe_binds(len(results) - len(failed), len(failed), waited)
        return len(results) - len(failed)

    def request(self, bind: BindIntent) -> BindRequest:
        """The binder's request for one committed bind."""
        pod = self.cache.pods.get(bind.pod)
        fraction = None
        if pod is not None and pod.gpu_share is not None and bind.gpu_groups:
            node = self.cache.nodes.get(bind.node)
            portion = pod.gpu_share.accepted_portion(node.gpu_memory_mib if node is not None else 0.0)
            fraction = FractionBind(f"{portion:.2f}", pod.gpu_share.devices > 1)
        class_configs = (
            {name: json.loads(c.config_json) for name, c in self.cache.dra.classes.items()} if bind.claims else {}
        )
        claims = tuple(
            ClaimBind(g.claim.split("/", 1)[1], allocation_json(g.allocation), class_configs) for g in bind.claims
        )
        # A bare pod's own PodGroup name rides on the binding (the pod grouper need not PATCH it).
        group = self.cache.own_group(bind.pod) if self.pod_grouper else None
        annotations = ((L.POD_GROUP_ANNOTATION, group),) if group else ()
        uid = pod.uid if pod is not None else ""
        return BindRequest(bind.pod, uid, bind.node, bind.gpu_groups, fraction, claims, annotations)
