"""A pod group's timestamps written back as KAI keeps them: annotations on the PodGroup.

``kai.scheduler/last-start-timestamp`` (min-runtime counts from it),
``kai.scheduler/stale-podgroup-timestamp`` (the stale-gang grace period counts from it) and
``kai.scheduler/last-eviction-timestamp`` (the preemption delay restarts from it), RFC 3339 in
UTC to the second as KAI writes them. An unset time removes its annotation. A restarted
scheduler reads them back with the PodGroup, so protections and timers carry on. Writes that
fail are retried with the next cycle's changes unless a newer value replaced them.

A pod group known only in memory (pods without a PodGroup object: the pod grouper is off, or
has not made it yet) has nowhere to keep its clocks. Rather than a PATCH that can only answer
404 (one per started job, a third of the apiserver's load in the kwok load test), its clocks
wait here until the object appears, or are dropped with the job; the pod grouper, creating the
object, takes them and writes them into it (``take_waiting``), so they cost no request of their own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Container, Mapping

from coordinator import JobClock
from k8s_adapter.api import KubeApi, KubeError
from k8s_adapter.kinds import POD_GROUPS
from kai_ray import labels as L

log = logging.getLogger(__name__)


def rfc3339(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def annotations_of(clock: JobClock) -> dict[str, str | None]:
    """The merge-patch value of each annotation (None deletes it)."""
    return {
        L.LAST_START_ANNOTATION: None if clock.last_start is None else rfc3339(clock.last_start),
        L.STALE_TIMESTAMP_ANNOTATION: None if clock.stale_since is None else rfc3339(clock.stale_since),
        L.LAST_EVICTION_ANNOTATION: None if clock.last_eviction is None else rfc3339(clock.last_eviction),
    }


class JobClockWriter:
    def __init__(self, api: KubeApi, concurrency: int = 16) -> None:
        self.api = api
        self.limit = asyncio.Semaphore(concurrency)
        self.retry: dict[str, JobClock] = {}
        self.latest: dict[str, JobClock] = {}  # the newest value asked for, while its write is open
        self.waiting: dict[str, JobClock] = {}  # groups with no PodGroup object yet
        self.writes = 0

    async def write(
        self,
        clocks: Mapping[str, JobClock],
        has_object: Callable[[str], bool] | None = None,
        live: Container[str] | None = None,
    ) -> None:
        """Write these clocks and any retried or waiting ones. With ``has_object``, a group
        without its object waits (while ``live``, the jobs that still exist, holds it)."""
        todo = {**self.retry, **self.waiting, **clocks}
        self.retry = {}
        self.waiting = {}
        self.latest.update(clocks)
        if has_object is not None:
            for key in [k for k in todo if not has_object(k)]:
                clock = todo.pop(key)
                if live is None or key in live:
                    self.waiting[key] = clock
                elif self.latest.get(key) is clock:
                    del self.latest[key]
        if todo:
            await asyncio.gather(*(self._write_one(key, clock) for key, clock in todo.items()))

    def take_waiting(self, key: str) -> JobClock | None:
        """The clocks waiting for PodGroup ``key``, handed to whoever creates the object (the pod
        grouper writes them into it); ``restore`` them if that create did not go through."""
        clock = self.waiting.pop(key, None)
        if clock is not None and self.latest.get(key) is clock:
            del self.latest[key]
        return clock

    def restore(self, key: str, clock: JobClock) -> None:
        """Clocks taken but not written: they wait again, unless a newer value came meanwhile."""
        if key not in self.waiting and key not in self.retry and key not in self.latest:
            self.waiting[key] = clock
            self.latest[key] = clock

    async def _write_one(self, key: str, clock: JobClock) -> None:
        namespace, name = key.split("/", 1)
        async with self.limit:
            try:
                await self.api.request(
                    "PATCH",
                    POD_GROUPS.item(name, namespace),
                    body={"metadata": {"annotations": annotations_of(clock)}},
                    content_type="application/merge-patch+json",
                )
            except KubeError as exc:
                if exc.status == 404:  # the group is gone, or the pod grouper has not created it yet
                    if self.latest.get(key) is clock:
                        del self.latest[key]
                    return
                log.info("timestamps of pod group %s not written (retried): %s", key, exc)
                if self.latest.get(key) is clock:  # a newer value, written since, must not be undone
                    self.retry[key] = clock
                return
        self.writes += 1
        if self.latest.get(key) is clock:
            del self.latest[key]
