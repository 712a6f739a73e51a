"""Binding pods through the ``pods/binding`` subresource, many at a time, with KAI's retries.

A bind carries the pod's UID, so a pod deleted and re-created under the same name is
never bound by mistake. 409 Conflict means the pod is already bound: that is success if
it went to the node we chose, failure otherwise.

What comes before the bind itself, in KAI's binder order:

1. a fractional pod's shared GPUs are reserved (``gpu_sharing.py``: a reservation pod per
   device, the pod labelled with its group) and its ConfigMaps say which device and which
   portion it got (``gpu_env.py``); it is annotated ``received-resource-type: Fraction``;
2. the pod's ResourceClaims get the allocation the scheduler chose and the pod in
   ``reservedFor`` (``claims.py``);
3. the binding (carrying the annotations the pod is to get with it: a bare pod's own
   ``pod-group-name``, which the pod grouper would otherwise PATCH).

Any failure on the way rolls back what the attempt did (ConfigMaps deleted, group labels
removed, a reservation pod nobody else uses deleted, claims restored), so a failed
attempt leaves no half-bound pod; then the whole attempt is retried after 1, 2, 4, ...
base delays (KAI's BindRequest backoff). Whatever still fails is reported back so the
coordinator releases the capacity and tries the pod again next cycle.

Rule for gangs (as in KAI): pods of a gang that did bind stay bound; the failed pod is
pending again and normally lands in the next cycle. If the gang stays below its minimum,
stale-gang eviction evicts it after its grace period, so it is never left half-running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from k8s_adapter.api import JSON, OPEN_REQUESTS, OTHER_REQUESTS, KubeApi, KubeError, urgent
from k8s_adapter.claims import ClaimBind, ClaimChange, ClaimWriter
from k8s_adapter.gpu_env import GpuEnvError, GpuEnvWriter
from k8s_adapter.gpu_sharing import ReservationError, ReservationService
from k8s_adapter.kinds import PODS
from kai_ray import labels as L

log = logging.getLogger(__name__)
# Binds open at once: the client's request slots (``api.OPEN_REQUESTS``) less those the other
# writers may hold, so neither side ever waits for the other's share.
BIND_CONCURRENCY = OPEN_REQUESTS - OTHER_REQUESTS
POD_GONE = "the pod no longer exists"  # deleted (or being deleted): nothing to bind, nothing to retry
POD_RECREATED = "the pod was deleted and created again"


@dataclass(frozen=True, slots=True)
class FractionBind:
    """What a fractional pod received: the portion of each device (KAI's ``%.2f``) and
    whether it spans several devices (then its labels are ``runai-gpu-group/<group>``)."""

    portion: str
    multi: bool = False


@dataclass(frozen=True, slots=True)
class BindRequest:
    pod: str  # namespace/name
    uid: str
    node: str
    gpu_groups: tuple[str, ...] = ()  # shared GPUs a fraction sits on
    fraction: FractionBind | None = None
    claims: tuple[ClaimBind, ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()  # set on the pod with the binding


@dataclass(frozen=True, slots=True)
class BindOutcome:
    pod: str
    ok: bool
    reason: str = ""


class BindFailure(Exception):
    def __init__(self, reason: str, retry: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry


@dataclass(slots=True)
class _Attempt:
    """What one attempt changed, so a rollback undoes exactly that."""

    configmaps: list[str] = field(default_factory=list)
    reserved: bool = False
    claims: list[ClaimChange] = field(default_factory=list)


class Binder:
    def __init__(
        self,
        api: KubeApi,
        concurrency: int = BIND_CONCURRENCY,
        attempts: int = 4,
        base_delay: float = 0.1,
        reservations: ReservationService | None = None,
    ) -> None:
        self.api = api
        self.limit = asyncio.Semaphore(concurrency)
        self.attempts = attempts
        self.base_delay = base_delay
        self.reservations = reservations or ReservationService(api)
        self.env = GpuEnvWriter(api)
        self.claims = ClaimWriter(api)
        self.rollbacks = 0
        self.mark: Callable[[str], None] = _nothing  # the loop's start-up clock: first request sent, answered

    async def bind_all(self, requests: Sequence[BindRequest]) -> list[BindOutcome]:
        return list(await asyncio.gather(*(self._bind(r) for r in requests)))

    async def _bind(self, request: BindRequest) -> BindOutcome:
        with urgent():  # pods wait on binds: ahead of status, events and PodGroups for the API's slots
            return await self._bind_with_retries(request)

    async def _bind_with_retries(self, request: BindRequest) -> BindOutcome:
        delay = self.base_delay
        for attempt in range(self.attempts):
            state = _Attempt()
            async with self.limit:
                try:
                    return await self._attempt(request, state)
                except BindFailure as failure:
                    reason, retry = failure.reason, failure.retry
                except KubeError as exc:
                    reason, retry = str(exc), exc.transient
                await self._rollback(request, state)
            if not retry or attempt == self.attempts - 1:
                log.warning("bind %s -> %s failed: %s", request.pod, request.node, reason)
                return BindOutcome(request.pod, False, reason if retry is False else f"{reason} (retries exhausted)")
            await asyncio.sleep(delay)
            delay *= 2
        return BindOutcome(request.pod, False, "retries exhausted")

    async def _attempt(self, request: BindRequest, state: _Attempt) -> BindOutcome:
        namespace, name = request.pod.split("/", 1)
        if request.gpu_groups or request.claims:
            pod = await self._read(request, namespace, name)
            if pod is None:
                return BindOutcome(request.pod, True)  # an earlier attempt did bind it
            if request.gpu_groups:
                await self._share_gpus(request, pod, state)
            if request.claims:
                await self.claims.reserve(pod, request.claims, state.claims)
        return await self._post_binding(request, namespace, name)

    async def _read(self, request: BindRequest, namespace: str, name: str) -> JSON | None:
        """The pod as it is now; None when it is already bound where we want it."""
        try:
            pod = (await self.api.request("GET", PODS.item(name, namespace))).body
        except KubeError as exc:
            if exc.status == 404:
                raise BindFailure(POD_GONE, retry=False) from exc
            raise
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if request.uid and meta.get("uid") != request.uid:
            raise BindFailure(POD_RECREATED, retry=False)
        if spec.get("nodeName"):
            if spec["nodeName"] == request.node:
                return None
            raise BindFailure(f"the pod is already bound to {spec['nodeName']}", retry=False)
        return pod

    async def _share_gpus(self, request: BindRequest, pod: JSON, state: _Attempt) -> None:
        fraction = request.fraction or FractionBind("1.00")
        service = self.reservations
        for group in request.gpu_groups:
            service.in_flight[group] += 1
        state.reserved = True
        try:
            await service.sync_node(request.node)
            devices = [await service.reserve(pod, request.node, g, fraction.multi) for g in request.gpu_groups]
            state.configmaps = await self.env.write(pod, devices, fraction.portion)
        except ReservationError as exc:
            raise BindFailure(str(exc), retry=True) from exc
        except GpuEnvError as exc:
            raise BindFailure(str(exc), retry=False) from exc
        meta = pod["metadata"]
        await self.api.request(
            "PATCH",
            PODS.item(meta["name"], meta.get("namespace") or "default"),
            body={"metadata": {"annotations": {L.RECEIVED_RESOURCE_TYPE_ANNOTATION: "Fraction"}}},
            content_type="application/merge-patch+json",
        )

    async def _post_binding(self, request: BindRequest, namespace: str, name: str) -> BindOutcome:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": name,
                "namespace": namespace,
                **({"uid": request.uid} if request.uid else {}),
                # The API server copies a binding's annotations onto the pod as it binds it.
                **({"annotations": dict(request.annotations)} if request.annotations else {}),
            },
            "target": {"apiVersion": "v1", "kind": "Node", "name": request.node},
        }
        self.mark("sent")
        try:
            await self.api.request("POST", PODS.item(name, namespace, "binding"), body=body)
        except KubeError as exc:
            if exc.status == 409:
                outcome = await self._already_bound(request, namespace, name, exc)
                if outcome.ok:
                    return outcome
                raise BindFailure(outcome.reason, retry=False) from exc
            if exc.status == 404:
                raise BindFailure(POD_GONE, retry=False) from exc
            raise
        self.mark("bound")
        self._done(request)
        return BindOutcome(request.pod, True)

    def _done(self, request: BindRequest) -> None:
        for group in request.gpu_groups:
            self.reservations.in_flight[group] -= 1

    async def _rollback(self, request: BindRequest, state: _Attempt) -> None:
        """Undo one failed attempt; problems here are logged (the next sync cleans up)."""
        if not (state.reserved or state.claims):
            return
        self.rollbacks += 1
        namespace, name = request.pod.split("/", 1)
        try:
            if state.claims:
                await self.claims.release(namespace, name, request.uid, state.claims)
            if state.reserved:
                await self.env.remove(namespace, state.configmaps)
                await self.reservations.forget_groups(namespace, name)
        except KubeError as exc:
            log.warning("rolling back the bind of %s failed: %s", request.pod, exc)
        finally:
            if state.reserved:
                self._done(request)
        if state.reserved:
            try:
                await self.reservations.sync_node(request.node)
            except KubeError as exc:
                log.warning("cleaning up reservation pods on %s failed: %s", request.node, exc)

    async def _already_bound(self, request: BindRequest, namespace: str, name: str, exc: KubeError) -> BindOutcome:
        """A 409 on the binding: bound there already (by an earlier attempt), or why not. A pod being
        deleted is refused with 409 too, and may be gone by the time it is read (found by the
        real-cluster churn): that is a pod gone, not a conflict with another bind."""
        try:
            pod = (await self.api.request("GET", PODS.item(name, namespace))).body
        except KubeError as again:
            if again.status == 404:
                return BindOutcome(request.pod, False, POD_GONE)
            return BindOutcome(request.pod, False, f"conflict, and reading the pod failed: {again}")
        meta = pod.get("metadata") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        if request.uid and meta.get("uid") != request.uid:
            return BindOutcome(request.pod, False, POD_RECREATED)
        if node == request.node:
            self._done(request)
            return BindOutcome(request.pod, True)
        if meta.get("deletionTimestamp") and not node:
            return BindOutcome(request.pod, False, POD_GONE)
        return BindOutcome(request.pod, False, f"conflict: {exc.reason} (bound to {node or 'nothing'})")


def _nothing(step: str) -> None:
    pass


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
