"""Events expire, as kube-apiserver's do: it stores each Event with a lease of ``--event-ttl``
(one hour by default), renewed by every write, and etcd drops the Event when the lease runs out.
Without this, every pod a scheduler binds leaves a ``Scheduled`` Event behind for good and a
long run of the dev cluster grows without end.

The dev cluster keeps no write time per object, so an Event's last write is the latest of the
times it carries: its creation (the server's clock), ``lastTimestamp``, ``eventTime`` and
``series.lastObservedTime`` (the writer's clock, which is the server's on one machine).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta

from devcluster import errors
from devcluster.catalog import Catalog
from devcluster.clock import Clock, parse_timestamp
from devcluster.registry import Registry
from devcluster.store import Obj

EVENT_TTL_SECONDS = 3600.0  # kube-apiserver's --event-ttl default
EVENT_KINDS = (("", "v1"), ("events.k8s.io", "v1"))  # both serve Events; each is a table here
SWEEP_SECONDS = 60.0  # at most this long past its time an expired Event is still listed


def last_written(event: Obj) -> datetime | None:
    """The latest time an Event says it was written; None when it says none."""
    series = event.get("series") or {}
    stamps = (
        event.get("metadata", {}).get("creationTimestamp"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        series.get("lastObservedTime"),
    )
    times = [t for t in (parse_timestamp(s) for s in stamps if isinstance(s, str)) if t is not None]
    return max(times) if times else None


class EventExpiry:
    def __init__(self, registry: Registry, catalog: Catalog, clock: Clock, ttl: float) -> None:
        self.registry = registry
        self.catalog = catalog
        self.clock = clock
        self.ttl = ttl

    def sweep(self) -> int:
        """Delete the Events whose last write is ``ttl`` or more ago; how many went."""
        cutoff = self.clock.wall() - timedelta(seconds=self.ttl)
        gone = 0
        for group, version in EVENT_KINDS:
            rt = self.catalog.find(group, version, "events")
            if rt is None:
                continue
            expired = [e for e in self.registry.store.items(rt, None) if (last_written(e) or cutoff) <= cutoff]
            for event in expired:
                meta = event["metadata"]
                with contextlib.suppress(errors.ApiError):  # deleted meanwhile
                    self.registry.delete(rt, meta.get("namespace", ""), meta["name"], {"gracePeriodSeconds": 0})
                    gone += 1
        return gone

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.clock.real_seconds(min(self.ttl / 4, SWEEP_SECONDS)))
            self.sweep()
