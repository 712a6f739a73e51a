"""What users read about scheduling, written as KAI writes it; the one place that writes it.

Per cycle (``publish``):

- a pending pod of this scheduler gets ``PodScheduled=False`` (reason ``Unschedulable``) and a
  Warning ``Unschedulable`` event, both with KAI's message (``PodSchedulingErrors: ...``); a gang
  whose pods are not all created gets a ``NotReady`` event on its PodGroup instead, as in KAI;
- a pending PodGroup gets KAI's ``UnschedulableOnNodePool`` scheduling condition (reason,
  message, ``reasons[]`` with KAI's codes, a transition ID that grows with each change) and a
  Normal ``Unschedulable`` event; once its pods run the condition is removed (KAI#1888);
- a pipelined pod gets one ``Pipelined`` event, and another for a new node only once
  ``repipeline_after`` seconds have passed (see ``_pods``);
- where the adapter knows better than the cycle why a PodGroup waits (``explain.py``: an invalid
  PodGroup or pod, a pod backed off after failed binds), its condition says that instead, and a
  malformed object gets a Warning event naming the field and the value;
- PodGroup ``resourcesStatus`` and Queue ``status`` (allocated, allocatedNonPreemptible,
  requested, childQueues), as KAI's controllers keep them (``resource_status``).

After binds (``bound``): a ``Scheduled`` event, or ``FailedBinding`` and ``PodScheduled=False``
with reason ``BindingError``. After evictions (``evicted``): an ``Evict`` event on the pod and
on its PodGroup, with KAI's message and annotations.

Nothing is written twice for the same situation: conditions only when their message changes,
events through ``EventRecorder`` (one Event per situation, its count raised at most every five
minutes), resource status only when a figure changes. A pod or group pending for less than
``report_after`` seconds is not reported yet: most pods wait a cycle or two.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from k8s_adapter import messages as M
from k8s_adapter.api import JSON, KubeApi, KubeError
from k8s_adapter.events import EventRecorder, ObjectRef
from k8s_adapter.kinds import POD_GROUPS, PODS, QUEUES, Kind
from k8s_adapter.resource_status import pod_group_figures, queue_status

if TYPE_CHECKING:
    from coordinator.coordinator import CycleResult
    from k8s_adapter.cache import ClusterCache
    from k8s_adapter.explain import GroupNote

log = logging.getLogger(__name__)
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
STATUS_KEYS = ("allocated", "allocatedNonPreemptible", "requested")
# Seconds before a pod pipelined to another node gets a new Pipelined event: a pod pipelined in a
# reclaim storm is bound within seconds, one whose capacity is slow to free is told of its new
# node twice a minute at most.
REPIPELINE_AFTER = 30.0


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def pod_ref(key: str, uid: str) -> ObjectRef:
    namespace, _, name = key.partition("/")
    return ObjectRef("Pod", "v1", namespace, name, uid)


def group_ref(key: str, uid: str) -> ObjectRef:
    namespace, _, name = key.partition("/")
    return ObjectRef("PodGroup", POD_GROUPS.api_version, namespace, name, uid)


@dataclass(frozen=True, slots=True)
class Eviction:
    """An eviction sent, with what its events say."""

    pod: str
    pod_uid: str
    group: str  # the victim's PodGroup key
    group_uid: str
    action: str
    preemptor: str | None
    message: str
    gang_size: int  # pods evicted together with it


class StatusWriter:
    def __init__(
        self,
        api: KubeApi,
        component: str = "kai-scheduler",
        node_pool: str = "default",
        concurrency: int = 16,
        report_after: float = 2.0,
        repeat_after: float = 300.0,
        resources_every: float = 2.0,
        repipeline_after: float = REPIPELINE_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.node_pool = node_pool
        self.events = EventRecorder(api, component, repeat_after, concurrency, clock)
        self.limit = asyncio.Semaphore(concurrency)
        self.report_after = report_after
        self.resources_every = resources_every
        self.repipeline_after = repipeline_after
        self.clock = clock
        self.writes = 0  # status patches that went through
        self.last: dict[str, str] = {}  # pod group -> the message of the condition it carries
        self._transitions: dict[str, int] = {}
        self._pending_since: dict[str, float] = {}  # pod or pod group -> first seen pending
        self._pod_conditions: dict[str, str] = {}  # pod -> message of the PodScheduled=False written
        self._pipelined: dict[str, tuple[str, float]] = {}  # pod -> node and time of the Pipelined event posted
        self._resources: dict[tuple[str, str], dict[str, Any]] = {}  # ("pg"|"queue", key) -> status written
        self._next_resources = 0.0
        self._noted: dict[str, GroupNote] = {}  # pod group -> the adapter's reason, this publish

    # ------------------------------------------------------------------ per cycle
    async def publish(
        self,
        outcome: CycleResult,
        cache: ClusterCache,
        notes: Mapping[str, GroupNote] | None = None,
        warnings: Sequence[tuple[ObjectRef, str, str]] = (),
    ) -> None:
        """``notes``: PodGroups whose real reason the adapter knows better than the cycle (it
        replaces the cycle's); ``warnings``: (object, reason, message) Warning events, as for
        malformed objects."""
        now = self.clock()
        work: list[Awaitable[None]] = []
        self._noted = dict(notes or {})
        for ref, reason, message in warnings:
            self._report(work, ref, "Warning", reason, message)
        self._pods(outcome, cache, now, work)
        self._groups(outcome, cache, now, work)
        if now >= self._next_resources:
            self._next_resources = now + self.resources_every
            self._resource_status(outcome, cache, work)
            self._forget_gone(outcome, cache)
        if work:
            await asyncio.gather(*work)

    def _waited(self, key: str, now: float) -> bool:
        return now - self._pending_since.setdefault(key, now) >= self.report_after

    def _pods(self, outcome: CycleResult, cache: ClusterCache, now: float, work: list[Awaitable[None]]) -> None:
        for key, job in outcome.pod_jobs.items():
            decision, pod = outcome.decisions.pods.get(key), cache.pods.get(key)
            if decision is None or pod is None:
                continue
            ref = pod_ref(key, pod.uid)
            if decision.status == "Pending" and job not in outcome.not_ready_jobs:
                if self._waited(key, now):
                    message = M.fit_message(decision.reason)
                    if self._pod_conditions.get(key) != message:
                        work.append(self._pod_condition(key, M.UNSCHEDULABLE, message))
                    self._report(work, ref, "Warning", M.UNSCHEDULABLE, message)
                continue
            self._pending_since.pop(key, None)
            if self._pod_conditions.pop(key, None) is not None:
                self.events.forget(ref)  # placed: binding sets PodScheduled=True
            if decision.status == "Pipelined" and decision.node and self._repipelined(key, decision.node, now):
                self._pipelined[key] = (decision.node, now)
                self._report(work, ref, "Normal", M.PIPELINED, M.pipelined(key, decision.node))
        decided = outcome.decisions.pod_groups
        for key in [k for k in self._pending_since if k not in outcome.pod_jobs and k not in decided]:
            if key not in self._noted:
                del self._pending_since[key]  # gone
        for gone in [k for k in self._pod_conditions if k not in outcome.pod_jobs]:
            del self._pod_conditions[gone]
        for gone in [k for k in self._pipelined if outcome.decisions.pods.get(k, None) is None]:
            del self._pipelined[gone]

    def _repipelined(self, pod: str, node: str, now: float) -> bool:
        """Whether a pipelined pod's event is due: the first time, or on another node once
        ``repipeline_after`` has passed. Each session pipelines a waiting pod afresh, as KAI's do,
        and in a reclaim storm the freed capacity it lands on moves from cycle to cycle: KAI posts
        an event for each node (several per pod), which the API server has to take while it is
        busiest."""
        last = self._pipelined.get(pod)
        return last is None or (last[0] != node and now - last[1] >= self.repipeline_after)

    def _groups(self, outcome: CycleResult, cache: ClusterCache, now: float, work: list[Awaitable[None]]) -> None:
        existing = Counter(job for job in outcome.pod_jobs.values() if job in outcome.not_ready_jobs)
        for key, note in self._noted.items():
            if self._waited(key, now):
                message = M.fit_message(note.reason)
                self._report(work, group_ref(key, note.uid), "Normal", M.UNSCHEDULABLE, message)
                if self.last.get(key) != message:
                    work.append(self._set_condition(key, note.reason, message))
        for key, decision in outcome.decisions.pod_groups.items():
            if key in self._noted:
                continue
            raw = cache.raw_groups.get(key)
            if raw is None or not raw.uid:
                continue  # no PodGroup object (yet) to write on
            ref = group_ref(key, raw.uid)
            if decision.status != "Pending":
                self._pending_since.pop(key, None)
                if decision.status == "Running" and key in self.last:  # binds confirmed: clear, as KAI does
                    work.append(self._clear_condition(key, ref))
                continue
            if not self._waited(key, now):
                continue
            if key in outcome.not_ready_jobs:
                gated = outcome.gated_by_group.get(key, 0)  # never in ``pod_jobs``
                message = M.not_ready(raw.min_member, existing[key] + gated, gated)
                self._report(work, ref, "Normal", M.NOT_READY, message)
                continue
            message = M.fit_message(decision.reason)
            self._report(work, ref, "Normal", M.UNSCHEDULABLE, message)
            if self.last.get(key) != message:
                work.append(self._set_condition(key, decision.reason, message))

    def _forget_gone(self, outcome: CycleResult, cache: ClusterCache) -> None:
        """Drop what is remembered of pod groups and queues that no longer exist."""
        groups = cache.pod_groups
        for memory in (self.last, self._transitions):
            for key in [k for k in memory if k not in groups and k not in self._noted]:
                del memory[key]
        for kind, key in [
            k for k in self._resources if (k[1] not in groups if k[0] == "pg" else k[1] not in cache.queues)
        ]:
            del self._resources[(kind, key)]
        self.events.prune()

    def on_watch_event(self, kind: Kind, event: str, obj: JSON) -> None:
        """A cache listener: a deleted object's Event situations go with it. Its uid is never
        used again, so no Event could be aggregated onto them any more; kept until the recorder's
        prune (ten minutes unseen), every bound pod's ``Scheduled`` stayed that long, thousands at
        a few short jobs a second."""
        meta = obj.get("metadata") or {}
        if event == "DELETED" and meta.get("uid"):
            namespace = str(meta.get("namespace") or "")
            self.events.forget(ObjectRef(kind.name, kind.version, namespace, str(meta.get("name")), str(meta["uid"])))

    # ------------------------------------------------------------------ writes
    def _report(self, work: list[Awaitable[None]], ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Queue an event write only when it would send something (a new situation, or a repeat due)."""
        if self.events.due(ref, type_, reason, message):
            work.append(self._event(ref, type_, reason, message))

    async def _event(self, ref: ObjectRef, type_: str, reason: str, message: str, notes: Any = None) -> None:
        await self.events.record(ref, type_, reason, message, notes)

    async def _patch(self, path: str, body: dict[str, Any], content_type: str = MERGE) -> bool:
        async with self.limit:
            try:
                await self.api.request("PATCH", path, body=body, content_type=content_type)
            except KubeError as exc:
                if exc.status != 404:  # a pod or group deleted meanwhile is no news
                    log.info("status of %s not written: %s", path, exc)
                return False
        self.writes += 1
        return True

    async def _pod_condition(self, key: str, reason: str, message: str) -> None:
        namespace, _, name = key.partition("/")
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": _now(),
            "lastProbeTime": None,
        }
        if await self._patch(PODS.item(name, namespace, "status"), {"status": {"conditions": [condition]}}, STRATEGIC):
            self._pod_conditions[key] = message

    async def _set_condition(self, key: str, reason: str, message: str) -> None:
        namespace, _, name = key.partition("/")
        code, text = M.explanation(reason)
        transition = self._transitions.get(key, 0) + 1
        condition = {
            "type": M.CONDITION_TYPE,
            "nodePool": self.node_pool,
            "reason": M.UNSCHEDULABLE,
            "message": message,
            "status": "True",
            "transitionID": str(transition),
            "lastTransitionTime": _now(),
            "reasons": [{"reason": code, "message": text}],
        }
        if await self._patch(
            POD_GROUPS.item(name, namespace, "status"), {"status": {"schedulingConditions": [condition]}}
        ):
            self._transitions[key] = transition
            self.last[key] = message

    async def _clear_condition(self, key: str, ref: ObjectRef) -> None:
        namespace, _, name = key.partition("/")
        if await self._patch(POD_GROUPS.item(name, namespace, "status"), {"status": {"schedulingConditions": []}}):
            self.last.pop(key, None)
            self.events.forget(ref)

    def _resource_status(self, outcome: CycleResult, cache: ClusterCache, work: list[Awaitable[None]]) -> None:
        groups = cache.pod_groups
        pods = [(cache.pods[p], job) for p, job in outcome.pod_jobs.items() if p in cache.pods]
        figures = pod_group_figures(groups, pods, cache.nodes)
        for key, value in figures.items():
            raw = cache.raw_groups.get(key)
            status = value.as_status()
            if raw is not None and raw.uid and self._resources.get(("pg", key)) != status:
                namespace, _, name = key.partition("/")
                path = POD_GROUPS.item(name, namespace, "status")
                work.append(self._write_resources(("pg", key), path, status, "resourcesStatus"))
        for name, queue in queue_status(cache.queues, groups, figures).items():
            if self._resources.get(("queue", name)) != queue:
                work.append(self._write_resources(("queue", name), QUEUES.item(name, None, "status"), queue, None))

    async def _write_resources(
        self, key: tuple[str, str], path: str, status: dict[str, Any], under: str | None
    ) -> None:
        """Write ``status`` (already known to differ from what was written last)."""
        previous = self._resources.get(key, {})
        body: dict[str, Any] = dict(status)
        for part in STATUS_KEYS:  # a merge patch keeps map keys it does not name: null the ones now gone
            gone = {name: None for name in previous.get(part, {}) if name not in status.get(part, {})}
            body[part] = {**status.get(part, {}), **gone}
        if await self._patch(path, {"status": {under: body} if under else body}):
            self._resources[key] = status

    # ------------------------------------------------------------------ after binds and evictions
    async def bound(self, results: Sequence[tuple[str, str, str, bool, str]]) -> None:
        """``results``: (pod, its uid, node, ok, why it failed) per bind sent."""
        work: list[Awaitable[None]] = []
        for pod, uid, node, ok, why in results:
            ref = pod_ref(pod, uid)
            if ok:
                work.append(self._event(ref, "Normal", M.SCHEDULED, M.scheduled(pod, node, self.node_pool)))
                continue
            message = M.failed_binding(pod, node, why)
            work.append(self._event(ref, "Warning", M.FAILED_BINDING, message))
            work.append(self._pod_condition(pod, M.BINDING_ERROR, message))
        if work:
            await asyncio.gather(*work)

    async def evicted(self, evictions: Sequence[Eviction]) -> None:
        work: list[Awaitable[None]] = []
        for e in evictions:
            work.append(self._event(pod_ref(e.pod, e.pod_uid), "Normal", M.EVICT, e.message))
            if e.group_uid:
                notes = {M.EVICTED_COUNT: str(e.gang_size), M.EVICTOR_ACTION: e.action}
                if e.preemptor:
                    namespace, _, name = e.preemptor.partition("/")
                    notes |= {M.EVICTOR_NAME: name, M.EVICTOR_NAMESPACE: namespace}
                work.append(self._event(group_ref(e.group, e.group_uid), "Normal", M.EVICT, e.message, notes))
        if work:
            await asyncio.gather(*work)


