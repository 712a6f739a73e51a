"""Binding pods through the ``pods/binding`` subresource, many at a time, with retries.

A bind carries the pod's UID, so a pod deleted and re-created under the same name is
never bound by mistake. 409 Conflict means the pod is already bound: that is success if
it went to the node we chose, failure otherwise. Server errors and 429 are retried with
exponential backoff; whatever still fails is reported back so the coordinator releases
the capacity and tries the pod again next cycle.

Rule for gangs (as in KAI): pods of a gang that did bind stay bound; the failed pod is
pending again and normally lands in the next cycle. If the gang stays below its minimum,
stale-gang eviction evicts it after its grace period, so it is never left half-running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from k8s_adapter.api import KubeApi, KubeError
from k8s_adapter.kinds import PODS

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BindRequest:
    pod: str  # namespace/name
    uid: str
    node: str
    gpu_groups: tuple[str, ...] = ()  # shared GPUs a fraction sits on (labelled before binding, as KAI)


@dataclass(frozen=True, slots=True)
class BindOutcome:
    pod: str
    ok: bool
    reason: str = ""


class Binder:
    def __init__(self, api: KubeApi, concurrency: int = 32, attempts: int = 4, base_delay: float = 0.1) -> None:
        self.api = api
        self.limit = asyncio.Semaphore(concurrency)
        self.attempts = attempts
        self.base_delay = base_delay

    async def bind_all(self, requests: Sequence[BindRequest]) -> list[BindOutcome]:
        return list(await asyncio.gather(*(self._bind(r) for r in requests)))

    async def _bind(self, request: BindRequest) -> BindOutcome:
        namespace, name = request.pod.split("/", 1)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, **({"uid": request.uid} if request.uid else {})},
            "target": {"apiVersion": "v1", "kind": "Node", "name": request.node},
        }
        if request.gpu_groups and not await self._label_groups(request, namespace, name):
            return BindOutcome(request.pod, False, "could not label the pod with its GPU group")
        delay = self.base_delay
        for attempt in range(self.attempts):
            async with self.limit:
                try:
                    await self.api.request("POST", PODS.item(name, namespace, "binding"), body=body)
                    return BindOutcome(request.pod, True)
                except KubeError as exc:
                    if exc.status == 409:
                        return await self._already_bound(request, namespace, name, exc)
                    if exc.status == 404:
                        return BindOutcome(request.pod, False, "the pod no longer exists")
                    if not exc.transient or attempt == self.attempts - 1:
                        log.warning("bind %s -> %s failed: %s", request.pod, request.node, exc)
                        return BindOutcome(request.pod, False, str(exc))
            await asyncio.sleep(delay)
            delay *= 2
        return BindOutcome(request.pod, False, "retries exhausted")

    async def _label_groups(self, request: BindRequest, namespace: str, name: str) -> bool:
        labels = {"runai-gpu-group": request.gpu_groups[0]}
        labels.update({f"runai-gpu-group/{g}": g for g in request.gpu_groups[1:]})
        try:
            await self.api.request(
                "PATCH",
                PODS.item(name, namespace),
                body={"metadata": {"labels": labels}},
                content_type="application/merge-patch+json",
            )
            return True
        except KubeError as exc:
            log.warning("labelling %s with its GPU group failed: %s", request.pod, exc)
            return False

    async def _already_bound(self, request: BindRequest, namespace: str, name: str, exc: KubeError) -> BindOutcome:
        try:
            pod = (await self.api.request("GET", PODS.item(name, namespace))).body
        except KubeError as again:
            return BindOutcome(request.pod, False, f"conflict, and reading the pod failed: {again}")
        node = (pod.get("spec") or {}).get("nodeName")
        uid = (pod.get("metadata") or {}).get("uid")
        if node == request.node and (not request.uid or uid == request.uid):
            return BindOutcome(request.pod, True)
        return BindOutcome(request.pod, False, f"conflict: {exc.reason} (bound to {node or 'nothing'})")


@dataclass(slots=True)
class BindFailures:
    count: int
    reason: str
    until: float


class BindBackoff:
    """Pods whose bind failed: each further failure waits twice as long before the pod is placed
    again (``base`` seconds after the first, at most ``limit``), as kube-scheduler backs off
    pods that keep failing. A gang waiting on such a pod is short of its minimum meanwhile, so
    stale-gang eviction applies to it as KAI's rules say, instead of a pod re-placed every cycle."""

    def __init__(self, base: float = 5.0, limit: float = 300.0) -> None:
        self.base = base
        self.limit = limit
        self.failures: dict[str, BindFailures] = {}

    def failed(self, pod: str, reason: str, now: float) -> float:
        """Record a failure; returns when (``now``'s clock) the pod may be placed again."""
        known = self.failures.get(pod)
        count = known.count + 1 if known is not None else 1
        until = now + min(self.limit, self.base * 2.0 ** (count - 1))
        self.failures[pod] = BindFailures(count, reason, until)
        return until

    def bound(self, pod: str) -> None:
        self.failures.pop(pod, None)

    def forget(self, keep: Callable[[str], bool]) -> None:
        """Drop pods ``keep`` no longer wants (gone, or bound by someone)."""
        for pod in [p for p in self.failures if not keep(p)]:
            del self.failures[pod]
