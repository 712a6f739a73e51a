"""Evicting pods through ``pods/eviction`` (PodDisruptionBudgets respected), delete as fallback.

A 429 from a PodDisruptionBudget is not an error to drop: the eviction waits in a retry
list and is tried again on later cycles until it goes through or the pod is gone. Every
eviction, new or retried, is checked against the current state right before it is sent
(``still_wanted``): one whose victim already left, was re-created, or whose preemptor is gone
or no longer waits is dropped, never sent for nothing. The victim's uid travels as a delete
precondition, so a pod re-created under the same name is never evicted by mistake. With
``mode="delete"`` pods are deleted directly, as KAI does (its role grants pods/delete).
Before evicting, the pod gets a DisruptionTarget condition saying which action evicted it
and for whom, as KAI's --update-pod-eviction-condition does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from k8s_adapter.api import KubeApi, KubeError
from k8s_adapter.kinds import PODS

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EvictRequest:
    pod: str
    action: str
    preemptor: str | None = None  # the pod group the eviction makes room for
    uid: str = ""  # the victim's uid when it was chosen


# Why an eviction is no longer wanted (None: it still is), asked right before it is sent.
Recheck = Callable[[EvictRequest], str | None]


@dataclass(slots=True)
class EvictionReport:
    evicted: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # refused by a disruption budget, will retry
    failed: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # no longer wanted when it was due


class Evictor:
    def __init__(
        self,
        api: KubeApi,
        mode: str = "eviction",
        grace_seconds: int | None = None,
        retry_after: float = 5.0,
        mark: bool = True,
    ) -> None:
        self.api = api
        self.mode = mode
        self.mark = mark  # off when pods/status patch is not granted: no request that is bound to be refused
        self.grace_seconds = grace_seconds
        self.retry_after = retry_after
        self.waiting: dict[str, tuple[EvictRequest, float]] = {}  # pod -> request, next attempt

    async def evict_all(self, requests: Sequence[EvictRequest], still_wanted: Recheck | None = None) -> EvictionReport:
        now = time.monotonic()
        due = [req for req, at in self.waiting.values() if at <= now]
        todo = {r.pod: r for r in [*due, *requests]}
        report = EvictionReport()
        for key, request in list(todo.items()):
            why = still_wanted(request) if still_wanted is not None else None
            if why is not None:
                log.info("eviction of %s (%s) dropped: %s", key, request.action, why)
                report.dropped.append(key)
                self.waiting.pop(key, None)
                del todo[key]
        results = await asyncio.gather(*(self._evict(r) for r in todo.values()))
        for request, outcome in zip(todo.values(), results, strict=True):
            if outcome == "evicted":
                report.evicted.append(request.pod)
                self.waiting.pop(request.pod, None)
            elif outcome == "blocked":
                report.blocked.append(request.pod)
                self.waiting[request.pod] = (request, now + self.retry_after)
            else:
                report.failed.append(request.pod)
                self.waiting.pop(request.pod, None)
        return report

    async def _evict(self, request: EvictRequest) -> str:
        namespace, name = request.pod.split("/", 1)
        if self.mark:
            await self._mark(request, namespace, name)
        options: dict[str, object] = {}
        if self.grace_seconds is not None:
            options["gracePeriodSeconds"] = self.grace_seconds
        if request.uid:
            options["preconditions"] = {"uid": request.uid}
        try:
            if self.mode == "delete":
                await self.api.request(
                    "DELETE",
                    PODS.item(name, namespace),
                    body={"apiVersion": "v1", "kind": "DeleteOptions", **options},
                )
            else:
                body = {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": name, "namespace": namespace},
                    **({"deleteOptions": options} if options else {}),
                }
                await self.api.request("POST", PODS.item(name, namespace, "eviction"), body=body)
            return "evicted"
        except KubeError as exc:
            if exc.status == 404:
                return "evicted"  # already gone
            if exc.status == 409 and request.uid:
                return "evicted"  # the uid precondition failed: the victim we chose is gone
            if exc.status == 429:
                log.info("eviction of %s blocked by a disruption budget; will retry", request.pod)
                return "blocked"
            log.warning("eviction of %s failed: %s", request.pod, exc)
            return "blocked" if exc.transient else "failed"

    async def _mark(self, request: EvictRequest, namespace: str, name: str) -> None:
        who = f" for {request.preemptor}" if request.preemptor else ""
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": f"kai-ray {request.action}{who}",
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        try:
            await self.api.request(
                "PATCH",
                PODS.item(name, namespace, "status"),
                body={"status": {"conditions": [condition]}},
                content_type="application/strategic-merge-patch+json",
            )
        except KubeError as exc:
            log.debug("could not mark %s before eviction: %s", request.pod, exc)