def describe_evictions(outcome: CycleResult, cache: ClusterCache) -> dict[str, Eviction]:
    """A cycle's evictions with KAI's messages, by pod (sent now, or later when a budget allows)."""
    gang: dict[tuple[str, str | None], int] = {}
    for e in outcome.evictions:
        gang[(e.action, e.preemptor)] = gang.get((e.action, e.preemptor), 0) + 1
    out = {}
    for e in outcome.evictions:
        job = outcome.pod_jobs.get(e.pod, "")
        group, raw, pod = cache.pod_groups.get(job), cache.raw_groups.get(job), cache.pods.get(e.pod)
        details = ""
        preemptor = cache.pod_groups.get(e.preemptor) if e.preemptor else None
        if e.action == "reclaim" and preemptor is not None and group is not None:
            details = " ".join(_queue_line(outcome, cache, q) for q in (preemptor.queue, group.queue))
        message = M.eviction(e.action, e.pod, e.preemptor, group.min_member if group else 1, details.strip())
        out[e.pod] = Eviction(
            e.pod,
            pod.uid if pod else "",
            job,
            raw.uid if raw else "",
            e.action,
            e.preemptor,
            message,
            gang[(e.action, e.preemptor)],
        )
    return out


def _queue_line(outcome: CycleResult, cache: ClusterCache, name: str) -> str:
    queue, figures = cache.queues.get(name), outcome.decisions.queues.get(name)
    if queue is None or figures is None:
        return ""
    quota = {r: queue.resource(r).quota for r in ("gpu", "cpu", "memory")}
    return M.queue_details(name, figures["allocated"], quota, figures["fairShare"], queue.priority)
