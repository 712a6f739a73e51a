"""Events on objects, aggregated as the events API aggregates them.

The first time a situation is seen (the same object, type, reason and message), one core/v1
Event is created. Seeing it again does not create another: the same Event's ``count`` and
``lastTimestamp`` are updated, at most once every ``repeat_after`` seconds (client-go's event
correlator updates a repeated event the same way, and its spam filter lets one through every
five minutes). So an unchanged pending pod has one Event however many cycles it waits, and
``kubectl describe`` shows it as ``xN over T``. A changed message is a new situation: a new Event.
``involvedObject`` carries the object's UID, so ``kubectl describe`` finds the events of
exactly that object (also of a custom resource such as a PodGroup).
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from k8s_adapter.api import KubeApi, KubeError
from k8s_adapter.kinds import EVENTS

MAX_MESSAGE = 1024  # the API server refuses longer core/v1 event messages


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    api_version: str
    namespace: str  # "" for cluster-scoped objects
    name: str
    uid: str


@dataclass(slots=True)
class _Series:
    name: str
    namespace: str
    count: int
    written: float  # when count was last written (monotonic)
    seen: float  # when the situation was last reported, written or not


def _timestamp(wall: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


class EventRecorder:
    def __init__(
        self,
        api: KubeApi,
        component: str,
        repeat_after: float = 300.0,
        concurrency: int = 16,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.component = component
        self.instance = socket.gethostname()
        self.repeat_after = repeat_after
        self.clock, self.wall = clock, wall
        self.limit = asyncio.Semaphore(concurrency)
        self.created = 0  # Events created
        self.updated = 0  # Events whose count was raised
        self._series: dict[tuple[str, ...], _Series] = {}
        self._by_object: dict[str, set[tuple[str, ...]]] = {}
        self._names = itertools.count()

    def due(self, obj: ObjectRef, type_: str, reason: str, message: str) -> bool:
        """Whether reporting this situation now would send anything; notes it as seen either way.

        The cheap, synchronous check a caller makes for every object every cycle, so that only
        situations that are new or due for a repeat cost a request (or even a coroutine).
        """
        series = self._series.get(self._key(obj, type_, reason, message[:MAX_MESSAGE]))
        if series is None:
            return True
        now = self.clock()
        series.seen = now
        return now - series.written >= self.repeat_after

    @staticmethod
    def _key(obj: ObjectRef, type_: str, reason: str, message: str) -> tuple[str, ...]:
        return (obj.uid or f"{obj.kind}/{obj.namespace}/{obj.name}", type_, reason, message)

    async def record(
        self, obj: ObjectRef, type_: str, reason: str, message: str, annotations: Mapping[str, str] | None = None
    ) -> bool:
        """Report the situation; True when an Event was created or updated (False: aggregated, nothing sent)."""
        message = message[:MAX_MESSAGE]
        key = self._key(obj, type_, reason, message)
        series = self._series.get(key)
        now = self.clock()
        if series is not None:
            series.seen = now
            if now - series.written < self.repeat_after:
                return False
        async with self.limit:
            if series is not None:
                series.count += 1
                series.written = now
                if await self._raise_count(series):
                    return True
            series = await self._create(obj, type_, reason, message, annotations, series.count if series else 1)
        if series is None:
            return False
        self._series[key] = series
        self._by_object.setdefault(key[0], set()).add(key)
        return True

    def prune(self) -> int:
        """Forget situations not reported for two repeat intervals (their objects are gone or moved
        on without a ``forget``); how many were dropped."""
        horizon = self.clock() - 2 * max(self.repeat_after, 60.0)
        stale = [key for key, series in self._series.items() if series.seen < horizon]
        for key in stale:
            del self._series[key]
            keys = self._by_object.get(key[0])
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_object[key[0]]
        return len(stale)

    def forget(self, obj: ObjectRef) -> None:
        """The object's situations are over (or it is gone): a new occurrence starts a new Event."""
        for key in self._by_object.pop(obj.uid or f"{obj.kind}/{obj.namespace}/{obj.name}", set()):
            self._series.pop(key, None)

    async def _create(
        self,
        obj: ObjectRef,
        type_: str,
        reason: str,
        message: str,
        annotations: Mapping[str, str] | None,
        count: int,
    ) -> _Series | None:
        namespace = obj.namespace or "default"  # events of cluster-scoped objects live in default
        name = f"{obj.name}.{time.time_ns():x}{next(self._names):x}"
        stamp = _timestamp(self.wall())
        meta: dict[str, object] = {"name": name, "namespace": namespace}
        if annotations:
            meta["annotations"] = dict(annotations)
        involved = {"apiVersion": obj.api_version, "kind": obj.kind, "name": obj.name, "uid": obj.uid}
        if obj.namespace:
            involved["namespace"] = obj.namespace
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": meta,
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": type_,
            "count": count,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
        }
        try:
            await self.api.request("POST", EVENTS.collection(namespace), body=body)
        except KubeError:
            return None  # best effort, as client-go's recorder: the next occurrence tries again
        self.created += 1
        now = self.clock()
        return _Series(name, namespace, count, now, now)

    async def _raise_count(self, series: _Series) -> bool:
        body = {"count": series.count, "lastTimestamp": _timestamp(self.wall())}
        try:
            await self.api.request(
                "PATCH",
                EVENTS.item(series.name, series.namespace),
                body=body,
                content_type="application/merge-patch+json",
            )
        except KubeError:
            return False  # expired (events live an hour) or refused: created anew with the count so far
        self.updated += 1
        return True
